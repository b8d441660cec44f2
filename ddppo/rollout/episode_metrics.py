"""Which scalar episode metrics training aggregates, and their per-rollout sums and counts.

Every rank packs its episode sums and counts into the once-per-update stats all-gather (ddppo/train/stats.py), so
every rank must hold the same metric names in the same order before the first update. The names are therefore
fixed at start: ddppo's own `EPISODE_KEYS` first (always, in their order: the columns tests, docs and sweeps read),
then, sorted, every other name the environment declares (`ddppo.envs.base.declared_metrics`: habitat-lab's task measures,
habitat-sim's and gridnav's metrics), agreed as the union over ranks (`agree` in ddppo/train/stats.py). A rank
whose envs never report a name contributes a zero count; a metric reported by an episode but not declared at start
(or one that is not a finite number) cannot get a column later, so it is skipped with one debug line per name.
"""

from __future__ import annotations

import logging
import math
from typing import Iterable

import numpy as np

from ddppo.envs.base import EpisodeInfo, declared_metrics
from ddppo.rollout.observers import EpisodeObserver, Stored
from ddppo.rollout.rollout import Rollout

log = logging.getLogger(__name__)

# per-episode metrics every run aggregates first, in this order (an env reports the ones that apply to it)
EPISODE_KEYS = ("return", "length", "success", "spl", "soft_spl", "distance_to_goal", "collisions")


def metric_names(declared: Iterable[str]) -> tuple[str, ...]:
    """EPISODE_KEYS, then the other `declared` names, sorted (the same on every rank for the same set)."""
    return EPISODE_KEYS + tuple(sorted({str(n) for n in declared} - set(EPISODE_KEYS)))


def env_metric_names(envs: object) -> tuple[str, ...]:
    """This rank's metric names for `envs` (before the ranks agree on their union)."""
    return metric_names(declared_metrics(envs))


class EpisodeTally(EpisodeObserver):
    """Adds finished episodes' metrics into (sums, counts) arrays ordered by `names`; as a collector's episode
    observer (rollout/observers.py), one rollout's into "episode_sums" and "episode_counts"."""

    def __init__(self, names: Iterable[str]):
        self.names = tuple(names)
        self._index = {n: i for i, n in enumerate(self.names)}
        self._skipped: set[str] = set()
        self.sums, self.counts = self.zeros()  # the rollout being collected

    def begin(self) -> None:
        self.sums, self.counts = self.zeros()

    def finished(self, episodes: list[EpisodeInfo], at: Stored) -> None:
        self.add(episodes, self.sums, self.counts)

    def end(self, rollout: Rollout, tallies: dict[str, np.ndarray]) -> None:
        tallies["episode_sums"], tallies["episode_counts"] = self.sums, self.counts

    def zeros(self) -> tuple[np.ndarray, np.ndarray]:
        return np.zeros(len(self.names)), np.zeros(len(self.names))

    def add(self, episodes: list, sums: np.ndarray, counts: np.ndarray) -> None:
        for ep in episodes:
            for key, value in ep.metrics.items():
                i = self._index.get(key)
                number = _finite(value)
                if i is None or number is None:
                    self._skip(key, "not declared by the env at start" if i is None else f"not a number ({value!r})")
                    continue
                sums[i] += number
                counts[i] += 1

    def _skip(self, key: str, why: str) -> None:
        if key not in self._skipped:
            self._skipped.add(key)
            log.debug("episode metric %r is not aggregated into train/*: %s", key, why)


def _finite(value: object) -> float | None:
    if isinstance(value, (bool, int, float, np.bool_, np.integer, np.floating)):
        f = float(value)
        return f if math.isfinite(f) else None
    return None
