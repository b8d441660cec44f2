"""The policy `policy.architecture` names."""

from __future__ import annotations

import gymnasium

from ddppo.config import Config, PolicyConfig
from ddppo.model.policy import Policy
from ddppo.normalization import ObsNormalizer, observation_normalizer


def make_policy(obs_space: gymnasium.spaces.Dict, action_space: gymnasium.spaces.Space, cfg: PolicyConfig,
                value_head: bool = True, obs_norm: ObsNormalizer | None = None,
                normalize_inputs: bool = True) -> Policy:
    """ddppo's Policy, or habitat-baselines' PointNav policies: PointNavResNetPolicy
    (policy.architecture=habitat_baselines) or PointNavBaselinePolicy (habitat_baselines_simple).
    `obs_norm`: the observation normaliser ddppo's Policy holds (ddppo.normalization.observation_normalizer, which
    builds none for the habitat-baselines policies: they keep their own input scaling); `normalize_inputs`:
    whether the policy applies it (False when the acting path already did: normalize.update=step)."""
    if cfg.architecture == "habitat_baselines":
        from ddppo.model.habitat_baselines import HabitatBaselinesPolicy

        return HabitatBaselinesPolicy(obs_space, action_space, cfg, value_head)
    if cfg.architecture == "habitat_baselines_simple":
        from ddppo.model.habitat_baselines_simple import HabitatBaselinesSimplePolicy

        return HabitatBaselinesSimplePolicy(obs_space, action_space, cfg, value_head)
    return Policy(obs_space, action_space, cfg, value_head, obs_norm, normalize_inputs)


def saved_policy(cfg: Config, obs_space: gymnasium.spaces.Dict, action_space: gymnasium.spaces.Space) -> Policy:
    """The policy a checkpoint trained with `cfg` holds, ready for its `model` state: the architecture and, where
    normalize.obs resolves on, the observation normaliser whose saved statistics it then applies, frozen (only
    training updates them). What `ddppo eval` and the KL reference act with."""
    return make_policy(obs_space, action_space, cfg.policy,
                       obs_norm=observation_normalizer(cfg.normalize, cfg.policy, obs_space, action_space))
