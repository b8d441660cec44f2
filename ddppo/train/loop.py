"""The training loop: one update (collect -> advantages -> agree -> learn, arranged by the learning strategy) ->
reduce stats -> log / checkpoint / agree on stop.

Every rank runs this same loop over the parts train/builder.py made; it decides nothing about how they were
made (no mode, no concrete part is named here: each is seen through the small interface below). Per update,
every rank performs the same collectives in the same order (see ddppo/distributed/), whatever happened locally: a
preempted rollout, a skipped update, a signal.
"""

from __future__ import annotations

import logging
import math
import time
from collections import deque
from typing import Any, Callable, Protocol

import numpy as np
import torch

from ddppo import signals, timing
from ddppo.config import Config
from ddppo.distributed import DistContext
from ddppo.timing import Timer
from ddppo.train.objective import objective_line
from ddppo.train.stats import Reduced, StepStats, memory_usage, reduce_stats

log = logging.getLogger(__name__)

# stop flags, OR-ed over ranks once per update
STOP_TERM, STOP_REQUEUE, STOP_BUDGET, STOP_NONFINITE = 1, 2, 4, 8


class Outcome(Protocol):
    """One update, as a learning strategy returns it (train/learning.py's Outcome)."""

    collected: Any  # the rollout learned on, with its episode sums, scenes and diagnostics (a CollectResult)
    advantages: Any  # its advantages, as the estimator returned them
    result: Any  # the PPO update's loss terms and skipped steps (an UpdateResult)
    lr: float
    beta: float  # the KL coefficient the update used
    timings: dict[str, float]  # the update's phase timings
    objective: dict  # what it optimised: train/objective.py's sums on this rank


class Learning(Protocol):
    """How collection and learning are arranged (train/learning.py): one update per `step`."""

    def step(self, update: int) -> Outcome: ...


class Progress(Protocol):
    """Training progress (train/progress.py)."""

    update: int
    env_steps: int
    skipped_in_a_row: int
    kl_beta: float | None
    scene_window: Any  # train/stats.py's SceneWindow, or None

    def advance(self, update: int, env_steps: int, skipped_steps: int) -> None: ...

    def record(self, sums: Any, counts: Any, env_steps: int, seconds: float) -> None: ...

    def window_scalars(self) -> dict[str, float]: ...


class Checkpoints(Protocol):
    """The checkpoint manager (ddppo/checkpoint/manager.py)."""

    def save(self, update: int) -> bool: ...

    def checkpoints(self) -> list: ...


class Sink(Protocol):
    """Where the scalars go (train/metrics.py's MetricsWriter)."""

    def write(self, update: int, env_steps: int, scalars: dict[str, float]) -> None: ...

    def flush(self) -> None: ...


class Watchdog(Protocol):
    """Armed around each update (an update that overruns it ends the process: train/builder.py's
    UpdateWatchdog); NO_WATCHDOG by default."""

    def arm(self) -> None: ...

    def disarm(self) -> None: ...


class SceneCosts(Protocol):
    """The scenes' measured costs (train/scene_costs.py): summed every update, written at every checkpoint."""

    def add(self, table: np.ndarray) -> None: ...  # (scenes, columns): this update's, summed over the ranks

    def save(self) -> None: ...


class Placement(Protocol):
    """Moves scenes by their measured costs during the run (train/scene_costs.py's ScenePlacement)."""

    def after_update(self, update: int) -> bool: ...


class _NoWatchdog:
    def arm(self) -> None:
        """Nothing bounds an update."""

    def disarm(self) -> None:
        """Nothing to cancel."""


NO_WATCHDOG = _NoWatchdog()


