"""Straggler preemption (DD-PPO): end collection on slow ranks once enough ranks have finished.

A rank stops collecting at step t when t >= min_rollout_fraction * num_steps and
the number of ranks that finished their full rollout this update is
>= sync_frac * world_size. The counter lives in the distributed store under a
key that includes the update index, so nothing is ever reset and no update can
read another update's count.
"""

from __future__ import annotations

import math

from ddppo.config import PreemptionConfig
from ddppo.distributed import DistContext


class Preemption:
    def __init__(self, cfg: PreemptionConfig, ctx: DistContext, num_steps: int):
        self.ctx = ctx
        self.min_steps = max(1, math.ceil(cfg.min_rollout_fraction * num_steps - 1e-9))
        self.threshold = math.ceil(cfg.sync_frac * ctx.world_size - 1e-9)
        # with a threshold of world_size the last rank to finish is the one asking: never preempts
        self.active = cfg.enabled and ctx.world_size > 1 and self.threshold < ctx.world_size

    @staticmethod
    def key(update: int) -> str:
        return f"preempt/done/{update}"

    def should_stop(self, update: int, step: int) -> bool:
        """Checked before every step of the rollout."""
        if not self.active:
            return False
        if step == 0 and self.ctx.is_main and update > 2:
            # every rank has passed update - 1's end-of-rollout sync, so nobody reads update - 2's
            # counter any more; deleted here, whether or not rank 0 itself finishes, to keep the store small
            self.ctx.delete_key(self.key(update - 2))
        if step < self.min_steps:
            return False
        return self.ctx.add_to_counter(self.key(update), 0) >= self.threshold

    def finished(self, update: int) -> None:
        """This rank collected its full rollout."""
        if self.active:
            self.ctx.add_to_counter(self.key(update), 1)
