"""Phase timers and the phase names, defined once.

Every timed phase of an update is named here; the collector, the trainer, the
PPO update, the stats reduction (`perf/*` columns) and the bottleneck report all
use these names, so a phase cannot be renamed in one place and missed in another.
"""

from __future__ import annotations

import contextlib
import time
from collections import defaultdict
from typing import Iterator

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


class Timer:
    """Accumulates wall time per named phase: `with timer(ENV_STEP): ...`."""

    def __init__(self) -> None:
        self.totals: dict[str, float] = defaultdict(float)

    @contextlib.contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.totals[name] += time.perf_counter() - start

    def pop(self) -> dict[str, float]:
        out, self.totals = dict(self.totals), defaultdict(float)
        return out
