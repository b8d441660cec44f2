"""The once-per-update statistics collective: episode metrics, losses, timings, stop flags.

Each rank packs one float64 vector; a single all-gather gives every rank the
whole (world_size, K) table, from which sums, means and min/mean/max over ranks
are computed identically everywhere (so every rank takes the same decisions).

Per-scene columns (rollout/scenes.py): each row carries its rollout's (scenes x SCENE_COLUMNS) table after the
episode metrics; the scene names are agreed once at start (`agree_scene_names`), so every row has the same
length and the number of collectives does not depend on the scenes.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import deque
from typing import Any, Callable, Iterable

import numpy as np
import torch

from ddppo.distributed import DistContext
from ddppo.ppo.loss import SCALAR_NAMES
from ddppo.ppo.update import EPOCH_KEYS, UPDATE_KEYS, UpdateResult
from ddppo.rollout.collector import DIAG_KEYS, CollectResult
from ddppo.rollout.episode_metrics import EPISODE_KEYS, metric_names
from ddppo.rollout.scenes import SCENE_COLUMNS, scene_names, scene_scalars
from ddppo.train.objective import reduce_sums

from ddppo.timing import PHASES, STRAGGLER_WAIT

log = logging.getLogger(__name__)

# every term of LossOutput (a new one is carried without a change here), then what the update measures
LOSS_KEYS = SCALAR_NAMES + UPDATE_KEYS


def loss_keys(epochs: int) -> tuple[str, ...]:
    """Every loss/diagnostic key, the per-epoch staleness diagnostics included (same on every rank)."""
    return LOSS_KEYS + tuple(f"epoch{e}/{k}" for e in range(epochs) for k in EPOCH_KEYS)


# the head of each rank's row, read by name (`_col`): one number per rank each
_HEAD = ("steps", "preempted", "stop_flags", "skipped", "update_time", "rss_gb", "memory_fraction", "env_steps",
         "rank_weight", *DIAG_KEYS)


def _col(head: np.ndarray, name: str) -> np.ndarray:
    """The head column `name` (a _HEAD entry) of every rank."""
    return head[:, _HEAD.index(name)]


@dataclasses.dataclass
class StepStats:
    """What one rank contributes for one update."""

    collected: CollectResult
    result: UpdateResult
    stop_flags: int
    update_time: float
    timings: dict[str, float]
    rss_gb: float = 0.0  # resident memory of this rank
    memory_fraction: float = 0.0  # the tighter of host RSS / RAM and CUDA max allocated / device memory
    objective: dict = dataclasses.field(default_factory=dict)  # train/objective.py's sums: the same tags everywhere


@dataclasses.dataclass
class Reduced:
    """The same on every rank after the collective."""

    episode_sums: np.ndarray
    episode_counts: np.ndarray
    env_steps_this_update: int
    update_time_max: float
    skipped_steps: int
    stop_flags: int
    losses: dict[str, float]
    perf: dict[str, float]
    preempt: dict[str, float]
    scenes: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros((0, len(SCENE_COLUMNS))))  # summed
    objective: dict = dataclasses.field(default_factory=dict)  # what is optimised (train/objective.py), reduced


def pack(s: StepStats, keys: tuple[str, ...]) -> torch.Tensor:
    named = {"steps": s.collected.steps, "preempted": float(s.collected.preempted), "stop_flags": s.stop_flags,
             "skipped": s.result.skipped_steps, "update_time": s.update_time, "rss_gb": s.rss_gb,
             "memory_fraction": s.memory_fraction, "env_steps": s.collected.env_steps,
             "rank_weight": s.collected.rollout.rank_weight, **s.collected.diag}
    head = [named.get(k, 0.0) for k in _HEAD]
    losses = [s.result.stats.get(k, float("nan")) for k in keys]
    phases = [s.timings.get(p, 0.0) for p in PHASES]
    scenes = list(np.asarray(s.collected.scenes, np.float64).reshape(-1))
    objective = [x for pair in s.objective.values() for x in pair]
    return torch.tensor(head + list(s.collected.episode_sums) + list(s.collected.episode_counts) + scenes + losses
                        + phases + objective, dtype=torch.float64)


def unpack(table: np.ndarray, keys: tuple[str, ...], num_envs: int, num_steps: int,
           n_ep: int = len(EPISODE_KEYS), n_scenes: int = 0, objective: tuple[str, ...] = ()) -> Reduced:
    """The reduced stats of the (world_size, K) table; `n_ep`: how many episode metrics each row carries,
    `n_scenes`: how many scenes, `objective`: the tags of train/objective.py's sums, at the end of each row."""
    n_loss = len(keys)
    head = table[:, : len(_HEAD)]
    col = len(_HEAD)
    ep_sums = table[:, col: col + n_ep].sum(0)
    ep_counts = table[:, col + n_ep: col + 2 * n_ep].sum(0)
    col += 2 * n_ep
    n_sc = n_scenes * len(SCENE_COLUMNS)
    scenes = table[:, col: col + n_sc].sum(0).reshape(n_scenes, len(SCENE_COLUMNS))
    col += n_sc
    loss_table = table[:, col: col + n_loss]
    phase_table = table[:, col + n_loss: col + n_loss + len(PHASES)]
    optimised = reduce_sums(objective, table[:, col + n_loss + len(PHASES):]) if objective else {}
    # every column reduced at once (one numpy call per reduction, not per key: 110 keys at 20 epochs): NaN-ignoring
    # mean / min / max over ranks, NaN where no rank has a finite value
    present = ~np.isnan(loss_table)
    mean = np.where(present, loss_table, 0.0).sum(0) / np.maximum(present.sum(0), 1)
    low = np.where(present, loss_table, np.inf).min(0)
    high = np.where(present, loss_table, -np.inf).max(0)
    defined = np.isfinite(loss_table).any(0)
    pick = [low if k.endswith("ratio_min") else high if k.endswith("ratio_max") else mean for k in keys]
    losses = {k: float(col[i]) if defined[i] else float("nan") for i, (k, col) in enumerate(zip(keys, pick))}
    means, mins, maxs = (phase_table.mean(0).tolist(), phase_table.min(0).tolist(), phase_table.max(0).tolist())
    perf = {}
    for i, phase in enumerate(PHASES):
        perf[f"perf/{phase}_s"] = means[i]
        perf[f"perf/{phase}_s_min"] = mins[i]
        perf[f"perf/{phase}_s_max"] = maxs[i]
    perf["perf/update_s"] = float(_col(head, "update_time").max())
    perf["perf/rss_gb_max"] = float(_col(head, "rss_gb").max())
    perf["perf/memory_fraction_max"] = float(_col(head, "memory_fraction").max())
    for k in DIAG_KEYS:  # per-rollout diagnostics: min/max over ranks where they are extremes
        reduce = np.min if k.endswith("_min") else np.max if k.endswith("_max") else np.mean
        perf[f"perf/rollout_{k}"] = float(reduce(_col(head, k)))
    steps = _col(head, "steps")
    preempt = {
        "preempt/steps_fraction_min": float(steps.min() / num_steps),
        "preempt/steps_fraction_mean": float(steps.mean() / num_steps),
        "preempt/num_preempted": float(_col(head, "preempted").sum()),
        "preempt/straggler_wait_s_max": float(phase_table[:, PHASES.index(STRAGGLER_WAIT)].max()),
        "preempt/rank_weight_max": float(_col(head, "rank_weight").max()),
    }
    flags = 0
    for f in _col(head, "stop_flags").astype(np.int64):
        flags |= int(f)
    return Reduced(ep_sums, ep_counts, int(_col(head, "env_steps").sum()), float(_col(head, "update_time").max()),
                   int(_col(head, "skipped").max()), flags, losses, perf, preempt, scenes, optimised)


