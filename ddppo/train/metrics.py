"""The metrics sinks: TensorBoard + metrics.jsonl (+ Weights & Biases, optional) on rank 0, nothing elsewhere.

Tags are grouped `train/`, `loss/`, `perf/`, `preempt/`, `eval/`; the TensorBoard
step is the global env-step count. metrics.jsonl holds one flat JSON object per
update with `update`, `env_steps`, `wall_time`, `fps` and the same tags.
On resume, lines and events after the checkpoint are dropped first, so the
logs never hold an update twice.
"""

from __future__ import annotations

import json
import logging
import math
import time
from pathlib import Path
from typing import Any

from ddppo.rundir import RunDir

log = logging.getLogger(__name__)


class MetricsWriter:
    """Rank 0's sinks. `enabled=False` gives the null writer used on every other rank."""

    def __init__(self, run_dir: str | Path, enabled: bool, tensorboard: bool, resume_update: int = 0,
                 resume_env_steps: int = 0, wandb: Any = None):
        """`wandb`: an open ddppo.train.wandb_sink.WandbSink (rank 0, log.wandb.enabled), closed with this."""
        self.enabled = enabled
        self.tb = None
        self.file = None
        self.wandb = wandb
        if not enabled:
            return
        run_dir = RunDir(run_dir)
        run_dir.truncate_metrics(resume_update)
        self.file = open(run_dir.metrics_path, "a", buffering=1)
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            purge = resume_env_steps + 1 if resume_update > 0 else None
            self.tb = SummaryWriter(str(run_dir.tensorboard_dir), purge_step=purge)

    def write(self, update: int, env_steps: int, scalars: dict[str, float]) -> None:
        if not self.enabled:
            return
        clean = {k: (v if math.isfinite(v) else None) for k, v in scalars.items()}
        record = {"update": update, "env_steps": env_steps, "wall_time": time.time(), **clean}
        self.file.write(json.dumps(record) + "\n")
        if self.tb is not None:
            for tag, value in scalars.items():
                if "/" in tag and math.isfinite(value):
                    self.tb.add_scalar(tag, value, env_steps)
        if self.wandb is not None:
            self.wandb.log(scalars, env_steps)

    def flush(self) -> None:
        if self.tb is not None:
            self.tb.flush()

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None
        if self.tb is not None:
            self.tb.close()
            self.tb = None
        if self.wandb is not None:
            self.wandb.close()
            self.wandb = None


def format_duration(seconds: float) -> str:
    if not math.isfinite(seconds) or seconds < 0:
        return "?"
    seconds = int(seconds)
    return f"{seconds // 3600:d}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def progress_line(env_steps: int, total: int, fps: float, scalars: dict[str, float]) -> str:
    """One console line: steps / total, windowed fps, reward, success, ETA."""
    parts = [f"steps {env_steps:,}/{total:,} ({100 * env_steps / total:.1f}%)", f"fps {fps:,.0f}"]
    for tag, label in (("train/reward", "reward"), ("train/success", "success"), ("train/spl", "spl")):
        if tag in scalars and math.isfinite(scalars[tag]):
            parts.append(f"{label} {scalars[tag]:.3f}")
    parts.append(f"eta {format_duration((total - env_steps) / fps if fps > 0 else float('inf'))}")
    return " | ".join(parts)
