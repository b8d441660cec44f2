"""Episode observers: what watches the episodes a collector's envs finish, as one list with one protocol.

The collector tells each observer, in order: `restart(envs)` when the envs start fresh episodes or continue restored
ones, `begin()` when a rollout starts, `finished(episodes, at)` as episodes finish (their last steps already
stored), and `end(rollout, tallies)` once the rollout is collected, where an observer puts what it tallied over the
rollout, by name, into the `CollectResult` (rollout/collector.py). Training's are the episode metrics
(rollout/episode_metrics.py: "episode_sums", "episode_counts") and the per-scene table (rollout/scenes.py:
"scenes"); a benchmark may add its own (`ddppo bench mujoco` records each episode's return as it ends).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ddppo.envs.base import EpisodeInfo
from ddppo.rollout.rollout import Rollout


class Stored:
    """Where the rollout being collected stands, as the finished episodes' observers may ask (host counters)."""

    def __init__(self, storage: Any):
        self._storage = storage

    @property
    def last_slot(self) -> int | np.ndarray:
        """The storage slot (time index) of each env's latest stored step: one for every env, or (num_envs,)."""
        s = self._storage
        return s.step - 1 if s.lengths is None else s.lengths.numpy() - 1

    @property
    def env_steps(self) -> int:
        """The env steps the rollout has collected so far."""
        s = self._storage
        return s.step * s.num_envs if s.lengths is None else int(s.lengths.sum())


class EpisodeObserver:
    """The protocol (every method a no-op here: an observer overrides what it needs)."""

    def restart(self, envs: Any) -> None:
        """The envs play new episodes (reset) or their saved ones (state restored)."""

    def begin(self) -> None:
        """A rollout starts."""

    def finished(self, episodes: list[EpisodeInfo], at: Stored) -> None:
        """Episodes that finished at the steps just stored (each env's latest stored step is its last)."""

    def end(self, rollout: Rollout, tallies: dict[str, np.ndarray]) -> None:
        """The rollout is collected: what this observer tallied over it, into `tallies` by name."""
