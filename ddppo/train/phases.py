"""The phases of one update (train/learning.py's `UpdatePhases`), over the parts the builder made: the collector,
the advantage estimator, the normalisation, the PPO updater and the KL reference.

    collect    one rollout into a storage, then its advantages (local: timed as `gae`, whichever estimator)
    agree      the end-of-rollout sync (straggler wait), then the normalisation statistics' merge (collectives)
    learn      the PPO update on a storage (its collectives: advantage statistics, gradient all-reduces)
    hand_over  the observation statistics merged at `agree` take effect for the next rollout

Each phase is written once here; the learning strategies only order them (serially, or learning on one storage
while collecting into the other).
"""

from __future__ import annotations

from typing import Any

import torch

from ddppo import timing
from ddppo.advantage import Estimator
from ddppo.config import Config
from ddppo.distributed import DistContext
from ddppo.normalization import Normalization
from ddppo.ppo.reference import ReferencePolicy
from ddppo.ppo.update import PPOUpdater, UpdateResult
from ddppo.rollout.collector import CollectResult, RolloutCollector
from ddppo.timing import Timer
from ddppo.train.progress import Progress


class Phases:
    def __init__(self, cfg: Config, ctx: DistContext, collector: RolloutCollector, advantage: Estimator,
                 normalization: Normalization, updater: PPOUpdater, reference: ReferencePolicy | None,
                 progress: Progress, timer: Timer):
        self.cfg, self.ctx, self.collector, self.advantage = cfg, ctx, collector, advantage
        self.normalization, self.updater, self.reference = normalization, updater, reference
        self.progress, self.timer = progress, timer

    def collect(self, update: int, storage: Any) -> CollectResult:
        self.collector.use_storage(storage)
        collected = self.collector.collect(update)
        self.advantages()
        return collected

    def advantages(self) -> None:
        """The advantages of the rollout just collected (the estimator ppo.advantage chose: ddppo/advantage/;
        its bootstrap value is the acting policy's)."""
        with self.timer(timing.ADVANTAGE):
            self.advantage.compute(self.collector.storage, self.collector.last_value)

    def agree(self, collected: CollectResult) -> None:
        with self.timer(timing.STRAGGLER_WAIT):
            self.ctx.rollout_barrier(collected.steps)
        self.ctx.mark_started()
        with self.timer(timing.NORMALIZATION_SYNC):
            self.normalization.sync(self.collector.storage)  # a collective when normalisation is on

    def learn(self, storage: Any, timer: Timer, generator: torch.Generator | None = None
              ) -> tuple[UpdateResult, float, float]:
        """On the learner thread under rollout.overlap_learning, with its own `generator` for the minibatches
        (torch's global one is the acting policy's)."""
        lr = self.updater.set_lr_for(self.progress.env_steps, self.cfg.run.total_env_steps, self.progress.update)
        ref_params, beta = None, 0.0
        if self.reference is not None:
            with timer(timing.REFERENCE_FORWARD):
                ref_params, beta = self.reference.annotate(storage), self.progress.kl_beta
        return self.updater.update(storage, timer, ref_params, beta, generator), lr, beta

    def hand_over(self) -> None:
        # the critic warm-up holds what the actor sees: the observation statistics merged at `agree` are dropped
        self.normalization.apply(hold=self.progress.update < self.cfg.ppo.critic_warmup_updates)
