"""Checkpoints: atomic save, keep-last-k, newest-valid discovery, `weights_only` loading.

A checkpoint is one file `run.dir/checkpoints/ckpt-<update>.pt` (named, listed and pruned by ddppo/rundir.py) written
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

from ddppo.config import SHAPE_KEYS, Config, ConfigError, diff_keys, from_yaml_text, get_key
from ddppo.interop import foreign as foreign_checkpoint
from ddppo.interop.foreign import ForeignCheckpoint
from ddppo.errors import CheckpointError  # noqa: F401  (re-exported: callers use ckpt.CheckpointError)
from ddppo.rundir import RunDir, atomic_write

log = logging.getLogger(__name__)

FORMAT = 1


# ------------------------------------------------------------ what it holds
# One file per checkpoint update, written by rank 0 (Trainer._save) and read back once by train/resume.py:
#   model, optimizer      state_dicts of the policy and the optimiser
#   counters              the training progress every rank agrees on (Trainer.state_dict()["counters"])
#   config_yaml           the resolved config as YAML text
#   world_size            how many ranks wrote rank_states
#   rank_states[r]        rank r's owners (Trainer.state_dict()["rank"]), one namespace each, as `rank_record`
#                         lays them out: "rng", the collector's keys at the top level (observation, start
#                         flags, recurrent state, env state), "grpo_carry" (advantage), "ref_hidden" (reference),
#                         and any other owner under its own name
# Counters that older checkpoints lack, and what they mean there (applied once, by `counters_of`):
# ("episode_metrics": the names of the window's columns; None: ddppo.rollout.episode_metrics.EPISODE_KEYS)
COUNTER_DEFAULTS = {"skipped_in_a_row": 0, "window": [], "kl_beta": None, "episode_metrics": None}
# Per-rank namespaces stored under another key since format 1; the collector's state is the record itself.
_RECORD_KEYS = {"advantage": "grpo_carry", "reference": "ref_hidden"}
_SPREAD = "collector"


def payload(model: dict, optimizer: dict, counters: dict, config_yaml: str, rank_states: list) -> dict[str, Any]:
    """The checkpoint of one update, as `save` writes it; `rank_states` are `rank_record`s."""
    return {"model": model, "optimizer": optimizer, "counters": counters, "config_yaml": config_yaml,
            "world_size": len(rank_states), "rank_states": rank_states}


def counters_of(data: dict[str, Any]) -> dict[str, Any]:
    """A loaded checkpoint's counters, with COUNTER_DEFAULTS for the ones it predates."""
    return {**COUNTER_DEFAULTS, **data["counters"]}


def rank_record(namespaces: dict[str, Any]) -> dict[str, Any]:
    """One rank's owners' states {namespace: state} -> the rank_states entry of the file."""
    record = dict(namespaces.get(_SPREAD) or {})
    for name, state in namespaces.items():
        if name != _SPREAD and state is not None:
            record[_RECORD_KEYS.get(name, name)] = state
    return record


def rank_namespaces(record: dict[str, Any], names: Any) -> dict[str, Any]:
    """Inverse of `rank_record` for the owners `names`: {namespace: state}, only those the record holds (an
    older file lacks the newer ones). The collector's state is what no other namespace claims."""
    claimed = {_RECORD_KEYS.get(n, n): n for n in names if n != _SPREAD}
    out = {claimed[k]: v for k, v in record.items() if k in claimed}
    if _SPREAD in names:
        rest = {k: v for k, v in record.items() if k not in claimed and k not in _RECORD_KEYS.values()}
        if rest:
            out[_SPREAD] = rest
    return out


# ------------------------------------------------------------ does it fit (training, evaluation, interop)
# Keys that may differ from the checkpoint's without changing the model: the per-rank environment layout
# (a resumed training starts its environments afresh; evaluation runs its own counts).
ENV_LAYOUT_KEYS = ("env.num_envs", "env.num_workers")
ACTION_KEYS = ("actor.weight", "action_distribution.linear.weight")  # the action head of each architecture


def shape_changes(stored: Config, cfg: Config) -> str:
    """`key: stored -> now, ...` for the shape-affecting keys (config.SHAPE_KEYS) that differ; "" if none."""
    return _changes(stored, cfg, [k for k in diff_keys(stored, cfg) if k in SHAPE_KEYS])


def setting_changes(stored: Config, cfg: Config, prefixes: tuple[str, ...] = ("env.", "policy.")) -> list[str]:
    """Keys under `prefixes` that differ from the checkpoint's config, the environment layout aside."""
    return [k for k in diff_keys(stored, cfg) if k.startswith(prefixes) and k not in ENV_LAYOUT_KEYS]