class TrainingLoop:
    """`kl_adapt(beta, measured_kl) -> next beta` (ppo.kl_ref), `diagnose(window, memory_fraction)` (the
    bottleneck report, train/bottleneck.py), `started`: when the run started (time.monotonic, for
    run.time_budget_s), `scene_costs`: the scenes' measured costs, kept in the run directory, `placement`: what
    moves scenes by them during the run (both train/scene_costs.py)."""

    def __init__(self, cfg: Config, ctx: DistContext, learning: Learning, progress: Progress, checkpoints: Checkpoints,
                 writer: Sink, timer: Timer, diagnose: Callable[[list, float], Any], num_parameters: int,
                 kl_adapt: Callable[[float, float], float] | None = None, watchdog: Watchdog = NO_WATCHDOG,
                 started: float | None = None, scene_costs: SceneCosts | None = None,
                 placement: Placement | None = None):
        self.cfg, self.ctx, self.learning, self.progress = cfg, ctx, learning, progress
        self.checkpoints, self.writer, self.timer, self.diagnose = checkpoints, writer, timer, diagnose
        self.num_parameters, self.kl_adapt, self.watchdog = num_parameters, kl_adapt, watchdog
        self.started = time.monotonic() if started is None else started
        self.scene_costs = scene_costs  # RUN_DIR/scene_costs.json (train/scene_costs.py), None: not kept
        self.placement = placement  # None: scenes stay where the envs placed them
        self.last_save_failed = False  # rank 0: the newest checkpoint could not be written (disk full, ...)
        self.perf_window: deque = deque(maxlen=max(cfg.log.window, 20))
        self._last_print = self._last_diagnosis = 0.0  # when the progress line / the bottleneck report was logged
        # called with (update, Outcome) after each update's learning, before its stats: what a benchmark records
        # (the rollout, its advantages, the weights after learning) through the path `ddppo train` runs
        self.watchers: list[Callable[[int, Outcome], None]] = []

    def run(self) -> int:
        """Run until the step budget, a signal, the time budget or repeated non-finite updates; exit code."""
        cfg, progress = self.cfg, self.progress
        if progress.env_steps >= cfg.run.total_env_steps:
            log.info("run already finished: %d/%d env steps", progress.env_steps, cfg.run.total_env_steps)
            return 0
        self._last_print = self._last_diagnosis = time.monotonic()
        self._log_start()
        while True:
            self.watchdog.arm()
            try:
                stop, done = self._update(progress.update + 1)
            finally:  # an error inside the update leaves no watchdog armed
                self.watchdog.disarm()
            if stop or done:
                return self._finish(stop)

    def _update(self, update: int) -> tuple[int, bool]:
        """One update: learn, reduce the stats over the ranks, log, checkpoint; (stop flags, budget reached)."""
        cfg, ctx, progress = self.cfg, self.ctx, self.progress
        t0 = time.perf_counter()
        out = self.learning.step(update)
        for watch in self.watchers:
            watch(update, out)
        local = StepStats(out.collected, out.result, self._local_stop_flags(), time.perf_counter() - t0,
                          out.timings, *memory_usage(ctx.device), objective=out.objective)
        reduced = reduce_stats(ctx, local, cfg.ppo.epochs, cfg.env.num_envs, cfg.rollout.num_steps)
        progress.advance(update, reduced.env_steps_this_update, reduced.skipped_steps)
        if self.scene_costs is not None:
            self.scene_costs.add(reduced.scenes)
        if self.placement is not None:  # before a checkpoint, which then saves the moved envs' fresh episodes
            self.placement.after_update(update)
        self._warn_skipped(reduced.skipped_steps)
        if self.kl_adapt is not None:
            reduced.losses["kl_beta"] = out.beta
            progress.kl_beta = self.kl_adapt(progress.kl_beta, reduced.losses["kl_ref"])
        stop = reduced.stop_flags
        if progress.skipped_in_a_row >= cfg.ppo.max_skipped_updates:
            stop |= STOP_NONFINITE
        done = progress.env_steps >= cfg.run.total_env_steps
        with self.timer(timing.LOG_CHECKPOINT):
            scalars = self._scalars(reduced, out.lr)
            progress.metrics_record = self.writer.write(update, progress.env_steps, scalars)
            if stop or done or update % cfg.checkpoint.interval_updates == 0:
                self.last_save_failed = not self.checkpoints.save(update)
                if self.scene_costs is not None:
                    self.scene_costs.save()
        self.perf_window.append(reduced.perf)
        if ctx.is_main and (time.monotonic() - self._last_print >= cfg.log.interval_s or stop or done):
            self._last_print = time.monotonic()
            log.info("update %d | %s", update, self._progress_line(scalars))
        if ctx.is_main and (time.monotonic() - self._last_diagnosis >= cfg.log.bottleneck_interval_s or stop or done):
            self._last_diagnosis = time.monotonic()
            self._log_bottleneck()
        return stop, done

    def _log_start(self) -> None:
        cfg, ctx = self.cfg, self.ctx
        log.info("training %s on %d rank(s) x %d envs, from update %d", cfg.env.name, ctx.world_size,
                 cfg.env.num_envs, self.progress.update)
        log.info("policy.architecture=%s, %s parameters; torch threads per rank: %d intra-op, %d inter-op",
                 cfg.policy.architecture, f"{self.num_parameters:,}", torch.get_num_threads(),
                 torch.get_num_interop_threads())
        line = budget_line(cfg.run.total_env_steps, cfg.env.num_envs * cfg.rollout.num_steps * ctx.world_size)
        if line:
            log.info("%s", line)

    def _progress_line(self, scalars: dict[str, float]) -> str:
        return progress_line(self.progress.env_steps, self.cfg.run.total_env_steps, scalars["perf/fps"], scalars)

    def _log_bottleneck(self) -> None:
        window = list(self.perf_window)
        found = self.diagnose(window, max(p.get("perf/memory_fraction_max", 0.0) for p in window))
        if found is not None:
            log.info("%s", found.line())

    def _warn_skipped(self, skipped_steps: int) -> None:
        """Each update with skipped (non-finite) optimiser steps is logged."""
        if skipped_steps and self.ctx.is_main:
            ppo = self.cfg.ppo
            log.warning("update %d: %d of %d optimiser steps skipped: non-finite gradients (%d update(s) in a row; "
                        "the run stops at ppo.max_skipped_updates=%d)", self.progress.update, skipped_steps,
                        ppo.epochs * ppo.num_mini_batch, self.progress.skipped_in_a_row, ppo.max_skipped_updates)

    def _local_stop_flags(self) -> int:
        flags = 0
        sig = signals.pending()
        if sig:
            flags |= STOP_REQUEUE if sig == int(signals.signal.SIGUSR1) else STOP_TERM
        budget = self.cfg.run.time_budget_s
        if budget > 0 and time.monotonic() - self.started >= budget:
            flags |= STOP_BUDGET
        return flags

    def _finish(self, stop: int) -> int:
        self.writer.flush()
        unsaved = self._report_unsaved()
        progress = self.progress
        if stop & STOP_NONFINITE:
            log.error("stopping at update %d: %d consecutive updates had non-finite gradients "
                      "(ppo.max_skipped_updates=%d); lower ppo.lr or check the environment's rewards",
                      progress.update, progress.skipped_in_a_row, self.cfg.ppo.max_skipped_updates)
            return 1
        if stop:
            reasons = [n for f, n in ((STOP_REQUEUE, "SIGUSR1"), (STOP_TERM, "SIGTERM/SIGINT"),
                                      (STOP_BUDGET, "time budget")) if stop & f]
            log.info("stopping at update %d (%s); %s", progress.update, ", ".join(reasons),
                     "checkpoint NOT saved" if unsaved else "checkpoint saved")
            if stop & STOP_REQUEUE and self.ctx.is_main:
                signals.requeue_slurm_job()
        else:
            log.info("finished: %d env steps in %d updates", progress.env_steps, progress.update)
        return 1 if unsaved else 0

    def _report_unsaved(self) -> bool:
        """True, with an error naming what a resume would start from, when the final checkpoint was not written."""
        if not self.last_save_failed:
            return False
        newest = self.checkpoints.checkpoints()
        log.error("the final checkpoint (update %d) was not written; a resume continues from %s",
                  self.progress.update, newest[-1].name if newest else "scratch (no checkpoint on disk)")
        return True

    def _scalars(self, r: Reduced, lr: float) -> dict[str, float]:
        self.progress.record(r.episode_sums, r.episode_counts, r.env_steps_this_update, r.update_time_max)
        windowed = self.progress.window_scalars()
        out: dict[str, float] = {"fps": windowed.pop("fps"), "perf/fps": windowed.pop("perf/fps"),
                                 "perf/fps_update": r.env_steps_this_update / max(r.update_time_max, 1e-9),
                                 "loss/lr": lr}
        out.update(windowed)
        out["train/episodes"] = float(r.episode_counts[0])
        out.update(r.objective)
        out.update({f"loss/{k}": v for k, v in r.losses.items()})
        out.update(r.perf)
        out.update(r.preempt)
        out["loss/skipped_steps"] = float(r.skipped_steps)
        if self.progress.scene_window is not None:  # train/scene/<name>/*
            out.update(self.progress.scene_window.scalars(r))
        return out