def memory_usage(device: torch.device) -> tuple[float, float]:
    """(RSS in GB, the tighter of RSS / RAM and CUDA max allocated / device memory)."""
    import psutil

    rss = psutil.Process().memory_info().rss
    fraction = rss / psutil.virtual_memory().total
    if device.type == "cuda":
        total = torch.cuda.get_device_properties(device).total_memory
        fraction = max(fraction, torch.cuda.max_memory_allocated(device) / total)
    return rss / 1e9, fraction


def reduce_stats(ctx: DistContext, local: StepStats, epochs: int, num_envs: int, num_steps: int) -> Reduced:
    keys = loss_keys(epochs)
    return unpack(ctx.all_gather_stats(pack(local, keys)).numpy(), keys, num_envs, num_steps,
                  len(local.collected.episode_sums), int(np.shape(local.collected.scenes)[0]), tuple(local.objective))


def agree_metric_names(ctx: DistContext, local: tuple[str, ...]) -> tuple[str, ...]:
    """The episode metric names every rank aggregates: the union of every rank's (envs of one config declare the
    same names; a union still gives every rank the same columns if they differ), EPISODE_KEYS first. Two
    collectives at start, the same on every rank."""
    return _agreed_union(ctx, local, metric_names)


def agree_scene_names(ctx: DistContext, local: tuple[str, ...]) -> tuple[str, ...]:
    """The scene names every rank tallies (rollout/scenes.py): the sorted union of every rank's declared scenes,
    so ranks playing different scenes still pack the same columns. The same two collectives at start on every
    rank, whether or not its envs have scenes."""
    return _agreed_union(ctx, local, scene_names)


def _agreed_union(ctx: DistContext, local: tuple[str, ...],
                  order: Callable[[Iterable[str]], tuple[str, ...]]) -> tuple[str, ...]:
    """`order` of the union of every rank's `local` names, the same on every rank: gathered on rank 0, ordered
    there, broadcast (two collectives)."""
    gathered = ctx.gather_objects(list(local))
    union = order(n for names in gathered for n in names) if gathered is not None else None
    return tuple(ctx.broadcast_object(union))


class SceneWindow:
    """The per-scene tables of the last `size` updates (train/scene/* is windowed like train/*), saved with the
    training progress (train/progress.py) under the scene names the ranks agreed at start."""

    def __init__(self, names: tuple[str, ...], size: int):
        self.names = tuple(names)
        self.tables: deque = deque(maxlen=max(1, size))

    def scalars(self, r: Reduced) -> dict[str, float]:
        if not self.names:
            return {}
        self.tables.append(r.scenes)
        return scene_scalars(self.names, sum(self.tables))

    def state_dict(self) -> dict[str, Any]:
        return {"names": list(self.names), "tables": [np.asarray(t, np.float64) for t in self.tables]}

    def load_state_dict(self, state: dict[str, Any] | None) -> None:
        """The saved window; None (a checkpoint from before it was saved) or other scene names: an empty one."""
        self.tables.clear()
        if state is None:
            return
        saved = tuple(str(n) for n in state["names"])
        if saved != self.names:
            log.info("train/scene/* starts with an empty window: the checkpoint's scenes %s are not this run's %s",
                     list(saved), list(self.names))
            return
        for table in state["tables"]:  # columns are only ever appended: an older table lacks the newest (zeros)
            table = np.asarray(table, np.float64).reshape(len(saved), -1) if saved else np.zeros((0, 0))
            self.tables.append(np.pad(table, ((0, 0), (0, len(SCENE_COLUMNS) - table.shape[1]))))
