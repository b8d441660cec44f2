"""The policy `policy.architecture` names, and the decorators that register your own policies, encoders and cores.

A policy builder is called as `builder(obs_space, action_space, cfg, value_head, obs_norm, normalize_inputs)`
(the observation space a gymnasium Dict, `cfg` the config's `policy` section, `obs_norm` the observation
normaliser or None, `normalize_inputs` whether the policy applies it) and returns a
`ddppo.model.actor_critic.ActorCritic` (the interface the trainer, `ddppo eval` and `ddppo.api.Agent` call; ddppo's
own network, `ddppo.model.policy.Policy`, is one). An encoder builder is called as `builder(space, cfg)` for one
observation key and returns a module mapping a batch (B, ...) of that key to (B, cfg.hidden_size). A core is a
`ddppo.model.core.Core` subclass (that module's docstring states the protocol). docs/guides/custom-policy.md and
docs/guides/custom-core.md have worked examples.
"""

from __future__ import annotations

from typing import Any, Callable

import gymnasium

from ddppo.config import Config, PolicyConfig
from ddppo.model.actor_critic import ActorCritic
from ddppo.model.policy import Policy
from ddppo.normalization import ObsNormalizer, observation_normalizer
from ddppo.user_code import CORES, ENCODERS, POLICIES, VECTOR_ENCODERS


def register_policy(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator registering a policy builder under `name`, chosen by `policy.architecture=MODULE:name` (MODULE,
    the module it is in, is imported from the working directory first, also by `ddppo eval` and on resume)."""
    return POLICIES.register(name)


def register_encoder(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator registering an encoder builder under `name`, chosen by `policy.image_encoder=MODULE:name` (for
    image keys: its input is (B, C, H, W) scaled to [0, 1]) or `policy.vector_encoder=MODULE:name` (for every
    other Box key: its input is (B, *shape), normalised where normalize.obs is on): a choice of both keys."""
    image, vector = ENCODERS.register(name), VECTOR_ENCODERS.register(name)

    def add(builder: Callable[..., Any]) -> Callable[..., Any]:
        return vector(image(builder))

    return add


def register_core(name: str) -> Callable[[type], type]:
    """Decorator registering a memory core (a `ddppo.model.core.Core` subclass) under `name`, chosen by
    `policy.rnn_type=MODULE:name` (MODULE imported from the working directory first, also by `ddppo eval` and on
    resume)."""
    return CORES.register(name)


@register_policy("ddppo")
def ddppo_policy(obs_space: gymnasium.spaces.Dict, action_space: gymnasium.spaces.Space, cfg: PolicyConfig,
                 value_head: bool = True, obs_norm: ObsNormalizer | None = None,
                 normalize_inputs: bool = True) -> Policy:
    """ddppo's Policy: an encoder per observation key, fused, a recurrent core, the heads."""
    return Policy(obs_space, action_space, cfg, value_head, obs_norm, normalize_inputs)


@register_policy("habitat_baselines")
def habitat_baselines_policy(obs_space: gymnasium.spaces.Dict, action_space: gymnasium.spaces.Space,
                             cfg: PolicyConfig, value_head: bool = True, obs_norm: ObsNormalizer | None = None,
                             normalize_inputs: bool = True):
    """habitat-baselines' PointNavResNetPolicy, parameter for parameter (its own input scaling)."""
    from ddppo.model.habitat_baselines import HabitatBaselinesPolicy

    return HabitatBaselinesPolicy(obs_space, action_space, cfg, value_head)


@register_policy("habitat_baselines_simple")
def habitat_baselines_simple_policy(obs_space: gymnasium.spaces.Dict, action_space: gymnasium.spaces.Space,
                                    cfg: PolicyConfig, value_head: bool = True,
                                    obs_norm: ObsNormalizer | None = None, normalize_inputs: bool = True):
    """habitat-baselines' PointNavBaselinePolicy (SimpleCNN + GRU; its own input scaling)."""
    from ddppo.model.habitat_baselines_simple import HabitatBaselinesSimplePolicy

    return HabitatBaselinesSimplePolicy(obs_space, action_space, cfg, value_head)


def make_policy(obs_space: gymnasium.spaces.Dict, action_space: gymnasium.spaces.Space, cfg: PolicyConfig,
                value_head: bool = True, obs_norm: ObsNormalizer | None = None,
                normalize_inputs: bool = True) -> ActorCritic:
    """The policy `cfg.architecture` names: ddppo's Policy, habitat-baselines' PointNavResNetPolicy
    (habitat_baselines) or PointNavBaselinePolicy (habitat_baselines_simple), or your own (`MODULE:NAME`,
    registered with `register_policy`). `obs_norm`: the observation normaliser the policy holds
    (ddppo.normalization.observation_normalizer, which builds none for the habitat-baselines policies: they keep
    their own input scaling); `normalize_inputs`: whether the policy applies it (False when the acting path
    already did: normalize.update=step)."""
    builder = POLICIES.get(cfg.architecture, "policy.architecture")
    return builder(obs_space, action_space, cfg, value_head, obs_norm, normalize_inputs)


def saved_policy(cfg: Config, obs_space: gymnasium.spaces.Dict,
                 action_space: gymnasium.spaces.Space) -> ActorCritic:
    """The policy a checkpoint trained with `cfg` holds, ready for its `model` state: the architecture and, where
    normalize.obs resolves on, the observation normaliser whose saved statistics it then applies, frozen (only
    training updates them). What `ddppo eval` and the KL reference act with."""
    return make_policy(obs_space, action_space, cfg.policy,
                       obs_norm=observation_normalizer(cfg.normalize, cfg.policy, obs_space, action_space))