# ---------------------------------------------------------------- the console line
def format_duration(seconds: float) -> str:
    if not math.isfinite(seconds) or seconds < 0:
        return "?"
    seconds = int(seconds)
    return f"{seconds // 3600:d}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def budget_line(total: int, per_update: int) -> str | None:
    """Where the run will stop when the budget is not a whole number of updates (None where it is)."""
    if per_update <= 0 or total % per_update == 0:
        return None
    updates = -(-total // per_update)
    return (f"run.total_env_steps={total:,} is not a whole number of updates of {per_update:,} env steps "
            f"(env.num_envs x rollout.num_steps x ranks): the run ends after {updates:,} updates, at about "
            f"{updates * per_update:,} steps (fewer where ranks are preempted)")


def progress_line(env_steps: int, total: int, fps: float, scalars: dict[str, float]) -> str:
    """One console line: steps / total, windowed fps, reward, success, ETA. Past the budget (the last update
    collects a whole rollout) it says the budget was reached, not a share over 100% and an ETA."""
    reached = env_steps > total  # at exactly the budget: 100.0% and an eta of 0
    steps = (f"steps {env_steps:,} (run.total_env_steps={total:,} reached)" if reached
             else f"steps {env_steps:,}/{total:,} ({100 * env_steps / total:.1f}%)")
    parts = [steps, f"fps {fps:,.0f}"]
    for tag, label in (("train/reward", "reward"), ("train/success", "success"), ("train/spl", "spl")):
        if tag in scalars and math.isfinite(scalars[tag]):
            parts.append(f"{label} {scalars[tag]:.3f}")
    parts += objective_line(scalars)
    if not reached:
        parts.append(f"eta {format_duration((total - env_steps) / fps if fps > 0 else float('inf'))}")
    return " | ".join(parts)
