"""ddppo's own network, `Policy` (policy.architecture=ddppo): an encoder per observation key fused (`Trunk`,
ddppo/model/encoders.py), the memory core policy.rnn_type names (ddppo/model/cores.py), an actor head for the action
space's kind and a critic head, behind the actor-critic interface (ddppo/model/actor_critic.py).

Its memory is its core's (ddppo/model/memory.py): a GRU's state {"rnn": (N, layers, H)}; for an LSTM, h and c
stacked along the layers, (N, 2 * layers, H); the transformer's KV cache (ddppo/model/transformer.py); {} without
a core.
"""

from __future__ import annotations

import gymnasium
import torch
from torch import nn

from ddppo.config import PolicyConfig
from ddppo.model.actions import GaussianActions, action_kind
from ddppo.model.actor_critic import ActorCritic
from ddppo.model.cores import make_core
from ddppo.model.encoders import ImageInput, Trunk, fuse_encodings, init_layer
from ddppo.model.kept import FEATURES, frozen_stage
from ddppo.model.memory import Memory
from ddppo.normalization import ObsNormalizer, continuous_control


def _kept_shapes(obs_space: gymnasium.spaces.Dict, encoders: nn.ModuleDict) -> dict[str, tuple[int, ...]]:
    """Image key -> the shape of its encoder's frozen stage's output for one image, for every image encoder that
    has a frozen stage (ddppo/model/kept.py)."""
    shapes = {}
    for k, enc in encoders.items():
        if isinstance(enc, ImageInput) and frozen_stage(enc.encoder) is not None:
            probe = torch.zeros((1, *obs_space[k].shape), dtype=torch.float32)
            with torch.no_grad():
                shapes[k] = tuple(enc.frozen_features(probe).shape[1:])
    return shapes


def separate_critic(obs_space: gymnasium.spaces.Dict, action_space: gymnasium.spaces.Space,
                    cfg: PolicyConfig) -> bool:
    """policy.critic resolved: separate, or auto on continuous control with an MLP policy (no recurrence)."""
    if cfg.critic == "auto":
        return (cfg.architecture == "ddppo" and cfg.rnn_type == "none"
                and continuous_control(obs_space, action_space))
    return cfg.critic == "separate"


class Policy(ActorCritic):
    """(Observation normalisation) -> the actor's trunk -> the memory core -> an actor for the action space's kind
    of distribution, and a critic: on the same features (shared trunk) or on a trunk of its own (`critic_trunk`,
    policy.critic).

    The actor's trunk's parts sit at the top level (`encoders`, `fuse`: the parameter names every checkpoint holds).
    With a critic of its own, the features handed between the methods are the actor's and the critic's side by
    side (..., 2H); the actor reads the first half, the value head the second, so no gradient of the value loss
    reaches the actor's parameters."""

    def __init__(self, obs_space: gymnasium.spaces.Dict, action_space: gymnasium.spaces.Space,
                 cfg: PolicyConfig, value_head: bool = True, obs_norm: ObsNormalizer | None = None,
                 normalize_inputs: bool = True):
        width = cfg.hidden_size
        super().__init__(action_kind(action_space), width)
        trunk = Trunk(obs_space, cfg)
        self.keys, self.encoders, self.fuse = trunk.keys, trunk.encoders, trunk.fuse
        # ddppo.normalization built it (its statistics are saved with the weights); None: no normalisation
        self.obs_norm = obs_norm
        # False when training with normalize.update=step: the observations come normalised from the acting path
        # (normalization/live.py); `ddppo eval` and exports keep True and apply the saved statistics
        self.normalize_inputs = normalize_inputs
        separate = value_head and separate_critic(obs_space, action_space, cfg)
        if separate and cfg.rnn_type != "none":
            raise ValueError("policy.critic=separate needs policy.rnn_type=none (a recurrent critic of its own "
                             "is not implemented): set policy.rnn_type=none or policy.critic=shared")
        self.critic_trunk = Trunk(obs_space, cfg) if separate else None
        # none with a critic trunk of its own, whose encoders see the images
        self.kept = {} if separate else _kept_shapes(obs_space, self.encoders)
        self.core = make_core(cfg, width)
        self.actor = init_layer(nn.Linear(width, self.action_kind.width), 0.01)
        if isinstance(self.action_kind, GaussianActions):
            self.log_std = nn.Parameter(torch.full((action_space.shape[0],), float(cfg.init_log_std)))
        self.critic = init_layer(nn.Linear(width, 1), 1.0) if value_head else None
        # policy.init=torch: the linear and conv layers built orthogonal above get PyTorch's own initialisation
        # back (recurrent cores keep their orthogonal weights)
        if cfg.init == "torch":
            for m in self.modules():
                if isinstance(m, (nn.Linear, nn.Conv2d)):
                    m.reset_parameters()

    @torch.no_grad()
    def keep(self, obs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """An observation (N, ...) as a rollout keeps it: each image of `kept` replaced by its frozen stage's
        features under the key KEY + FEATURES (ddppo/model/kept.py); as it is when nothing is kept."""
        if not self.kept:
            return obs
        out = {k: v for k, v in obs.items() if k not in self.kept}
        out.update({k + FEATURES: self.encoders[k].frozen_features(obs[k]) for k in self.kept if k in obs})
        return out

    def features(self, obs: dict[str, torch.Tensor], memory: Memory, start: torch.Tensor,
                 actions: torch.Tensor | None = None) -> tuple[torch.Tensor, Memory]:
        """obs (T, N, ...) -> features (T, N, H) (with a critic of its own: (T, N, 2H)), the memory after. An
        image key may come as its kept features instead (`keep`)."""
        T, N = start.shape
        flat_obs = {k: v.reshape(T * N, *v.shape[2:]) for k, v in obs.items()}
        if self.obs_norm is not None and self.normalize_inputs:
            flat_obs = self.obs_norm(flat_obs)
        x = fuse_encodings(self.keys, self.encoders, self.fuse, flat_obs).view(T, N, -1)
        if self.critic_trunk is not None:  # rnn_type=none: no recurrent core
            return torch.cat([x, self.critic_trunk(flat_obs).view(T, N, -1)], -1), memory
        return self.core(x, memory, start)

    def actor_input(self, features: torch.Tensor) -> torch.Tensor:
        return features[..., : self.hidden_size] if self.critic_trunk is not None else features

    def critic_input(self, features: torch.Tensor) -> torch.Tensor:
        return features[..., self.hidden_size:] if self.critic_trunk is not None else features
