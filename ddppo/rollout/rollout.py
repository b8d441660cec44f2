"""One rollout as a value, and the minibatches the PPO update cuts from it.

    collect     -> Rollout     the collector writes a storage's buffers (rollout/storage.py) while it collects, then
                               returns a Rollout: views of those buffers over the collected steps, with the policy's
                               memory before the first step, each env's bootstrap value, the sample weights and the
                               envs' own rewards
    score       -> Rollout     the scoring stage (rollout/scoring.py) returns a rollout with the rewards it made
                               (reward model combined, scaled, truncations bootstrapped: `Rollout.replace`)
    advantages  -> Advantages  the estimator returns new tensors (ddppo/advantage/); nothing writes into a rollout
    agree/learn                read the rollout and its advantages

Ownership: the collector alone writes the buffers, and only while it collects into them; once a Rollout is
returned, nobody writes its tensors (the next collection into the same buffers starts only after the update that
learns on them: train/learning.py). A field is replaced by making a new Rollout, never by writing into one.

Layout is (step, env, ...). A rank that is preempted after L < T steps returns L steps. In the variable and
overlapped modes env n holds its own `lengths[n]` steps at times 0..lengths[n]-1 (L is the longest); the rest of
its column is masked out (`valid`), and it bootstraps from the value after its own last step.

Masked-out steps may hold anything (an older rollout's data, a NaN reward): a mask never multiplies them. GAE
selects them away (torch.where), advantages and returns there are exactly 0, and the loss takes masked means with
torch.where (ppo/loss.py), so a NaN outside the valid steps poisons nothing.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Iterator, NamedTuple

import torch

from ddppo.model import memory as mem
from ddppo.model.memory import Memory


@dataclasses.dataclass(frozen=True)
class Rollout:
    """The steps one rank collected for one update (every tensor on the rank's device unless said)."""

    obs: dict[str, torch.Tensor]  # (L, N, ...) the observations acted on
    episode_start: torch.Tensor  # (L, N) 1.0 where obs[t] is the first of an episode
    memory: Memory  # the policy's memory before obs[0] (ddppo/model/memory.py; opaque here)
    actions: torch.Tensor  # (L, N, ...)
    logp: torch.Tensor  # (L, N) the behaviour policy's log-probabilities
    values: torch.Tensor  # (L, N) the behaviour policy's values
    rewards: torch.Tensor  # (L, N) the envs' own; once scored, scaled by normalize.reward, truncations bootstrapped
    dones: torch.Tensor  # (L, N)
    idle: torch.Tensor  # (L, N) grouped episodes: 1.0 where the env waited (a no-op step)
    valid: torch.Tensor  # (L, N) float mask: collected steps that take part in the loss
    bootstrap: torch.Tensor  # (N,) V(the observation after each env's last collected step)
    lengths: torch.Tensor | None = None  # (N,) on the CPU: per-env segment lengths (variable, overlapped modes)
    env_weight: torch.Tensor | None = None  # (N,) per-env sample weights (VER importance weights), None: all 1
    rank_weight: float = 1.0  # the weight of each of this rank's samples against other ranks' (preemption)

    @property
    def steps(self) -> int:
        """L: the steps collected (the longest segment when envs hold segments of their own)."""
        return self.rewards.shape[0]

    @property
    def num_envs(self) -> int:
        return self.rewards.shape[1]

    def replace(self, **changes: Any) -> Rollout:
        """A new rollout with `changes` (e.g. a reward model's rewards); this one is left as it is."""
        return dataclasses.replace(self, **changes)


class Advantages(NamedTuple):
    """What an advantage estimator returns for a rollout: new tensors, (L, N) each."""

    advantages: torch.Tensor
    returns: torch.Tensor  # 0 where the estimator has no critic (GRPO)
    mask: torch.Tensor  # float: the samples that take part in the loss (the rollout's valid ones, or fewer: GRPO)


@dataclasses.dataclass
class MiniBatch:
    """A slice of the rollout over a subset of environments, time kept whole (for recurrence)."""

    obs: dict[str, torch.Tensor]  # (L, n, ...)
    episode_start: torch.Tensor  # (L, n) 1.0 where obs[t] is the first of an episode
    memory: Memory  # the policy's memory before obs[0], of these n envs
    actions: torch.Tensor  # (L, n, ...)
    old_logp: torch.Tensor  # (L, n)
    old_values: torch.Tensor  # (L, n)
    advantages: torch.Tensor  # (L, n)
    returns: torch.Tensor  # (L, n)
    valid: torch.Tensor  # (L, n) float mask
    ref_params: torch.Tensor | None = None  # (L, n, P) reference policy's distribution parameters, when used
    weight: torch.Tensor | None = None  # (n,) per-env sample weight (VER importance weights), None: all 1


Order = Callable[..., torch.Tensor]  # (n, generator=None) -> a permutation of range(n), as torch.randperm


def minibatches(rollout: Rollout, adv: Advantages, num_mini_batch: int, generator: torch.Generator | None = None,
                ref_params: torch.Tensor | None = None, split: str = "env",
                order: Order = torch.randperm) -> Iterator[MiniBatch]:
    """`num_mini_batch` minibatches split by environment over the collected steps (`split="sample"`: of samples
    drawn at random from every (step, env), for policies without memory: `sample_minibatches`), in the random
    `order` drawn from `generator`.

    Always yields exactly `num_mini_batch` batches, however few steps were collected, so every rank performs the
    same number of optimiser steps (and collectives).
    """
    if split == "sample":
        yield from sample_minibatches(rollout, adv, num_mini_batch, generator, ref_params, order)
        return
    device = rollout.rewards.device
    perm = order(rollout.num_envs, generator=generator).to(device)
    weight = rollout.env_weight
    for idx in perm.chunk(num_mini_batch):
        yield MiniBatch(
            obs={k: v[:, idx] for k, v in rollout.obs.items()},
            episode_start=rollout.episode_start[:, idx],
            memory=mem.select(rollout.memory, idx),
            actions=rollout.actions[:, idx],
            old_logp=rollout.logp[:, idx],
            old_values=rollout.values[:, idx],
            advantages=adv.advantages[:, idx],
            returns=adv.returns[:, idx],
            valid=adv.mask[:, idx],
            ref_params=None if ref_params is None else ref_params[:, idx],
            weight=None if weight is None else weight[idx],
        )


def sample_minibatches(rollout: Rollout, adv: Advantages, num_mini_batch: int,
                       generator: torch.Generator | None = None, ref_params: torch.Tensor | None = None,
                       order: Order = torch.randperm) -> Iterator[MiniBatch]:
    """Exactly `num_mini_batch` minibatches of (step, env) samples in random order (SB3's and CleanRL's minibatches;
    ppo.minibatch_split=sample), each shaped as one step of B "envs" (1, B, ...), with an empty memory: only for
    policies without memory. Masked-out slots are drawn too and stay masked, so the number of minibatches never
    depends on what was collected."""
    L, N = rollout.steps, rollout.num_envs
    device = rollout.rewards.device
    perm = order(L * N, generator=generator).to(device)
    valid = adv.mask.reshape(L * N)

    def flat(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        return x.reshape(L * N, *x.shape[2:])[idx].unsqueeze(0)

    for idx in torch.tensor_split(perm, num_mini_batch):
        yield MiniBatch(
            obs={k: flat(v, idx) for k, v in rollout.obs.items()},
            episode_start=flat(rollout.episode_start, idx),
            memory=mem.zeros(rollout.memory, idx.numel()),
            actions=flat(rollout.actions, idx),
            old_logp=flat(rollout.logp, idx),
            old_values=flat(rollout.values, idx),
            advantages=flat(adv.advantages, idx),
            returns=flat(adv.returns, idx),
            valid=valid[idx].unsqueeze(0),
            ref_params=None if ref_params is None else flat(ref_params, idx),
            weight=None if rollout.env_weight is None else rollout.env_weight.to(device)[idx % N],
        )
