"""Lockstep collection (rollout.mode=fixed): every env takes `num_steps` steps together, each batched step
waiting for the slowest env; a preempted rollout ends early, at the same step for every env."""

from __future__ import annotations

import time

import numpy as np
import torch

from ddppo import timing
from ddppo.rollout.collector import Collection, RolloutCollector


class LockstepCollector(RolloutCollector):
    def _collect(self, update: int) -> Collection:
        s, timer, actor = self.storage, self.timer, self.actor
        slowest = 0.0  # the slowest batched step: every env waits for it
        preempted = False
        for t in range(self.num_steps):
            if self.preemption.should_stop(update, t):
                preempted = True
                break
            a = actor.act()
            t_step = time.perf_counter()
            step = actor.step(a.env_action, f"after step {t + 1} of update {update}'s rollout")
            slowest = max(slowest, time.perf_counter() - t_step)
            res = step.result
            self.score(res, s.step, a.env_action, actor.memory)
            with timer(timing.STORAGE):
                s.insert(a.action, a.logp, a.value, step.reward, step.done, actor.obs, actor.start, step.idle)
                self.add_episodes(res.episodes)
        actor.detach()
        n = self.envs.num_envs
        return Collection(preempted, torch.full((n,), s.step, dtype=torch.long), np.full(n, slowest))
