"""Reward scaling on the acting path: rewards divided by the running standard deviation of the discounted return
(SB3's VecNormalize, CleanRL's NormalizeReward), clipped.

Per step, each env's discounted return G <- gamma * G + r is advanced (and reset to 0 where the episode ended,
terminated or truncated), its value counted into this rollout's batch moments, and the reward divided by
sqrt(var + eps) of the return statistics as they stood when the rollout began. The statistics themselves change
once per update, when train/normalization.py merges every rank's batch moments (the same on every rank); the
scaled reward is what the storage, GAE and the critic see, before a truncated episode's bootstrap is added (the
critic's value is already in scaled units). Episode returns reported as train/reward are the envs' own, unscaled.

Saved state, two owners (train/trainer.py): the return statistics (`moments_owner`, restored on every resume)
and the per-env running returns (`returns_owner`, episode state: restored only when the episodes continue).
"""

from __future__ import annotations

from typing import Any

import torch

from ddppo.model.normalize import RunningMoments


class RewardScaler:
    def __init__(self, num_envs: int, gamma: float, clip: float, eps: float, device: torch.device):
        self.gamma, self.clip, self.eps = float(gamma), float(clip), float(eps)
        self.moments = RunningMoments(())
        self.returns = torch.zeros(num_envs, dtype=torch.float64, device=device)
        self._reset_batch()

    def _reset_batch(self) -> None:
        # shifted sums (by the mean at the rollout's start), float64 on the returns' device: count (a Python
        # int), sum(G - shift), sum((G - shift)^2); added to in place every step, read once per update
        self._count = 0
        self._sums = torch.zeros(2, dtype=torch.float64, device=self.returns.device)
        self._shift = float(self.moments.mean)
        self._scale = float(torch.rsqrt(self.moments.var + self.eps))

    def __call__(self, reward: torch.Tensor, done: torch.Tensor, envs: torch.Tensor | None = None) -> torch.Tensor:
        """The scaled rewards of one step of the envs `envs` (all when None); reward and done on one device.
        A few in-place tensor ops per step: with one env of a MuJoCo task this runs as often as the policy."""
        idx = slice(None) if envs is None else envs.to(self.returns.device)
        ret = self.returns[idx] * self.gamma + reward.to(self.returns)
        x = ret - self._shift
        self._count += x.numel()
        self._sums += torch.stack([x.sum(), (x * x).sum()])
        self.returns[idx] = ret.masked_fill(done.to(self.returns.device) != 0, 0.0)
        return (reward * self._scale).clamp(-self.clip, self.clip)

    def take_batch(self) -> torch.Tensor:
        """This rollout's (count, mean, M2) of the discounted returns (float64), and a fresh batch."""
        n = self._count
        s, ss = self._sums.tolist()
        self._count = 0
        self._sums.zero_()
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
        return self.scaler.returns.cpu().clone()

    def load_state_dict(self, state: Any) -> None:
        self.scaler.returns.copy_(torch.as_tensor(state, dtype=torch.float64))
