"""The policy `policy.architecture` names."""

from __future__ import annotations

import gymnasium

from ddppo.config import NormalizeConfig, PolicyConfig
from ddppo.model.policy import Policy


def make_policy(obs_space: gymnasium.spaces.Dict, action_space: gymnasium.spaces.Space, cfg: PolicyConfig,
                value_head: bool = True, normalize: NormalizeConfig | None = None) -> Policy:
    """ddppo's Policy, or habitat-baselines' PointNav policies: PointNavResNetPolicy
    (policy.architecture=habitat_baselines) or PointNavBaselinePolicy (habitat_baselines_simple).
    `normalize` (the config's normalize section): observation normalisation inside ddppo's Policy where
    normalize.obs resolves on; the habitat-baselines policies keep their own input scaling."""
    if cfg.architecture == "habitat_baselines":
        from ddppo.model.habitat_baselines import HabitatBaselinesPolicy

        return HabitatBaselinesPolicy(obs_space, action_space, cfg, value_head)
    if cfg.architecture == "habitat_baselines_simple":
        from ddppo.model.habitat_baselines_simple import HabitatBaselinesSimplePolicy

        return HabitatBaselinesSimplePolicy(obs_space, action_space, cfg, value_head)
    return Policy(obs_space, action_space, cfg, value_head, normalize)
