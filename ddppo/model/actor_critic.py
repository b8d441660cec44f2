"""The actor-critic interface every policy offers the trainer, `ddppo eval`, the KL reference and `ddppo.api.Agent`:
features from observations and the memory, an actor head whose outputs the action kind turns into a
distribution's parameters (ddppo.model.actions: categorical, one per dim, Bernoulli per dim, diagonal Gaussian), a
critic head, and the methods built on them (`act`, `value`, `evaluate`, `sequence_params`).

A policy subclasses `ActorCritic`, calls its `__init__` with its action kind and feature width, and provides:

- `core`: its memory core (ddppo/model/core.py), whose `initial_memory` and `legacy_memory` are the policy's
  unless it overrides them (habitat-baselines' policy keeps its previous action beside the core's state);
- `features(obs, memory, start, actions=None)`: observations (T, N, ...) -> features (T, N, F) and the memory after
  (`actions`: the T actions taken, for a policy that feeds back the previous one);
- `actor` and `critic` (None without a value head): modules on the features;
- optionally `actor_input` / `critic_input` (which part of the features each head reads), `remember` (the memory
  once the action is known), `keep` and `kept` (a frozen encoder's features in a rollout, ddppo/model/kept.py),
  `log_std` (a Gaussian's state-independent log std).

ddppo's own network is ddppo/model/policy.py; habitat-baselines' are ddppo/model/habitat_baselines*.py.
"""

from __future__ import annotations

import torch
from torch import nn

from ddppo.model.actions import ActionKind
from ddppo.model.memory import Memory


class ActorCritic(nn.Module):
    """The interface (the module's docstring). `hidden_size` is the width of the features the heads read."""

    def __init__(self, action_kind: ActionKind, hidden_size: int):
        super().__init__()
        self.action_kind, self.hidden_size = action_kind, hidden_size
        # image key -> the feature shape its frozen stage puts out, what a rollout keeps in place of the images
        self.kept: dict[str, tuple[int, ...]] = {}
        self.log_std: nn.Parameter | None = None  # Box actions: a Gaussian's log std, set by the subclass

    # ------------------------------------------------------------------ state
    def initial_memory(self, num_envs: int, device: torch.device | str = "cpu") -> Memory:
        """The memory of `num_envs` envs at an episode's start (ddppo/model/memory.py): the core's."""
        return self.core.initial_memory(num_envs, device)

    def legacy_memory(self, hidden: torch.Tensor) -> Memory:
        """The memory a checkpoint from before the memory protocol saved as one tensor (layers, N, H)."""
        return self.core.legacy_memory(hidden)

    def keep(self, obs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """An observation (N, ...) as a rollout keeps it: as it is, unless the policy keeps features (`kept`)."""
        return obs

    def remember(self, memory: Memory, actions: torch.Tensor) -> Memory:
        """The memory once `actions` (N, ...) were taken from it: as it is, unless the policy feeds them back."""
        return memory

    # -------------------------------------------------------------- the parts
    def features(self, obs: dict[str, torch.Tensor], memory: Memory, start: torch.Tensor,
                 actions: torch.Tensor | None = None) -> tuple[torch.Tensor, Memory]:
        """obs (T, N, ...), start (T, N) -> features (T, N, F), the memory after the T steps."""
        raise NotImplementedError

    def actor_input(self, features: torch.Tensor) -> torch.Tensor:
        return features

    def critic_input(self, features: torch.Tensor) -> torch.Tensor:
        return features

    def dist_params(self, features: torch.Tensor) -> torch.Tensor:
        """Action distribution parameters (..., P) (ddppo.model.actions: log-probs, logits or mean and log std)."""
        return self.action_kind.params(self.actor(self.actor_input(features)), self.log_std)

    def value_of(self, features: torch.Tensor) -> torch.Tensor:
        """The critic's value (...) of features (..., F); zeros without a value head."""
        if self.critic is None:
            return torch.zeros(features.shape[:-1], device=features.device)
        return self.critic(self.critic_input(features)).squeeze(-1)

    def params_to_distribution(self, params: torch.Tensor) -> torch.distributions.Distribution:
        """The torch distribution of the parameters (one sample per env: Independent over the action dims)."""
        return self.action_kind.distribution(params)

    def kl(self, params: torch.Tensor, ref_params: torch.Tensor) -> torch.Tensor:
        """Exact KL(this || reference) per sample, from distribution parameters."""
        return self.action_kind.kl(params, ref_params)

    # ---------------------------------------------------------------- public
    @torch.no_grad()
    def act(self, obs: dict[str, torch.Tensor], memory: Memory, start: torch.Tensor,
            deterministic: bool = False) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, Memory]:
        """One step for N envs: obs (N, ...), start (N,) -> action, logp, value, the memory after."""
        feats, memory = self.features({k: v.unsqueeze(0) for k, v in obs.items()}, memory, start.unsqueeze(0))
        feats = feats[0]
        action, logp = self.action_kind.sample(self.dist_params(feats), deterministic)
        return action, logp, self.value_of(feats), self.remember(memory, action)

    @torch.no_grad()
    def value(self, obs: dict[str, torch.Tensor], memory: Memory, start: torch.Tensor) -> torch.Tensor:
        """One step's value for N envs: obs (N, ...), start (N,) -> (N,)."""
        feats, _ = self.features({k: v.unsqueeze(0) for k, v in obs.items()}, memory, start.unsqueeze(0))
        return self.value_of(feats[0])

    @torch.no_grad()
    def sequence_params(self, obs: dict[str, torch.Tensor], memory: Memory,
                        start: torch.Tensor, actions: torch.Tensor | None = None) -> tuple[torch.Tensor, Memory]:
        """Distribution parameters over whole sequences (T, N, P), and the memory after them (`actions`, the
        actions taken, for policies that feed back the previous action)."""
        feats, memory = self.features(obs, memory, start, actions)
        return self.dist_params(feats), (self.remember(memory, actions[-1]) if actions is not None else memory)

    def evaluate(self, obs: dict[str, torch.Tensor], memory: Memory, start: torch.Tensor,
                 actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Whole sequences: obs (T, N, ...) -> logp, entropy, value, each (T, N)."""
        return self.evaluate_with_params(obs, memory, start, actions)[:3]

    def evaluate_with_params(self, obs: dict[str, torch.Tensor], memory: Memory, start: torch.Tensor,
                             actions: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """`evaluate` plus the distribution parameters (T, N, P), for a KL term."""
        feats, _ = self.features(obs, memory, start, actions)
        params = self.dist_params(feats)
        kind = self.action_kind
        return kind.log_prob(params, actions), kind.entropy(params), self.value_of(feats), params
