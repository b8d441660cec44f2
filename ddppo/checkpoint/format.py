"""The checkpoint file: what it holds (format 2), atomic save, `weights_only` loading, the reader of format 1.

A checkpoint is one file `run.dir/checkpoints/ckpt-<update>.pt` (named, listed and pruned by ddppo/rundir/),
written by rank 0 for every rank through the checkpoint manager (checkpoint/manager.py), which alone decides
what goes in and what comes back out. Only tensors, numbers, strings, lists, tuples and dicts are stored, so
`torch.load(weights_only=True)` reads it; numpy arrays are stored as tensors and come back as numpy arrays.
The layout, key by key, with who writes and who reads each: docs/reference/checkpoint-format.md.
"""

from __future__ import annotations

import io
import logging
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ddppo.interop import foreign as foreign_checkpoint
from ddppo.errors import CheckpointError
from ddppo.rundir import RunDir
from ddppo.files import atomic_write

log = logging.getLogger(__name__)

FORMAT = 2  # what `save` writes
READABLE = (1, 2)  # what `load` reads (format 1 through `upgrade`)


# ------------------------------------------------------------ what it holds
# Format 2, one file per checkpoint update:
#   format                the number 2
#   config_yaml           the resolved config as YAML text
#   world_size            how many ranks wrote rank_states
#   <shared namespace>    one key per owner that every rank holds alike ("model", "optimizer", "counters",
#                         "reward_scale")
#   rank_states[r]        rank r's owners, {namespace: state} ("rng", "collector", "advantage", "reference", ...);
#                         None: that owner had nothing to save
# The file's own keys: no owner may take one of these names (CheckpointManager.register refuses it).
FILE_KEYS = ("format", "config_yaml", "world_size", "rank_states")
# Counters that older checkpoints lack, and what they mean there (applied once, by `counters_of`):
# ("episode_metrics": the names of the window's columns; None: ddppo.rollout.episode_metrics.EPISODE_KEYS;
# "scene_window": the per-scene window and its scene names, None: an empty window)
COUNTER_DEFAULTS = {"skipped_in_a_row": 0, "window": [], "kl_beta": None, "episode_metrics": None,
                    "scene_window": None}


def file_contents(shared: dict[str, Any], config_yaml: str, rank_states: list) -> dict[str, Any]:
    """The checkpoint of one update: the `shared` namespaces, the config, and every rank's namespaces."""
    clash = sorted(set(shared) & set(FILE_KEYS))
    if clash:
        raise ValueError(f"saved-state namespaces {clash} would overwrite the checkpoint file's own keys")
    return {**shared, "config_yaml": config_yaml, "world_size": len(rank_states), "rank_states": rank_states}


def counters_of(data: dict[str, Any]) -> dict[str, Any]:
    """A loaded checkpoint's counters, with COUNTER_DEFAULTS for the ones it predates."""
    return {**COUNTER_DEFAULTS, **data["counters"]}


# ------------------------------------------------------------ format 1 (ddppo until format 2), read only
# Format 1 had the same top-level keys, but spread each rank's owners over one record: "rng"; the collector's
# keys at the top level; the GRPO carry as "grpo_carry", the reference's recurrent state as "ref_hidden", and the
# reward scaler's return statistics and running returns as "reward_scale" and "reward_returns".
FORMAT1_OWNERS = {"grpo_carry": "advantage", "ref_hidden": "reference", "rng": "rng",
                  "reward_scale": "reward_scale", "reward_returns": "reward_returns"}  # record key -> namespace
FORMAT1_COLLECTOR = "collector"  # the owner whose keys format 1 spread at the top level of the record
# Namespaces once saved per rank, now shared (identical on every rank, so also restored at another world size):
# read from rank 0's record where a file has them there (format 1, and format 2 before they were shared).
NOW_SHARED = ("reward_scale",)


