"""Checkpoints other trainers wrote, as one type: the one way to ask "is this a foreign checkpoint?".

`ddppo/checkpoint/format.py` `load` reads ddppo's own files; a file that is not one goes to `read` here, which asks
each foreign format's reader in turn (habitat-baselines today: ddppo/interop/habitat_checkpoint.py). The loaded
checkpoint then carries a `ForeignCheckpoint` under "foreign" in place of a config, and callers ask
`checkpoint.foreign(data)`: None for ddppo's own files.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from ddppo.errors import CheckpointError
from ddppo.interop import habitat_checkpoint

READERS = {habitat_checkpoint.FORMAT_NAME: habitat_checkpoint}  # format name -> its module (read, problems)


@dataclasses.dataclass(frozen=True)
class ForeignCheckpoint:
    """What a foreign file says besides its weights."""

    format: str  # a key of READERS, e.g. "habitat-baselines"
    path: Path
    env_steps: int
    summary: dict[str, Any]  # the sizes its weights fix, under ddppo's config key names
    config_values: dict[str, Any]  # the sizes its own config states, where it has one

    @property
    def name(self) -> str:
        """The file's own name without its suffix (`ckpt.3` for ckpt.3.pth): what eval outputs are named by."""
        return self.path.name[: -len(self.path.suffix)] if self.path.suffix else self.path.name

    def problems(self, cfg: Any) -> list[str]:
        """Where it and this run's config disagree, naming the keys."""
        return READERS[self.format].problems(self, cfg)


def read(path: str | Path) -> tuple[dict[str, Any], ForeignCheckpoint]:
    """(model state_dict in ddppo's names, what else it says); CheckpointError from the last reader when no
    reader takes it (its message says whether the file was refused for asking to run code)."""
    error: CheckpointError | None = None
    for name, reader in READERS.items():
        try:
            imported = reader.read(path)
        except CheckpointError as err:
            error = err
            continue
        return imported["model"], ForeignCheckpoint(name, Path(path), imported["step"], imported["summary"],
                                                    imported["config_values"])
    raise error or CheckpointError(f"{str(path)!r} is in no format ddppo reads")
