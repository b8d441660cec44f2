"""Phase timers and the phase names, defined once.

Every timed phase of an update is named here; the collector, the trainer, the
PPO update, the stats reduction (`perf/*` columns) and the bottleneck report all
use these names, so a phase cannot be renamed in one place and missed in another.

Truthful on CUDA: kernels and NCCL collectives return once queued, so a plain
wall clock would charge a phase's GPU work to whichever later phase first waits
for it (the all-reduce would absorb the backward pass, the straggler wait would
read ~0). On a CUDA device every phase therefore ends by waiting for the current
(compute) stream: each phase owns the GPU work it queued. Only the compute stream
is waited for, so gradient buckets still in flight on NCCL's stream when backward
ends are charged to the all-reduce phase that waits for them, not to backward.
On CPU nothing changes: the clock alone.
"""

from __future__ import annotations

import contextlib
import time
from collections import defaultdict
from typing import Callable, Iterator

import torch

# collection (rollout/)
POLICY_FORWARD = "policy_forward"
ENV_STEP = "env_step"
OBS_TRANSFER = "obs_transfer"
STORAGE = "storage"
STRAGGLER_WAIT = "straggler_wait"
# returns and learning (train/, ppo/)
GAE = "gae"
REFERENCE_FORWARD = "reference_forward"
LEARN_FORWARD_BACKWARD = "learn_forward_backward"
ALLREDUCE = "allreduce"
OPTIMIZER = "optimizer"
LOG_CHECKPOINT = "log_checkpoint"

# the order of the `perf/*` columns reduced across ranks
PHASES = (POLICY_FORWARD, ENV_STEP, OBS_TRANSFER, STORAGE, STRAGGLER_WAIT, GAE, REFERENCE_FORWARD,
          LEARN_FORWARD_BACKWARD, ALLREDUCE, OPTIMIZER, LOG_CHECKPOINT)
# the phases of rollout collection
COLLECT = (POLICY_FORWARD, ENV_STEP, OBS_TRANSFER, STORAGE)


def phase_end_sync(device: torch.device | None) -> Callable[[], None] | None:
    """What a phase waits for before its clock stops: the current CUDA stream of `device`; None on CPU."""
    if device is None or device.type != "cuda":
        return None
    return lambda: torch.cuda.current_stream(device).synchronize()


class Timer:
    """Accumulates wall time per named phase: `with timer(ENV_STEP): ...`; with a CUDA `device`, each phase
    includes the GPU work it queued (see the module docstring)."""

    def __init__(self, device: torch.device | None = None, sync: Callable[[], None] | None = None) -> None:
        self.totals: dict[str, float] = defaultdict(float)
        self._sync = sync if sync is not None else phase_end_sync(device)

    @contextlib.contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            if self._sync is not None:
                self._sync()
            self.totals[name] += time.perf_counter() - start

    def pop(self) -> dict[str, float]:
        out, self.totals = dict(self.totals), defaultdict(float)
        return out
