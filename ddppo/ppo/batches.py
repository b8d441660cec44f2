"""The minibatches the PPO update cuts from a rollout and its advantages: split by environment with time kept whole
(for recurrence), or of samples drawn from every (step, env) for policies without memory."""

from __future__ import annotations

import dataclasses
from typing import Callable, Iterator

import torch

from ddppo.advantage.estimator import Advantages
from ddppo.model import memory as mem
from ddppo.model.memory import Memory
from ddppo.rollout.rollout import Rollout


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
