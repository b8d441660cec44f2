"""A policy and an encoder of your own, registered by name, for the corridor of corridor.py.

Chosen by config keys naming this module and the registered name, from the folder that holds this file:

    ddppo train cartpole env.name=gym:corridor:Corridor-v0 \
        policy.architecture=corridor_policy:deep_critic policy.vector_encoder=corridor_policy:layernorm_mlp

ddppo imports `corridor_policy` (from the working directory first, as `python -m` would) when it reads the
config, so `ddppo eval`, a resumed run and `ddppo.api.Agent` find the same network from the run's config.yaml.
"""

import math

from torch import nn

from ddppo.api import register_encoder, register_policy
from ddppo.model.policy import Policy


@register_encoder("layernorm_mlp")
def layernorm_mlp(space, cfg):
    """One vector observation key, (B, *shape) -> (B, hidden_size): a linear layer, LayerNorm, tanh."""
    size = int(math.prod(space.shape)) or 1
    return nn.Sequential(nn.Flatten(), nn.Linear(size, cfg.hidden_size), nn.LayerNorm(cfg.hidden_size), nn.Tanh())


class DeepCriticPolicy(Policy):
    """ddppo's Policy (an encoder per key, fused, the recurrent core, the actor) with a two-layer value head."""

    def __init__(self, obs_space, action_space, cfg, value_head=True, obs_norm=None, normalize_inputs=True):
        super().__init__(obs_space, action_space, cfg, value_head, obs_norm, normalize_inputs)
        if value_head:  # the KL reference policy is built without one
            self.critic = nn.Sequential(nn.Linear(cfg.hidden_size, cfg.hidden_size), nn.Tanh(),
                                        nn.Linear(cfg.hidden_size, 1))


@register_policy("deep_critic")
def deep_critic(obs_space, action_space, cfg, value_head, obs_norm, normalize_inputs):
    """policy.architecture=corridor_policy:deep_critic"""
    return DeepCriticPolicy(obs_space, action_space, cfg, value_head, obs_norm, normalize_inputs)
