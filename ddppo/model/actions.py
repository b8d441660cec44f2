"""Action distributions, one kind per gymnasium action space, behind one interface the policy, the learner and
the KL reference use without asking which kind it is.

    Discrete(n)            Categorical              params: log-probs (..., n)
    MultiDiscrete(nvec)    a Categorical per dim    params: log-probs (..., k * max(nvec)), dims padded to max(nvec)
                                                    with log-prob ~ -inf (finite: 0 * pad is 0, never NaN)
    MultiBinary(n)         a Bernoulli per dim      params: logits (..., n)
    Box (1-D, A)           diagonal Gaussian        params: mean and log std (..., 2A)

`params(out, log_std)` turns the actor's output (..., width) into the parameters, which are what a rollout
stores for a KL term (ppo/reference.py); `distribution(params)` is the torch.distributions object with one
sample per env (Independent over the action dims: its log_prob and entropy are summed over them);
`sample`, `log_prob`, `entropy`, `kl` work on the parameters. Discrete and Gaussian write the acting and
learning hot paths out (the same ops and random stream as the distribution, without an object per step);
the multi-dimensional kinds take torch.distributions' own.

Actions are stored (rollout/storage.py) and handed to the envs as `buffer` says: indices (int64) for
Discrete and MultiDiscrete (0..n-1 per dim: the envs add a space's `start`), 0/1 floats for MultiBinary, floats
for a Box.
"""

from __future__ import annotations

import math

import gymnasium
import numpy as np
import torch
from torch.distributions import Bernoulli, Categorical, Distribution, Independent, Normal, kl_divergence


