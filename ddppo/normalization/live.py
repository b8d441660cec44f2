"""normalize.update=step for observations: per-step statistics on the acting path, as SB3's VecNormalize and
CleanRL's NormalizeObservation keep them.

Every observation the envs return (the first after a reset included; a finished episode's last observation is
normalised but not counted, as SB3 does) is first counted into this rollout's batch moments, then normalised,
on the host in float64, with the statistics of everything merged over all ranks at the last update plus this
rank's batch so far. The storage keeps the normalised observations, and the training policy is built not to
normalise again (`Policy.normalize_inputs`), so the PPO update learns on what the policy acted on and the first
epoch's importance ratios start at 1. Every collector applies it (the Actor's acting path in lockstep, the
worker half's `store` under rollout.overlap). At the end of the rollout normalization/training.py merges every
rank's batch into the policy's statistics (the same on every rank), which `ddppo eval` and exports apply frozen.

With one rank this is SB3's running normalisation step for step (tests/benchmarks/peers/test_sb3_lockstep.py); with
more, each rank counts its own steps between updates and the ranks agree again at every update.
"""

from __future__ import annotations

import math

import numpy as np

from ddppo.normalization.moments import merge_moments
from ddppo.normalization.observations import ObsNormalizer


class LiveObsNormalizer:
    def __init__(self, obs_norm: ObsNormalizer):
        self.obs_norm = obs_norm
        self.keys = obs_norm.keys
        self.clip, self.eps = obs_norm.clip, obs_norm.eps
        self._global: dict[str, tuple[int, float, np.ndarray, np.ndarray]] = {}  # key -> (version, n, mean, var)
        self.clear()

    def clear(self) -> None:
        """Forget this rollout's batch (taken, or a resume that continues where a saved update ended)."""
        self._batch = {k: (0.0, 0.0, 0.0) for k in self.keys}  # key -> (count, mean, M2), float64 arrays once set

    def _merged_global(self, key: str) -> tuple[float, np.ndarray, np.ndarray]:
        s = self.obs_norm.stats[key]
        cached = self._global.get(key)
        if cached is None or cached[0] != s.version:
            cached = (s.version, float(s.count), s.mean.detach().cpu().numpy().astype(np.float64),
                      s.var.detach().cpu().numpy().astype(np.float64))
            self._global[key] = cached
        return cached[1], cached[2], cached[3]

    def _mean_var(self, key: str) -> tuple[np.ndarray, np.ndarray]:
        """Mean and population variance of the merged statistics and this rank's batch."""
        n0, m0, v0 = self._merged_global(key)
        n, mean, m2 = merge_moments((n0, m0, v0 * n0), self._batch[key])
        return (m0, v0) if n == 0 else (mean, m2 / n)

    def _normalized(self, key: str, x: np.ndarray) -> np.ndarray:
        mean, var = self._mean_var(key)
        y = (np.asarray(x, np.float64) - mean) / np.sqrt(var + self.eps)
        if math.isfinite(self.clip) and self.clip > 0:
            y = np.clip(y, -self.clip, self.clip)
        return y.astype(np.float32)

    def observe(self, obs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Count the rows of `obs` (one per env) into the batch, then return them normalised."""
        for k in self.keys:
            x = np.asarray(obs[k], dtype=np.float64).reshape(len(obs[k]), -1)
            if x.shape[0]:
                mean = x.mean(0)
                self._batch[k] = merge_moments(self._batch[k], (float(x.shape[0]), mean, ((x - mean) ** 2).sum(0)))
        return self.normalize(obs)

    def normalize(self, obs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """`obs` normalised with the current statistics, not counted (a finished episode's last observation)."""
        out = dict(obs)
        for k in self.keys:
            x = np.asarray(obs[k])
            out[k] = self._normalized(k, x.reshape(len(x), -1)).reshape(x.shape)
        return out

    def take_batch(self) -> list[tuple[float, np.ndarray, np.ndarray]]:
        """This rollout's (count, mean, M2) per key (in `keys` order, flattened, float64), and a fresh batch."""
        out = []
        for k in self.keys:
            d = int(np.prod(self.obs_norm.stats[k].mean.shape))
            n, mean, m2 = self._batch[k]
            out.append((n, np.broadcast_to(np.asarray(mean, np.float64), (d,)).copy(),
                        np.broadcast_to(np.asarray(m2, np.float64), (d,)).copy()))
        self.clear()
        return out
