"""Running observation normalisation inside the policy, and the spaces that decide the `auto` defaults.

`RunningMoments` keeps a running mean and variance (float64 buffers: mean, var, count) and merges batch moments
into them with the parallel-variance formula (Chan et al.), so merging every rank's batch in rank order gives the
same statistics on every rank. `ObsNormalizer` holds one per normalised observation key and maps
x -> clip((x - mean) / sqrt(var + eps), -clip, clip) in the policy's forward: the statistics are part of the
model's state, so checkpoints, resume, `ddppo eval` (frozen: only the trainer updates them) and the acting copy
of rollout.overlap_learning carry them with the weights.

The statistics change only between updates (train/normalization.py): a rollout and the PPO update on it see the
same normalisation, so the importance ratios of the first epoch start at 1. With normalize.update=step the acting
path normalises with statistics that move every step (rollout/live_obs.py) and stores what it normalised; these
buffers still change only at updates, and the policy skips them while it trains (`Policy.normalize_inputs`).
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium
import torch
from torch import nn


def is_vector(space: gymnasium.spaces.Space) -> bool:
    """A Box observation that is not an image (an image has 3 dims): what normalisation applies to."""
    return isinstance(space, gymnasium.spaces.Box) and len(space.shape) != 3


def continuous_control(obs_space: gymnasium.spaces.Dict, action_space: gymnasium.spaces.Space) -> bool:
    """A 1-D Box action space and only vector Box observations (MuJoCo, classic control's Pendulum): where
    `auto` turns on observation and reward normalisation and a critic of its own."""
    return (isinstance(action_space, gymnasium.spaces.Box) and len(action_space.shape) == 1
            and all(is_vector(s) for s in obs_space.spaces.values()))


def resolve(setting: str, obs_space: gymnasium.spaces.Dict, action_space: gymnasium.spaces.Space) -> bool:
    """An on | off | auto setting: auto is on for continuous control."""
    return setting == "on" or (setting == "auto" and continuous_control(obs_space, action_space))


def merge_moments(a: tuple[float, float, float], b: tuple[float, float, float]) -> tuple[float, float, float]:
    """(count, mean, M2) of the union of two batches; M2 is the sum of squared deviations from the mean."""
    na, ma, m2a = a
    nb, mb, m2b = b
    n = na + nb
    if nb == 0:
        return a
    if na == 0:
        return b
    delta = mb - ma
    return n, ma + delta * nb / n, m2a + m2b + delta * delta * na * nb / n


class RunningMoments(nn.Module):
    """Mean and (population) variance of everything merged so far, per feature; float64 buffers."""

    def __init__(self, shape: tuple[int, ...]):
        super().__init__()
        self.register_buffer("mean", torch.zeros(shape, dtype=torch.float64))
        self.register_buffer("var", torch.ones(shape, dtype=torch.float64))
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))
        self.version = 0  # advanced whenever the statistics change (merge, load): users cache what they derive

    def _load_from_state_dict(self, *args: Any, **kwargs: Any) -> None:
        super()._load_from_state_dict(*args, **kwargs)
        self.version += 1

    @torch.no_grad()
    def merge(self, count: torch.Tensor, mean: torch.Tensor, m2: torch.Tensor) -> None:
        """Merge a batch given by its count, mean and sum of squared deviations (M2) per feature."""
        n0, n1 = float(self.count), float(count)
        if n1 <= 0:
            return
        mean, m2 = mean.to(self.mean), m2.to(self.mean)
        if n0 <= 0:
            self.mean.copy_(mean)
            self.var.copy_(m2 / n1)
        else:
            n = n0 + n1
            delta = mean - self.mean
            total_m2 = self.var * n0 + m2 + delta * delta * (n0 * n1 / n)
            self.mean.add_(delta * (n1 / n))
            self.var.copy_(total_m2 / n)
        self.count.fill_(n0 + n1)
        self.version += 1


def batch_moments(x: torch.Tensor) -> tuple[float, torch.Tensor, torch.Tensor]:
    """(count, mean, M2) over the first dimension of x (float64)."""
    x = x.double()
    n = x.shape[0]
    if n == 0:
        zeros = x.new_zeros(x.shape[1:])
        return 0.0, zeros, zeros
    mean = x.mean(0)
    return float(n), mean, ((x - mean) ** 2).sum(0)


class ObsNormalizer(nn.Module):
    """clip((x - mean) / sqrt(var + eps)) for the observation keys it holds statistics for; other keys pass."""

    def __init__(self, obs_space: gymnasium.spaces.Dict, clip: float, eps: float):
        super().__init__()
        self.keys = sorted(k for k, s in obs_space.spaces.items() if is_vector(s))
        self.stats = nn.ModuleDict({k: RunningMoments(tuple(obs_space[k].shape)) for k in self.keys})
        self.clip, self.eps = float(clip), float(eps)
        self._affine: dict[str, tuple] = {}  # key -> (statistics' version, device, float32 mean, float32 scale)

    def affine(self, key: str) -> tuple[torch.Tensor, torch.Tensor]:
        """(mean, 1 / sqrt(var + eps)) of `key` in float32, derived once per change of the statistics (they change
        between updates; the policy acts with them every step)."""
        s = self.stats[key]
        cached = self._affine.get(key)
        if cached is None or cached[0] != s.version or cached[1] != s.mean.device:
            cached = (s.version, s.mean.device, s.mean.float(), torch.rsqrt(s.var + self.eps).float())
            self._affine[key] = cached
        return cached[2], cached[3]

    def forward(self, obs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        out = dict(obs)
        for k in self.keys:
            mean, scale = self.affine(k)
            x = (obs[k].float() - mean) * scale
            out[k] = x.clamp(-self.clip, self.clip) if math.isfinite(self.clip) and self.clip > 0 else x
        return out
