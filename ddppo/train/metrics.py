"""The metrics sinks: TensorBoard + metrics.jsonl (+ Weights & Biases, optional) on rank 0, nothing elsewhere.

Tags are grouped `train/`, `loss/`, `perf/`, `preempt/`, `eval/`; the TensorBoard
step is the global env-step count. metrics.jsonl holds one flat JSON object per
update with `update`, `env_steps`, `wall_time`, `fps` and the same tags.
On resume, lines and events after the checkpoint are dropped first, so the
logs never hold an update twice, and the checkpoint's own update's line is put back
from the checkpoint's copy if a kill or crash tore it (`write` returns the line,
which the training progress saves), so none is lost. `wall_time` is the Unix time
(seconds since the epoch, `time.time()`) the line was written. A line that cannot be appended (a full disk) is
taken back (the file is cut to its length before), kept in memory and appended
again at every later update, so the file never holds a torn line, loses nothing
written before, and catches up with no gap once there is space again.

A tag the run's config can never move is not written (`fixed_tags`): the KL reference's term and forward time
without a KL reference, the reward model's time without one, the learner wait without overlapped learning, and
preemption's counts and the per-env step spread where no rank can be preempted (one rank, or preemption off, in
fixed mode). Every other tag is written at every update, a NaN as null.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from collections import deque
from pathlib import Path
from typing import Any

from ddppo.rundir import RunDir

log = logging.getLogger(__name__)


def _timed(phase: str) -> tuple[str, ...]:
    return (f"perf/{phase}_s", f"perf/{phase}_s_min", f"perf/{phase}_s_max")


def fixed_tags(cfg: Any, world_size: int) -> frozenset[str]:
    """The tags `cfg` on `world_size` ranks can never move (module docstring), left out of every sink."""
    fixed: list[str] = []
    if not cfg.ppo.kl_ref.checkpoint:
        fixed += ["loss/kl_ref", *_timed("reference_forward")]
    if not cfg.reward.model:
        fixed += _timed("reward_model")
    if not cfg.rollout.overlap_learning:
        fixed += _timed("learner_wait")
    if cfg.rollout.mode == "fixed" and (world_size == 1 or not cfg.preemption.enabled):
        fixed += ["preempt/num_preempted", "preempt/rank_weight_max", "preempt/steps_fraction_min",
                  "preempt/steps_fraction_mean", "perf/rollout_env_steps_min", "perf/rollout_env_steps_mean",
                  "perf/rollout_env_steps_max"]
    return frozenset(fixed)


class MetricsWriter:
    """Rank 0's sinks. `enabled=False` gives the null writer used on every other rank."""

    def __init__(self, run_dir: str | Path, enabled: bool, tensorboard: bool, resume_update: int = 0,
                 resume_env_steps: int = 0, wandb: Any = None, resume_record: str | None = None,
                 fixed: frozenset[str] = frozenset()):
        """`wandb`: an open ddppo.train.wandb_sink.WandbSink (rank 0, log.wandb.enabled), closed with this.
        `resume_record`: the line of update `resume_update` that the checkpoint resumed from holds. `fixed`: tags
        the config can never move, not written (`fixed_tags`)."""
        self.enabled, self.fixed = enabled, fixed
        self.tb = None
        self.fd: int | None = None
        self.unwritten: deque[tuple[int, bytes]] = deque()  # (update, line) not yet appended
        self.failing_since: int | None = None
        self.wandb = wandb
        if not enabled:
            return
        run_dir = RunDir(run_dir)
        self.path = run_dir.metrics_path
        run_dir.truncate_metrics(resume_update, resume_record if resume_update > 0 else None)
        self.fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            purge = resume_env_steps + 1 if resume_update > 0 else None
            self.tb = SummaryWriter(str(run_dir.tensorboard_dir), purge_step=purge)

    def write(self, update: int, env_steps: int, scalars: dict[str, float]) -> str | None:
        """Log one update; the metrics.jsonl line (None on ranks other than 0), for the checkpoint to keep."""
        if not self.enabled:
            return None
        scalars = {k: v for k, v in scalars.items() if k not in self.fixed}
        clean = {k: (v if math.isfinite(v) else None) for k, v in scalars.items()}
        record = json.dumps({"update": update, "env_steps": env_steps, "wall_time": time.time(), **clean})
        self.unwritten.append((update, (record + "\n").encode()))
        self._append_unwritten()
        if self.tb is not None:
            for tag, value in scalars.items():
                if "/" in tag and math.isfinite(value):
                    self.tb.add_scalar(tag, value, env_steps)
        if self.wandb is not None:
            self.wandb.log(scalars, env_steps)
        return record

    def _append_unwritten(self) -> None:
        while self.unwritten:
            update, line = self.unwritten[0]
            size = os.lseek(self.fd, 0, os.SEEK_END)
            try:
                done = 0
                while done < len(line):
                    done += os.write(self.fd, line[done:])
            except OSError as err:
                os.ftruncate(self.fd, size)  # no torn line (cutting frees space, so it works on a full disk)
                if self.failing_since is None:
                    self.failing_since = update
                    log.error("cannot append update %d to %s (%s): kept in memory and appended once there is "
                              "space; nothing written before is lost", update, self.path, err.strerror or err)
                return
            self.unwritten.popleft()
        if self.failing_since is not None:
            log.warning("%s is writable again: updates %d on appended", self.path, self.failing_since)
            self.failing_since = None

    def flush(self) -> None:
        if self.tb is not None:
            self.tb.flush()

    def close(self) -> None:
        if self.fd is not None:
            self._append_unwritten()
            if self.unwritten:
                log.error("%s: updates %d-%d could not be appended (%s is full); a resume from the newest "
                          "checkpoint runs them again", self.path, self.unwritten[0][0], self.unwritten[-1][0],
                          self.path.parent)
            os.close(self.fd)
            self.fd = None
        if self.tb is not None:
            self.tb.close()
            self.tb = None
        if self.wandb is not None:
            self.wandb.close()
            self.wandb = None

