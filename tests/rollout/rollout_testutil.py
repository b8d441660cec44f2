"""Helpers of the rollout tests."""

from __future__ import annotations


class NeverStop:
    """A stand-in for Preemption that never ends a rollout early (collectors built without a process group)."""

    def begin(self, update):
        pass

    def should_stop(self, update, step):
        return False

    def finished(self, update):
        pass

    def rank_weight(self, steps_per_env):  # preemption.rank_weighting off
        return 1.0

    min_steps = 1  # no floor under the variable mode's two-sided weights: nothing cuts a rollout here
