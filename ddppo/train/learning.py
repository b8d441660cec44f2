"""How one update's collection and learning are arranged, chosen once from rollout.overlap_learning: the training
loop calls `learning.step(trainer, update)` and never branches on the mode.

- `SerialLearning` (the default): collect a rollout, then learn on it, on one thread.
- `OverlapLearning` (train/overlap.py): learn on the rollout collected last while an acting copy collects the
  next one.

Each `step` returns the update's (collected rollout, update result, learning rate, KL coefficient, phase timings);
`overlapped` says whether the policy that acts lags one update behind the one that learns (what is saved and the
bottleneck report depend on it); `close` waits for anything still running.
"""

from __future__ import annotations

from typing import Any


class SerialLearning:
    """Collect, then learn on the same storage; the observation statistics of a rollout apply after learning on
    it (normalize.obs)."""

    overlapped = False

    def step(self, trainer: Any, update: int) -> tuple[Any, Any, float, float, dict]:
        collected = trainer.collect_rollout(update)
        result, lr, beta = trainer.learn(trainer.collector.storage, trainer.timer)
        trainer.normalization.apply()
        return collected, result, lr, beta, trainer.timer.pop()

    def close(self) -> None:
        """Nothing runs between steps."""
