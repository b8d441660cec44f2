"""Checkpoints: atomic save, keep-last-k, newest-valid discovery, `weights_only` loading.

A checkpoint is one file `run.dir/checkpoints/ckpt-<update>.pt` (named and listed by ddppo/rundir.py) written
by rank 0:
model, optimiser, counters, the resolved config as YAML text, the world size,
and every rank's own state (RNG states, environment state, the observation and
recurrent state the next rollout starts from). Only tensors, numbers, strings,
lists, tuples and dicts are stored, so `torch.load(weights_only=True)` reads it;
numpy arrays are stored as tensors and come back as numpy arrays.
"""

from __future__ import annotations

import io
import logging
import math
import os
import random
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ddppo.interop import habitat_checkpoint
from ddppo.errors import CheckpointError  # noqa: F401  (re-exported: callers use ckpt.CheckpointError)
from ddppo.rundir import RunDir, atomic_write, checkpoint_update

log = logging.getLogger(__name__)

FORMAT = 1


# ------------------------------------------------------------ what it holds
# One file per checkpoint update, written by rank 0 (Trainer._save) and read back by train/state.restore:
#   model, optimizer      state_dicts of the policy and the optimiser
#   counters              Trainer.state_dict(): the training progress every rank agrees on
#   config_yaml           the resolved config as YAML text
#   world_size            how many ranks wrote rank_states
#   rank_states[r]        Trainer.rank_state_dict() of rank r: RNG states, the collector's state_dict
#                         (observation, start flags, recurrent state, env state), GRPO carry, reference recurrent state
# Counters that older checkpoints lack, and what they mean there:
COUNTER_DEFAULTS = {"skipped_in_a_row": 0, "window": [], "kl_beta": None}


def payload(model: dict, optimizer: dict, counters: dict, config_yaml: str, rank_states: list) -> dict[str, Any]:
    """The checkpoint of one update, as `save` writes it."""
    return {"model": model, "optimizer": optimizer, "counters": counters, "config_yaml": config_yaml,
            "world_size": len(rank_states), "rank_states": rank_states}


def counters_of(data: dict[str, Any]) -> dict[str, Any]:
    """A loaded checkpoint's counters, with COUNTER_DEFAULTS for the ones it predates."""
    return {**COUNTER_DEFAULTS, **data["counters"]}


# --------------------------------------------------------------- conversion
def to_storable(obj: Any) -> Any:
    """numpy arrays -> tensors (tagged), recursively; everything else unchanged."""
    if isinstance(obj, np.ndarray):
        return {"__ndarray__": torch.from_numpy(np.ascontiguousarray(obj)).clone()}
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, dict):
        return {k: to_storable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_storable(v) for v in obj)
    return obj


