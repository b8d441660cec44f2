"""The policy `policy.architecture` names."""

from __future__ import annotations

import gymnasium

from ddppo.config import PolicyConfig
from ddppo.model.policy import Policy


def make_policy(obs_space: gymnasium.spaces.Dict, action_space: gymnasium.spaces.Space, cfg: PolicyConfig,
                value_head: bool = True) -> Policy:
    """ddppo's Policy, or (policy.architecture=habitat_baselines) habitat-baselines' PointNav policy."""
    if cfg.architecture == "habitat_baselines":
        from ddppo.model.habitat_baselines import HabitatBaselinesPolicy

        return HabitatBaselinesPolicy(obs_space, action_space, cfg, value_head)
    return Policy(obs_space, action_space, cfg, value_head)
