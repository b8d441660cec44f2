"""The phases of one update (train/learning.py's `UpdatePhases`), over the parts the builder made: the collector,
the scoring stage, the advantage estimator, the normalisation, the PPO updater and the KL reference.

    collect    one rollout into a storage's buffers, returned as a value, scored (rollout/scoring.py: a new rollout
               with the rewards learned on), then its advantages (local: timed as `advantage`, whichever
               estimator), returned as new tensors, and what learning on it optimises (train/objective.py): a
               `Collected`
    agree      the end-of-rollout sync (straggler wait), then the normalisation statistics' merge (collectives)
    learn      the PPO update on a `Collected` (its collectives: advantage statistics, gradient all-reduces)
    hand_over  the observation statistics merged at `agree` take effect for the next rollout

Each phase is written once here; the learning strategies only order them (serially, or learning on one storage
while collecting into the other).
"""

from __future__ import annotations

import dataclasses

import torch

from ddppo import timing
from ddppo.advantage import Estimator
from ddppo.config import Config
from ddppo.distributed import DistContext
from ddppo.normalization import Normalization
from ddppo.ppo.reference import ReferencePolicy
from ddppo.ppo.update import PPOUpdater, UpdateResult
from ddppo.rollout.collector import RolloutCollector
from ddppo.rollout.scoring import Scoring
from ddppo.rollout.storage import RolloutStorage
from ddppo.timing import Timer
from ddppo.train.learning import Collected
from ddppo.train.objective import NO_OBJECTIVE, Objective
from ddppo.train.progress import Progress


class Phases:
    def __init__(self, cfg: Config, ctx: DistContext, collector: RolloutCollector, scoring: Scoring,
                 advantage: Estimator, normalization: Normalization, updater: PPOUpdater,
                 reference: ReferencePolicy | None, progress: Progress, timer: Timer,
                 objective: Objective = NO_OBJECTIVE):
        self.cfg, self.ctx, self.collector, self.scoring, self.advantage = cfg, ctx, collector, scoring, advantage
        self.normalization, self.updater, self.reference = normalization, updater, reference
        self.progress, self.timer = progress, timer
        self.objective = objective  # measures what learning on each rollout optimises (train/objective.py)

    def collect(self, update: int, storage: RolloutStorage) -> Collected:
        """One rollout into `storage`'s buffers, scored, and its advantages (the estimator ppo.advantage chose:
        ddppo/advantage/; the bootstrap values are the acting policy's)."""
        collected = self.collector.collect(update, storage)
        collected = dataclasses.replace(collected, rollout=self.scoring.finish(collected.rollout))
        with self.timer(timing.ADVANTAGE):
            advantages = self.advantage.compute(collected.rollout)
        return Collected(collected, advantages, self.objective.measure(collected.rollout, advantages))

    def agree(self, batch: Collected) -> None:
        with self.timer(timing.STRAGGLER_WAIT):
            self.ctx.rollout_barrier(batch.result.steps)
        self.ctx.mark_started()
        with self.timer(timing.NORMALIZATION_SYNC):  # a collective when normalisation is on
            self.normalization.sync(batch.result.rollout.obs, batch.advantages.mask)

    def learn(self, batch: Collected, timer: Timer, generator: torch.Generator | None = None
              ) -> tuple[UpdateResult, float, float]:
        """On the learner thread under rollout.overlap_learning, with its own `generator` for the minibatches
        (torch's global one is the acting policy's)."""
        lr = self.updater.set_lr_for(self.progress.env_steps, self.cfg.run.total_env_steps, self.progress.update)
        rollout = batch.result.rollout
        ref_params, beta = None, 0.0
        if self.reference is not None:
            with timer(timing.REFERENCE_FORWARD):
                ref_params, beta = self.reference.annotate(rollout), self.progress.kl_beta
        return self.updater.update(rollout, batch.advantages, timer, ref_params, beta, generator), lr, beta

    def hand_over(self) -> None:
        # the critic warm-up holds what the actor sees: the observation statistics merged at `agree` are dropped
        self.normalization.apply(hold=self.progress.update < self.cfg.ppo.critic_warmup_updates)
