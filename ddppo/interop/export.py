"""`ddppo export`: a run's checkpoint written in another trainer's format (habitat-baselines)."""

from __future__ import annotations

import io
from pathlib import Path

import torch

from ddppo import checkpoint as ckpt
from ddppo.config import ConfigError
from ddppo.errors import CheckpointError
from ddppo.interop.habitat_checkpoint import export_payload
from ddppo.rundir import atomic_write


def export_habitat_baselines(run_dir: str | Path, out: str | Path, checkpoint: str = "latest",
                             force: bool = False) -> Path:
    """`ddppo export RUN_DIR --format habitat-baselines -o OUT`: a run's checkpoint (the newest valid one, or
    the file `checkpoint`) as a habitat-baselines ckpt.N.pth. Refuses to replace an existing OUT unless
    `force`; the file is written atomically."""
    out = Path(out)
    if out.exists() and not force:
        raise ConfigError(f"{str(out)!r} exists; pass --force to replace it, or choose another -o path")
    if out.is_dir():
        raise ConfigError(f"-o {str(out)!r} is a directory; pass a file path such as {out / 'ckpt.0.pth'}")
    if checkpoint == "latest":
        found = ckpt.newest_valid(run_dir)
        if found is None:
            raise CheckpointError(f"{str(run_dir)!r} has no checkpoints to export; pass a run dir that `ddppo train` "
                                  f"wrote, or --checkpoint FILE")
        path, data = found
    else:
        path, data = Path(checkpoint), ckpt.load(checkpoint)
    if ckpt.foreign(data) is not None:
        raise CheckpointError(f"{str(path)!r} is already a {ckpt.foreign(data).format} checkpoint; nothing to export")
    cfg = ckpt.stored_config(data, str(path))
    if cfg.policy.architecture != "habitat_baselines":
        raise ConfigError(f"{str(path)!r} was trained with policy.architecture={cfg.policy.architecture!r}; only "
                          f"policy.architecture=habitat_baselines has habitat-baselines' parameters (train with it, "
                          f"or fine-tune from a habitat-baselines checkpoint)")
    payload = export_payload(data["model"], cfg, int(data["counters"].get("env_steps", 0)))
    buf = io.BytesIO()
    torch.save(payload, buf)
    return atomic_write(out, buf.getvalue(), fsync=True)
