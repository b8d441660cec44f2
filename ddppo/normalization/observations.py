"""Observation normalisation inside the policy: `ObsNormalizer` holds a `RunningMoments` per normalised
observation key and maps x -> clip((x - mean) / sqrt(var + eps), -clip, clip) in the policy's forward.

The statistics are part of the model's state (`obs_norm.stats.<key>.*`), so checkpoints, resume, `ddppo eval`
and exports (frozen: only training updates them) and the acting copy of rollout.overlap_learning carry them
with the weights. They change only between updates (normalization/training.py): a rollout and the PPO update
on it see the same normalisation, so the importance ratios of the first epoch start at 1. With
normalize.update=step the acting path normalises with statistics that move every step (normalization/live.py)
and stores what it normalised; these buffers still change only at updates, and the training policy is built not
to apply them (`Policy.normalize_inputs`).
"""

from __future__ import annotations

import math

import gymnasium
import torch
from torch import nn

from ddppo.config import NormalizeConfig, PolicyConfig
from ddppo.normalization.moments import RunningMoments
from ddppo.normalization.spaces import is_vector, resolve


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


def observation_normalizer(normalize: NormalizeConfig, policy: PolicyConfig, obs_space: gymnasium.spaces.Dict,
                           action_space: gymnasium.spaces.Space) -> ObsNormalizer | None:
    """The observation normaliser a policy of this config holds (fresh statistics: training merges into them, a
    loaded checkpoint replaces them), or None: normalize.obs resolves off on these spaces, or the architecture
    is one of habitat-baselines' (they keep their own input scaling; a registered one is handed it). The one rule
    for training, `ddppo eval`, exports and the KL reference."""
    if policy.architecture.startswith("habitat_baselines") or not resolve(normalize.obs, obs_space, action_space):
        return None
    return ObsNormalizer(obs_space, normalize.clip_obs, normalize.epsilon)
