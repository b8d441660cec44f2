"""How one update's collection and learning are arranged, chosen once from rollout.overlap_learning (by
train/builder.py): the training loop calls `learning.step(update)` and never branches on the mode.

- `SerialLearning` (the default): collect a rollout, then learn on it, on one thread.
- `OverlapLearning` (train/overlap_learning.py): learn on the rollout collected last while an acting copy collects
  the next one.

A strategy arranges the phases of `UpdatePhases` (train/phases.py implements them): `collect` a rollout into a
storage's buffers with its advantages (a `Collected` value), `agree` at the end-of-rollout sync, `learn` on a
`Collected`, `hand_over` what learning changed to the acting path. A strategy owns the storages and never collects
into one whose rollout is still to be learned on. Each `step` returns the update's `Outcome`; `close` waits for
anything still running.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

import torch

from ddppo.advantage import Advantages
from ddppo.rollout.collector import CollectResult
from ddppo.rollout.storage import RolloutStorage
from ddppo.ppo.update import UpdateResult
from ddppo.timing import Timer


class Collected(NamedTuple):
    """One collected rollout (inside `result`) with its advantages: what agree and learn take."""

    result: CollectResult
    advantages: Advantages
    objective: dict = {}  # what learning on it optimises: train/objective.py's sums on this rank


class UpdatePhases(Protocol):
    """The phases of one update a learning strategy arranges (train/phases.py)."""

    timer: Timer  # the main thread's phase timer

    def collect(self, update: int, storage: RolloutStorage) -> Collected:
        """One rollout into `storage`, from where the last one left the envs, and its advantages (local)."""

    def agree(self, batch: Collected) -> None:
        """The end-of-rollout sync over the ranks and the normalisation statistics' merge (collectives)."""

    def learn(self, batch: Collected, timer: Timer, generator: torch.Generator | None = None
              ) -> tuple[UpdateResult, float, float]:
        """The PPO update on `batch` (collectives); (result, learning rate, KL coefficient)."""

    def hand_over(self) -> None:
        """After learning: what the acting path takes from it (the observation statistics merged at `agree`)."""


class Outcome(NamedTuple):
    """One update, as a learning strategy returns it to the loop."""

    collected: CollectResult  # the rollout learned on
    advantages: Advantages  # its advantages as the estimator returned them (before the update's normalisation)
    result: UpdateResult
    lr: float
    beta: float  # the KL coefficient the update used
    timings: dict[str, float]  # the update's phase timings
    objective: dict = {}  # what it optimised (train/objective.py's sums on this rank)


class SerialLearning:
    """Collect, then learn on the rollout collected; the observation statistics of a rollout apply after learning
    on it (normalize.obs)."""

    def __init__(self, phases: UpdatePhases, storage: RolloutStorage):
        self.phases, self.storage = phases, storage

    def step(self, update: int) -> Outcome:
        p = self.phases
        batch = p.collect(update, self.storage)
        p.agree(batch)
        result, lr, beta = p.learn(batch, p.timer)
        p.hand_over()
        return Outcome(batch.result, batch.advantages, result, lr, beta, p.timer.pop(), batch.objective)

    def close(self) -> None:
        """Nothing runs between steps."""
