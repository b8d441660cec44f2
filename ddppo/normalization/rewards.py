"""Reward scaling on the acting path: rewards divided by the running standard deviation of the discounted return
(SB3's VecNormalize, CleanRL's NormalizeReward), clipped.

Per step, on the host, each env's discounted return G <- gamma * G + r is advanced (and reset to 0 where the
episode ended, terminated or truncated), its value counted into this rollout's batch moments, and the reward
divided by sqrt(var + eps) of the return statistics as they stood when the rollout began (normalize.update=
rollout), or, with normalize.update=step, of those statistics merged with this rollout's returns up to and
including this step (SB3's VecNormalize, step for step on one rank). The statistics themselves change once per
update, when normalization/training.py merges every rank's batch moments (the same on
every rank); the scaled reward is what the storage, GAE and the critic see, before a truncated episode's
bootstrap is added (the critic's value is already in scaled units). Episode returns reported as train/reward are
the envs' own, unscaled.

Saved state, two owners (registered by normalization/training.py's `Normalization`): the return statistics
(`moments_owner`, identical on every rank: a shared namespace, written once and restored on every resume, also at
another world size) and each rank's per-env running returns (`returns_owner`, episode state: restored only when
that rank's episodes continue).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from ddppo.normalization.moments import RunningMoments, merge_moments


class RewardScaler:
    """On the host, on the envs' numpy rewards before they are staged to the device (as SB3's VecNormalize): with
    one env of a MuJoCo task this runs once per step, as often as the policy, and a handful of numpy operations on
    a few floats cost a fraction of the same in torch operations."""

    def __init__(self, num_envs: int, gamma: float, clip: float, eps: float, live: bool = False):
        self.gamma, self.clip, self.eps = float(gamma), float(clip), float(eps)
        self.live = live  # normalize.update=step: the scale follows every step's returns, not the rollout's start
        self.moments = RunningMoments(())
        self.returns = np.zeros(num_envs, dtype=np.float64)
        self._reset_batch()

    def _reset_batch(self) -> None:
        # shifted sums (by the mean at the rollout's start), float64: count, sum(G - shift), sum((G - shift)^2);
        # added to every step, read once per update
        self._count = 0
        self._sum = 0.0
        self._sumsq = 0.0
        self._shift = float(self.moments.mean)
        self._scale = float(torch.rsqrt(self.moments.var + self.eps))
        self._merged = (float(self.moments.count), float(self.moments.var))  # with _shift, their mean

    def __call__(self, reward: np.ndarray, done: np.ndarray, envs: np.ndarray | None = None) -> np.ndarray:
        """The scaled rewards (float32) of one step of the envs `envs` (row i is env envs[i]; all when None)."""
        idx = slice(None) if envs is None else envs
        ret = self.returns[idx] * self.gamma + reward
        x = ret - self._shift
        self._count += x.size
        self._sum += float(x.sum())
        self._sumsq += float(x @ x)
        ret[np.asarray(done, bool)] = 0.0
        self.returns[idx] = ret
        scale = self._live_scale() if self.live else self._scale
        return np.clip(np.asarray(reward, np.float32) * np.float32(scale), -self.clip, self.clip)

    def _live_scale(self) -> float:
        """1 / sqrt(var + eps) of the statistics merged at the last update and this rollout's returns so far."""
        if self._count == 0:
            return self._scale
        n0, var0 = self._merged
        local = (float(self._count), self._shift + self._sum / self._count,
                 max(self._sumsq - self._sum * self._sum / self._count, 0.0))
        n, _, m2 = merge_moments((n0, self._shift, var0 * n0), local)
        return 1.0 / math.sqrt(m2 / n + self.eps)

    def take_batch(self) -> torch.Tensor:
        """This rollout's (count, mean, M2) of the discounted returns (float64), and a fresh batch."""
        n, s, ss = self._count, self._sum, self._sumsq
        self._count, self._sum, self._sumsq = 0, 0.0, 0.0
        if n <= 0:
            return torch.zeros(3, dtype=torch.float64)
        mean = s / n
        return torch.tensor([n, mean + self._shift, max(ss - s * mean, 0.0)], dtype=torch.float64)

    def merge(self, count: float, mean: float, m2: float) -> None:
        """Merge every rank's batch (already combined, the same on every rank) into the statistics."""
        self.moments.merge(torch.tensor(count, dtype=torch.float64), torch.tensor(mean, dtype=torch.float64),
                           torch.tensor(m2, dtype=torch.float64))
        self._reset_batch()

    # ------------------------------------------------------------ saved state
    def moments_owner(self) -> "_Moments":
        return _Moments(self)

    def returns_owner(self) -> "_Returns":
        return _Returns(self)


class _Moments:
    """Saved-state owner of the return statistics (identical on every rank)."""

    def __init__(self, scaler: RewardScaler):
        self.scaler = scaler

    def state_dict(self) -> dict[str, Any]:
        return {k: v.clone() for k, v in self.scaler.moments.state_dict().items()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.scaler.moments.load_state_dict(state)
        self.scaler._reset_batch()


class _Returns:
    """Saved-state owner of the per-env running discounted returns (episode state)."""

    def __init__(self, scaler: RewardScaler):
        self.scaler = scaler

    def state_dict(self) -> torch.Tensor:
        return torch.from_numpy(self.scaler.returns.copy())

    def load_state_dict(self, state: Any) -> None:
        self.scaler.returns[:] = torch.as_tensor(state, dtype=torch.float64).numpy()