def format1_namespaces(record: dict[str, Any]) -> dict[str, Any]:
    """A format-1 rank record -> format 2's {namespace: state}: the owned keys (FORMAT1_OWNERS) under their
    owner's name, and everything else (obs, start, hidden, env, variable) the collector's."""
    out = {FORMAT1_OWNERS[k]: v for k, v in record.items() if k in FORMAT1_OWNERS}
    rest = {k: v for k, v in record.items() if k not in FORMAT1_OWNERS}
    if rest:
        out[FORMAT1_COLLECTOR] = rest
    return out


def shared_from_ranks(data: dict[str, Any]) -> dict[str, Any]:
    """`data` with each NOW_SHARED namespace at the top level, taken from rank 0's record where the file saved
    it per rank (and dropped from the rank records)."""
    records = data.get("rank_states") or []
    moved = [n for n in NOW_SHARED if any(isinstance(r, dict) and n in r for r in records)]
    if not moved:
        return data
    first = records[0] if isinstance(records[0], dict) else {}
    shared = {n: first.get(n) for n in moved if data.get(n) is None}
    ranks = [{k: v for k, v in r.items() if k not in moved} if isinstance(r, dict) else r for r in records]
    return {**data, **shared, "rank_states": ranks}


def upgrade(data: dict[str, Any]) -> dict[str, Any]:
    """A loaded file in the current layout: format 1's rank records become namespaces, namespaces now shared
    move out of the rank records; a current file as it is."""
    if data.get("format") == 1:
        data = {**data, "format": FORMAT, "rank_states": [format1_namespaces(r) for r in data["rank_states"]]}
    return shared_from_ranks(data)


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


def save(run_dir: str | Path, update: int, contents: dict[str, Any], keep_last: int) -> Path:
    """Write ckpt-<update>.pt holding `contents` (`file_contents`: what the checkpoint manager hands over)
    atomically (temp file, fsync, rename), then prune old ones.

    Refuses to write non-finite model or optimiser values. If writing fails (disk
    full), the temp file is removed and the previous checkpoints stay as they are.
    """
    for key in ("model", "optimizer"):
        if not all_finite(contents[key]):
            raise CheckpointError(f"refusing to save update {update}: non-finite values in the {key} state")
    final = RunDir(run_dir).checkpoint_path(update)
    # serialised in memory first: torch.save straight into a file on a full disk fails with an opaque
    # RuntimeError ("unexpected pos ..."); a plain write raises OSError(ENOSPC), which says what happened
    atomic_write(final, to_bytes({"format": FORMAT, **to_storable(contents)}), fsync=True)
    run = RunDir(run_dir)
    for newer, stale in run.set_aside_newer(update):
        log.warning("checkpoint %s is newer than update %d just saved; kept as %s", newer.name, update, stale.name)
    _fsync_dir(final.parent)
    run.prune_checkpoints(keep_last)
    return final


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
    if not isinstance(data, dict) or data.get("format") not in READABLE or "model" not in data:
        return _foreign(path, map_location, f"{str(path)!r} is not a ddppo checkpoint (format "
                                            f"{' or '.join(map(str, READABLE))} with a model)")
    return upgrade(from_storable(data))


def _foreign(path: Path, map_location: str | torch.device, not_ddppo: str) -> dict[str, Any]:
    """Another trainer's checkpoint (read without running its pickled code) as a ddppo-shaped dict: "model",
    "counters", and "foreign" (a ForeignCheckpoint) in place of "config_yaml"; else CheckpointError
    `not_ddppo`, or the refusal of a file that asks to run code."""
    try:
        model, info = foreign_checkpoint.read(path)
    except CheckpointError as err:
        if "refused" in str(err):  # say both: not ddppo's, and what the foreign reader refused
            raise CheckpointError(f"{not_ddppo}; {str(err).split(' is refused: ')[-1]}") from None
        raise CheckpointError(not_ddppo) from None
    return {"format": FORMAT, "model": {k: v.to(map_location) for k, v in model.items()},
            "counters": {"update": 0, "env_steps": info.env_steps}, "config_yaml": None,
            "foreign": info}


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