def _changes(stored: Config, cfg: Config, keys: list[str]) -> str:
    return ", ".join(f"{k}: {get_key(stored, k)!r} -> {get_key(cfg, k)!r}" for k in keys)


def check_fits(data: dict[str, Any], cfg: Config, own: dict[str, Any] | None, where: str, fix: str) -> None:
    """ConfigError naming the keys when checkpoint `data` (as `load` returns it) cannot run with `cfg` and the
    model whose state_dict is `own` (None: the config alone). `fix`: what to do about a changed shape key."""
    info = foreign(data)
    if info is not None:
        found = info.problems(cfg)
        if not found and own is not None:
            found = tensor_problems(data["model"], own)
        if found:
            raise ConfigError(f"{where} ({info.format}) does not fit this config: {'; '.join(found[:6])}; set these "
                              f"keys to the checkpoint's values")
        return
    stored = stored_config(data, where)
    changed = shape_changes(stored, cfg)
    if changed:
        raise ConfigError(f"{where} was trained with a different model shape ({changed}); {fix}")
    found = tensor_problems(data["model"], own) if own is not None else []
    if found:
        keys = _changes(stored, cfg, setting_changes(stored, cfg)) or "none found"
        raise ConfigError(f"{where} does not fit this config's environment and model ({'; '.join(found[:6])}); "
                          f"keys that differ from the checkpoint's config: {keys}")


def stored_config(data: dict[str, Any], where: str = "checkpoint") -> Config:
    """The config a ddppo checkpoint was trained with (validated against this schema)."""
    return from_yaml_text(data["config_yaml"], where)


def foreign(data: dict[str, Any]) -> ForeignCheckpoint | None:
    """What another trainer's checkpoint says besides its weights (ddppo/interop/foreign.py); None for ddppo's."""
    return data.get("foreign")


def tensor_problems(saved: dict[str, Any], own: dict[str, Any]) -> list[str]:
    """Where a checkpoint's model state_dict does not fit this model's: observation keys, action count,
    tensor shapes and names."""
    problems = []
    obs_had = sorted({k.split(".")[1] for k in saved if k.startswith("encoders.")})
    obs_now = sorted({k.split(".")[1] for k in own if k.startswith("encoders.")})
    if obs_had != obs_now:
        problems.append(f"observation keys: checkpoint {obs_had}, this env {obs_now}")
    actions = [k for k in ACTION_KEYS if k in saved and k in own and saved[k].shape[0] != own[k].shape[0]]
    problems += [f"action space: checkpoint {saved[k].shape[0]} actions/dims, this env {own[k].shape[0]}"
                 for k in actions]
    problems += [f"{k}: checkpoint {tuple(saved[k].shape)}, this config {tuple(own[k].shape)}"
                 for k in sorted(set(own) & set(saved)) if own[k].shape != saved[k].shape and k not in actions]
    missing, unexpected = sorted(set(own) - set(saved)), sorted(set(saved) - set(own))
    if (missing or unexpected) and obs_had == obs_now:
        problems.append(f"tensors missing {missing[:4]}, unexpected {unexpected[:4]}")
    return problems


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
    device's RNG state (action sampling runs there) and, for the record, its index."""
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
    """Restore `rng_state`'s states. The CUDA one goes onto whichever CUDA device this rank uses now (a
    requeue may give the rank another device index; the generator's state does not depend on the device);
    without CUDA it has nowhere to go. States may arrive on the device (map_location): RNG states are CPU
    byte tensors."""
    torch.set_rng_state(state["torch"].cpu())
    np.random.set_state(tuple(state["numpy"]))
    random.setstate(state["python"])
    if "cuda" in state and device is not None and device.type == "cuda":
        torch.cuda.set_rng_state(state["cuda"].cpu(), torch.device("cuda", _cuda_index(device)))


class RngState:
    """The saved-state owner of this process's RNGs (namespace "rng")."""

    def __init__(self, device: torch.device | None = None):
        self.device = device

    def state_dict(self) -> dict[str, Any]:
        return rng_state(self.device)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        set_rng_state(state, self.device)


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
    if not isinstance(data, dict) or data.get("format") != FORMAT or "model" not in data:
        return _foreign(path, map_location, f"{str(path)!r} is not a ddppo checkpoint (format {FORMAT} with a model)")
    return from_storable(data)


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