class ActionKind:
    """The interface (see the module's docstring); the defaults go through `distribution`."""

    width: int  # actor outputs
    shape: tuple[int, ...]  # one env's action
    dtype: torch.dtype  # the stored action's

    def params(self, out: torch.Tensor, log_std: torch.Tensor | None = None) -> torch.Tensor:
        return out

    def distribution(self, params: torch.Tensor) -> Distribution:
        raise NotImplementedError

    def sample(self, params: torch.Tensor, deterministic: bool) -> tuple[torch.Tensor, torch.Tensor]:
        """An action per env (the mode when `deterministic`) and its log-probability."""
        dist = self.distribution(params)
        action = self.mode(params) if deterministic else dist.sample()
        return action, dist.log_prob(action)

    def mode(self, params: torch.Tensor) -> torch.Tensor:
        return self.distribution(params).mode

    def log_prob(self, params: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        return self.distribution(params).log_prob(actions.to(self.dtype))

    def entropy(self, params: torch.Tensor) -> torch.Tensor:
        return self.distribution(params).entropy()

    def kl(self, params: torch.Tensor, ref_params: torch.Tensor) -> torch.Tensor:
        """Exact KL(this || reference) per sample."""
        return kl_divergence(self.distribution(params), self.distribution(ref_params))


# validate_args=False throughout: the parameters come from the network (finite checks are the trainer's), and
# validation's per-call checks cost more than the tiny MLPs of continuous control on every step


class CategoricalActions(ActionKind):
    def __init__(self, n: int):
        self.width, self.shape, self.dtype = n, (), torch.long

    def params(self, out: torch.Tensor, log_std: torch.Tensor | None = None) -> torch.Tensor:
        return torch.log_softmax(out, -1)

    def distribution(self, params: torch.Tensor) -> Distribution:
        return Categorical(logits=params, validate_args=False)

    def sample(self, params: torch.Tensor, deterministic: bool) -> tuple[torch.Tensor, torch.Tensor]:
        # the acting hot path: no Distribution object per step
        action = params.argmax(-1) if deterministic else torch.multinomial(params.exp(), 1).squeeze(-1)
        return action, self.gathered(params, action)

    @staticmethod
    def gathered(params: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """The log-probs of `actions`, read from the parameters (log-probs already)."""
        return params.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)

    def log_prob(self, params: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        return self.gathered(params, actions)

    def entropy(self, params: torch.Tensor) -> torch.Tensor:
        clamped = params.clamp(min=torch.finfo(params.dtype).min)  # 0 * -inf would be NaN
        return -(clamped * clamped.exp()).sum(-1)


class MultiCategoricalActions(ActionKind):
    """A Categorical per dimension of a MultiDiscrete space; the actor's outputs are the dims' logits side by
    side (sum(nvec), as SB3's), laid out padded (k, max n) for the parameters."""

    def __init__(self, nvec: np.ndarray):
        nvec = [int(n) for n in nvec]
        self.k, self.n = len(nvec), max(nvec)
        self.width, self.shape, self.dtype = sum(nvec), (self.k,), torch.long
        # where each actor output goes in the padded (k * max n) layout
        self.slots = torch.tensor([d * self.n + j for d, size in enumerate(nvec) for j in range(size)])

    def params(self, out: torch.Tensor, log_std: torch.Tensor | None = None) -> torch.Tensor:
        padded = out.new_full((*out.shape[:-1], self.k * self.n), torch.finfo(out.dtype).min)
        padded[..., self.slots.to(out.device)] = out
        return torch.log_softmax(padded.view(*out.shape[:-1], self.k, self.n), -1).flatten(-2)

    def distribution(self, params: torch.Tensor) -> Distribution:
        logits = params.view(*params.shape[:-1], self.k, self.n)
        return Independent(Categorical(logits=logits, validate_args=False), 1, validate_args=False)

    def mode(self, params: torch.Tensor) -> torch.Tensor:
        return params.view(*params.shape[:-1], self.k, self.n).argmax(-1)


class BernoulliActions(ActionKind):
    """A Bernoulli per dimension of a MultiBinary space: the actor's outputs are their logits."""

    def __init__(self, n: int):
        self.width, self.shape, self.dtype = n, (n,), torch.float32

    def distribution(self, params: torch.Tensor) -> Distribution:
        return Independent(Bernoulli(logits=params, validate_args=False), 1, validate_args=False)

    def mode(self, params: torch.Tensor) -> torch.Tensor:
        return (params > 0).to(self.dtype)  # torch's Bernoulli.mode is NaN at p = 0.5


class GaussianActions(ActionKind):
    """A diagonal Gaussian over a 1-D Box: mean from the actor, a learnt log std per dim (the policy's)."""

    def __init__(self, dims: int):
        self.width, self.shape, self.dtype = dims, (dims,), torch.float32

    def params(self, out: torch.Tensor, log_std: torch.Tensor | None = None) -> torch.Tensor:
        return torch.cat([out, log_std.expand_as(out)], -1)

    def distribution(self, params: torch.Tensor) -> Distribution:
        mean, log_std = params.chunk(2, -1)
        return Independent(Normal(mean, log_std.exp(), validate_args=False), 1, validate_args=False)

    def sample(self, params: torch.Tensor, deterministic: bool) -> tuple[torch.Tensor, torch.Tensor]:
        # Normal's sample and log_prob written out (the same ops, so the same numbers and random stream): a
        # Distribution object per step costs more than a MuJoCo task's MLP
        mean, log_std = params.chunk(2, -1)
        std = log_std.exp()
        action = mean if deterministic else torch.normal(mean, std)
        logp = -((action - mean) ** 2) / (2 * std ** 2) - std.log() - math.log(math.sqrt(2 * math.pi))
        return action, logp.sum(-1)


def action_kind(space: gymnasium.spaces.Space) -> ActionKind:
    """The distribution kind of an action space; ValueError naming the space where there is none."""
    if isinstance(space, gymnasium.spaces.Discrete):
        return CategoricalActions(int(space.n))
    if isinstance(space, gymnasium.spaces.MultiDiscrete) and len(space.nvec.shape) == 1:
        return MultiCategoricalActions(space.nvec)
    if isinstance(space, gymnasium.spaces.MultiBinary) and len(np.shape(space.n)) == 0:
        return BernoulliActions(int(space.n))
    if isinstance(space, gymnasium.spaces.Box) and len(space.shape) == 1:
        return GaussianActions(space.shape[0])
    raise ValueError(f"unsupported action space {space}: use Discrete, a 1-D MultiDiscrete, a MultiBinary(n) or "
                     f"a 1-D Box (flatten it with a gymnasium ActionWrapper in your own module, "
                     f"env.name=gym:MODULE:ID)")


def action_buffer(space: gymnasium.spaces.Space) -> tuple[tuple[int, ...], torch.dtype]:
    """(shape, dtype) of one env's stored action (rollout/storage.py): indices for Discrete and MultiDiscrete,
    floats for the rest (a Box of any shape: a policy of your own may act in one)."""
    integral = isinstance(space, (gymnasium.spaces.Discrete, gymnasium.spaces.MultiDiscrete))
    return tuple(space.shape), torch.long if integral else torch.float32


def env_actions(space: gymnasium.spaces.Space, actions: np.ndarray) -> np.ndarray:
    """The policy's actions (N, ...) as the env takes them: a Box's clipped to its bounds, MultiBinary's in its
    dtype (int8), the rest as they are (indices from 0)."""
    if isinstance(space, gymnasium.spaces.Box):
        return np.clip(actions, space.low, space.high)
    if isinstance(space, gymnasium.spaces.MultiBinary):
        return actions.astype(space.dtype)
    return actions