def from_storable(obj: Any) -> Any:
    if isinstance(obj, dict):
        if set(obj) == {"__ndarray__"}:
            return obj["__ndarray__"].cpu().numpy()  # loaded with map_location=cuda it arrives there
        return {k: from_storable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(from_storable(v) for v in obj)
    return obj


def to_bytes(obj: Any) -> bytes:
    """Serialise tensors-and-containers for sending between ranks (pickled objects are not allowed)."""
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def from_bytes(data: bytes) -> Any:
    return torch.load(io.BytesIO(data), weights_only=True)


def rng_state(device: torch.device | None = None) -> dict[str, Any]:
    """This process's torch, numpy (legacy global) and python RNG states; on a CUDA `device` also that
    device's RNG state (action sampling runs there) and its index."""
    np_state = np.random.get_state()
    state = {
        "torch": torch.get_rng_state(),
        "numpy": [np_state[0], np_state[1], *np_state[2:]],
        "python": random.getstate(),
    }
    if device is not None and device.type == "cuda":
        index = _cuda_index(device)
        state["cuda"] = torch.cuda.get_rng_state(torch.device("cuda", index))
        state["cuda_device"] = index
    return state


def set_rng_state(state: dict[str, Any], device: torch.device | None = None) -> None:
    """Restore `rng_state`'s states; the CUDA one only onto the same CUDA device index it was saved from
    (another device, or none, keeps its own). States may arrive on the device (map_location): RNG
    states are CPU byte tensors."""
    torch.set_rng_state(state["torch"].cpu())
    np.random.set_state(tuple(state["numpy"]))
    random.setstate(state["python"])
    if "cuda" in state and device is not None and device.type == "cuda":
        index = _cuda_index(device)
        if int(state["cuda_device"]) == index:
            torch.cuda.set_rng_state(state["cuda"].cpu(), torch.device("cuda", index))
        else:
            log.warning("CUDA RNG state was saved on cuda:%s, this rank runs on cuda:%d: not restored",
                        state["cuda_device"], index)


def _cuda_index(device: torch.device) -> int:
    return device.index if device.index is not None else torch.cuda.current_device()


# -------------------------------------------------------------------- files
def checkpoint_dir(run_dir: str | Path) -> Path:
    return RunDir(run_dir).checkpoint_dir


def list_checkpoints(run_dir: str | Path) -> list[Path]:
    """Checkpoint files in the run dir, oldest first."""
    return RunDir(run_dir).checkpoints()


def all_finite(state: Any) -> bool:
    if isinstance(state, torch.Tensor):
        return not state.is_floating_point() or bool(torch.isfinite(state).all())
    if isinstance(state, dict):
        return all(all_finite(v) for v in state.values())
    if isinstance(state, (list, tuple)):
        return all(all_finite(v) for v in state)
    if isinstance(state, float):
        return math.isfinite(state)
    return True


def save(run_dir: str | Path, update: int, payload: dict[str, Any], keep_last: int) -> Path:
    """Write ckpt-<update>.pt atomically (temp file, fsync, rename), then prune old ones.

    Refuses to write non-finite model or optimiser values. If writing fails (disk
    full), the temp file is removed and the previous checkpoints stay as they are.
    """
    for key in ("model", "optimizer"):
        if not all_finite(payload[key]):
            raise CheckpointError(f"refusing to save update {update}: non-finite values in the {key} state")
    final = RunDir(run_dir).checkpoint_path(update)
    # serialised in memory first: torch.save straight into a file on a full disk fails with an opaque
    # RuntimeError ("unexpected pos ..."); a plain write raises OSError(ENOSPC), which says what happened
    atomic_write(final, to_bytes({"format": FORMAT, **to_storable(payload)}), fsync=True)
    d = final.parent
    _set_aside_newer(run_dir, update)
    _fsync_dir(d)
    for old in list_checkpoints(run_dir)[:-keep_last]:
        old.unlink(missing_ok=True)
    return final


def _set_aside_newer(run_dir: str | Path, update: int) -> None:
    """Checkpoints of later updates than the one just written belong to an abandoned timeline
    (a corrupt newest one that resume skipped, or a run started with checkpoint.resume=false).
    Left in place they would outrank the new checkpoint in keep-last pruning (deleting it) and
    on the next resume; they are renamed to `*.stale`, never deleted."""
    for path in list_checkpoints(run_dir):
        if checkpoint_update(path) > update:
            stale = path.with_name(path.name + ".stale")
            os.replace(path, stale)
            log.warning("checkpoint %s is newer than update %d just saved; kept as %s", path.name, update,
                        stale.name)


def _fsync_dir(d: Path) -> None:
    try:
        fd = os.open(d, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def load(path: str | Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Read one checkpoint with weights_only=True; CheckpointError if it is not a valid ddppo checkpoint."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint {str(path)!r} {'is a directory' if path.is_dir() else 'does not exist'}")
    try:
        data = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as err:  # truncated zip, garbage, pickled objects (a habitat-baselines config)
        return _foreign(path, map_location, f"{str(path)!r} is not a readable ddppo checkpoint "
                                            f"({_load_failure(err)})")
    if not isinstance(data, dict) or data.get("format") != FORMAT or "model" not in data:
        return _foreign(path, map_location, f"{str(path)!r} is not a ddppo checkpoint (format {FORMAT} with a model)")
    return from_storable(data)


def _foreign(path: Path, map_location: str | torch.device, not_ddppo: str) -> dict[str, Any]:
    """A habitat-baselines checkpoint (read without running its pickled code) as a ddppo-shaped dict:
    "model", "counters", and "habitat_baselines" (its sizes) in place of "config_yaml"; else CheckpointError
    `not_ddppo`, or the refusal of a file that asks to run code."""
    try:
        imported = habitat_checkpoint.read(path)
    except CheckpointError as err:
        if "refused" in str(err):  # say both: not ddppo's, and what the habitat-baselines reader refused
            raise CheckpointError(f"{not_ddppo}; {str(err).split(' is refused: ')[-1]}") from None
        raise CheckpointError(not_ddppo) from None
    model = {k: v.to(map_location) for k, v in imported.pop("model").items()}
    return {"format": FORMAT, "model": model,
            "counters": {"update": 0, "env_steps": imported["step"]}, "config_yaml": None,
            "habitat_baselines": imported}


def _load_failure(err: Exception) -> str:
    """One line on why torch.load failed. For the weights-only unpickler, its reason (e.g. `unsupported
    GLOBAL posix.system`), without torch's advice to retry with weights_only=False, which runs the file's code."""
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    if lines and lines[0].startswith("Weights only load failed"):
        reasons = [ln.split("WeightsUnpickler error:")[-1].strip() for ln in lines[1:]
                   if not ln.startswith(("(1)", "(2)", "Please file an issue", "Check the documentation"))]
        reason = next((r for r in reasons if r), "not only tensors and plain data").split(". ")[0]
        return f"refused by the weights-only loader: {reason[:200]}"
    return f"{type(err).__name__}: {(lines or ['(no message)'])[0][:200]}"


def newest_valid(run_dir: str | Path, map_location: str | torch.device = "cpu") -> tuple[Path, dict] | None:
    """The newest checkpoint that loads; broken ones are skipped with a warning.

    Returns None when there are no checkpoints; raises CheckpointError when
    there are some but none is valid.
    """
    paths = list_checkpoints(run_dir)
    for path in reversed(paths):
        try:
            return path, load(path, map_location)
        except CheckpointError as err:
            log.warning("skipping checkpoint: %s", err)
    if paths:
        raise CheckpointError(f"none of the {len(paths)} checkpoints in {str(checkpoint_dir(run_dir))!r} is "
                              f"valid; move them away to start afresh, or pass checkpoint.path=FILE")
    return None
