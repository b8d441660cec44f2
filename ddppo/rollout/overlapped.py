"""Overlapped lockstep collection (rollout.mode=fixed with rollout.overlap): the workers are split into two
halves; while one half steps its envs, the policy acts on the other half's observations (as in Sample
Factory), so env stepping and inference overlap. Every env still takes exactly `num_steps` steps (fewer when
preempted, the same number for every env), and the order of acting is fixed, so runs stay reproducible.
Nothing is in flight between rollouts: the saved state is the lockstep one."""

from __future__ import annotations

from typing import Any

from ddppo import timing
from ddppo.rollout.collector import Collection
from ddppo.rollout.workers import WorkerCollector
from ddppo.envs.base import WorkerStep


class OverlappedCollector(WorkerCollector):
    segments = True  # each half's steps are stored as they come back
    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        if len(self.bounds) < 2:
            raise ValueError("the overlapped rollout needs at least 2 env workers (two halves step in turn)")

    def _collect(self, update: int) -> Collection:
        s, envs = self.storage, self.envs
        w = len(self.bounds)
        halves = [list(range(w // 2)), list(range(w // 2, w))]
        self.slowest[:] = 0.0
        for half in halves:
            self.act_and_send(half)
        preempted = False
        for t in range(self.num_steps):
            stop = t + 1 == self.num_steps or self.preemption.should_stop(update, t + 1)
            preempted = stop and t + 1 < self.num_steps
            for half in halves:
                with self.timer(timing.ENV_STEP):
                    got: list[WorkerStep] = []
                    while len(got) < len(half):
                        got += envs.recv(len(half) - len(got), envs.timeout_s, workers=half)
                self.store(sorted(got, key=lambda g: g.worker), update)
                if not stop:
                    self.act_and_send(half)
            if stop:
                break
        return Collection(preempted, s.lengths.clone(), self.slowest.copy())
