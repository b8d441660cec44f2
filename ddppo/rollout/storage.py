"""Preallocated rollout storage with a valid-step mask.

Layout is (time, env, ...). A rank that is preempted after L < T steps leaves
steps L..T-1 unwritten; they are masked out (`valid`) of every loss and
statistic, and returns bootstrap from `values[L]`, the value of the observation
the next rollout starts from.

Variable-length segments (rollout.mode=variable, `insert_envs`): env n holds its
own `lengths[n]` steps at times 0..lengths[n]-1 (T is then the per-env capacity);
the rest of its column is masked out, its returns bootstrap from
`values[lengths[n], n]`, and `step` is the longest segment. Minibatches stay
split by environment, so their number (and every rank's collectives) does not
depend on the lengths.

Masked-out steps may hold anything (an older rollout's data, a NaN reward): a mask never multiplies
them. GAE selects them away (torch.where), advantages and returns there are exactly 0, and the loss takes
masked means with torch.where (ppo/loss.py), so a NaN outside the valid steps poisons nothing.

The storage keeps buffers only: advantages and returns are written by the estimator (ddppo/advantage/).

Sample weights (`env_weight`, variable mode with rollout.importance_weights): one weight per env for the
rollout's samples, handed to the loss with each minibatch; None (every other mode) weighs all alike.
`rank_weight` (preemption.rank_weighting): one weight for every sample of this rank's rollout, applied by the
gradient reducer against the other ranks' samples (ddppo/ppo/update.py).
"""

from __future__ import annotations

import dataclasses
from typing import Iterator

import gymnasium
import numpy as np
import torch

from ddppo.model.actions import action_buffer


@dataclasses.dataclass
class MiniBatch:
    """A slice of the rollout over a subset of environments, time kept whole (for recurrence)."""

    obs: dict[str, torch.Tensor]  # (L, n, ...)
    episode_start: torch.Tensor  # (L, n) 1.0 where obs[t] is the first of an episode
    hidden: torch.Tensor  # (layers, n, H): recurrent state before obs[0]
    actions: torch.Tensor  # (L, n, ...)
    old_logp: torch.Tensor  # (L, n)
    old_values: torch.Tensor  # (L, n)
    advantages: torch.Tensor  # (L, n)
    returns: torch.Tensor  # (L, n)
    valid: torch.Tensor  # (L, n) float mask
    ref_params: torch.Tensor | None = None  # (L, n, P) reference policy's distribution parameters, when used
    weight: torch.Tensor | None = None  # (n,) per-env sample weight (VER importance weights), None: all 1


def torch_dtype(space: gymnasium.spaces.Space) -> torch.dtype:
    return torch.uint8 if space.dtype == np.uint8 else torch.float32


class RolloutStorage:
    """Tensors for one rollout of `num_steps` x `num_envs`, allocated once."""

    def __init__(self, num_steps: int, num_envs: int, obs_space: gymnasium.spaces.Dict,
                 action_space: gymnasium.spaces.Space, hidden_shape: tuple[int, ...], device: torch.device):
        T, N = num_steps, num_envs
        self.num_steps, self.num_envs, self.device = T, N, device
        self.obs = {k: torch.zeros((T + 1, N, *s.shape), dtype=torch_dtype(s), device=device)
                    for k, s in obs_space.spaces.items()}
        self.episode_start = torch.ones(T + 1, N, device=device)
        shape, dtype = action_buffer(action_space)
        self.actions = torch.zeros(T, N, *shape, dtype=dtype, device=device)
        self.logp = torch.zeros(T, N, device=device)
        self.values = torch.zeros(T + 1, N, device=device)
        self.rewards = torch.zeros(T, N, device=device)
        self.dones = torch.zeros(T, N, device=device)
        self.idle = torch.zeros(T, N, device=device)  # grouped episodes: the env waited (a no-op step)
        self.loss_mask = torch.ones(T, N, device=device)  # steps that take part in the loss
        self.hidden0 = torch.zeros(hidden_shape, device=device)
        self.advantages = torch.zeros(T, N, device=device)
        self.returns = torch.zeros(T, N, device=device)
        self.step = 0  # steps collected so far in this rollout (L; the longest segment when lengths is set)
        self.lengths: torch.Tensor | None = None  # (N,) per-env segment lengths (variable mode), on the CPU
        self.env_weight: torch.Tensor | None = None  # (N,) per-env sample weights of this rollout, or None
        self.rank_weight = 1.0  # the weight of each of this rank's samples against other ranks' (rollout/preemption)

    @property
    def valid(self) -> torch.Tensor:
        """(T, N) mask of collected steps that take part in the loss."""
        mask = torch.zeros(self.num_steps, self.num_envs, device=self.device)
        mask[: self.step] = self.loss_mask[: self.step]
        if self.lengths is not None:
            collected = torch.arange(self.num_steps, device=self.device)[:, None] < self.lengths.to(self.device)
            mask = torch.where(collected, mask, torch.zeros_like(mask))
        return mask

    def nbytes(self) -> int:
        tensors = [*self.obs.values(), self.episode_start, self.actions, self.logp, self.values, self.rewards,
                   self.dones, self.idle, self.loss_mask, self.hidden0, self.advantages, self.returns]
        return sum(t.numel() * t.element_size() for t in tensors)

    def set_first(self, obs: dict[str, torch.Tensor], episode_start: torch.Tensor, hidden: torch.Tensor) -> None:
        """The observation, episode-start flags and recurrent state the rollout starts from."""
        for k, v in obs.items():
            self.obs[k][0].copy_(v)
        self.episode_start[0].copy_(episode_start)
        self.hidden0.copy_(hidden)
        # every step counts until an insert says otherwise (grouped episodes' idle steps, GRPO's mask): reset once
        # here, so the common insert writes neither
        self.idle.zero_()
        self.loss_mask.fill_(1.0)
        self.step = 0
        self.lengths = None
        self.env_weight = None
        self.rank_weight = 1.0

    def insert(self, action: torch.Tensor, logp: torch.Tensor, value: torch.Tensor, reward: torch.Tensor,
               done: torch.Tensor, next_obs: dict[str, torch.Tensor], next_start: torch.Tensor | None = None,
               idle: torch.Tensor | None = None) -> None:
        """One step; `next_start` (default: `done`) flags next_obs as an episode's first observation."""
        t = self.step
        if idle is not None:  # grouped episodes (None, the common case: every step counts, as set_first left it)
            self.idle[t].copy_(idle)
            torch.sub(1.0, idle, out=self.loss_mask[t])
        self.actions[t].copy_(action)
        self.logp[t].copy_(logp)
        self.values[t].copy_(value)
        self.rewards[t].copy_(reward)
        self.dones[t].copy_(done)
        for k, v in next_obs.items():
            self.obs[k][t + 1].copy_(v)
        self.episode_start[t + 1].copy_(done if next_start is None else next_start)
        self.step = t + 1

    def insert_envs(self, envs: torch.Tensor, action: torch.Tensor, logp: torch.Tensor, value: torch.Tensor,
                    reward: torch.Tensor, done: torch.Tensor, next_obs: dict[str, torch.Tensor],
                    next_start: torch.Tensor, at: tuple[torch.Tensor, torch.Tensor] | None = None) -> None:
        """One step of the envs `envs` (CPU long tensor), each at the end of its own segment; `at`: those
        slots and envs already on the device (the collector stages them with the step), else copied here."""
        if self.lengths is None:
            self.lengths = torch.full((self.num_envs,), self.step, dtype=torch.long)
        t = self.lengths[envs]
        if int(t.max()) >= self.num_steps:
            raise ValueError(f"env segment longer than the storage's capacity of {self.num_steps} steps")
        t_dev, e_dev = (t.to(self.device), envs.to(self.device)) if at is None else at
        self.idle[t_dev, e_dev] = 0.0
        self.loss_mask[t_dev, e_dev] = 1.0
        self.actions[t_dev, e_dev] = action
        self.logp[t_dev, e_dev] = logp
        self.values[t_dev, e_dev] = value
        self.rewards[t_dev, e_dev] = reward
        self.dones[t_dev, e_dev] = done
        for k, v in next_obs.items():
            self.obs[k][t_dev + 1, e_dev] = v.to(self.obs[k].dtype)
        self.episode_start[t_dev + 1, e_dev] = next_start
        self.lengths[envs] = t + 1
        self.step = max(self.step, int(t.max()) + 1)

    def minibatches(self, num_mini_batch: int, generator: torch.Generator | None = None,
                    ref_params: torch.Tensor | None = None, split: str = "env") -> Iterator[MiniBatch]:
        """`num_mini_batch` minibatches split by environment over the collected steps (`split="sample"`: of
        samples drawn at random from every (step, env), for feed-forward policies: `sample_minibatches`).

        Always yields exactly `num_mini_batch` batches, however few steps were collected,
        so every rank performs the same number of optimiser steps (and collectives).
        """
        if split == "sample":
            yield from self.sample_minibatches(num_mini_batch, generator, ref_params)
            return
        L = self.step
        perm = torch.randperm(self.num_envs, generator=generator).to(self.device)
        valid = self.valid
        for idx in perm.chunk(num_mini_batch):
            yield MiniBatch(
                obs={k: v[:L, idx] for k, v in self.obs.items()},
                episode_start=self.episode_start[:L, idx],
                hidden=self.hidden0[:, idx],
                actions=self.actions[:L, idx],
                old_logp=self.logp[:L, idx],
                old_values=self.values[:L, idx],
                advantages=self.advantages[:L, idx],
                returns=self.returns[:L, idx],
                valid=valid[:L, idx],
                ref_params=None if ref_params is None else ref_params[:, idx],
                weight=None if self.env_weight is None else self.env_weight[idx],
            )

    def sample_minibatches(self, num_mini_batch: int, generator: torch.Generator | None = None,
                           ref_params: torch.Tensor | None = None) -> Iterator[MiniBatch]:
        """Exactly `num_mini_batch` minibatches of (step, env) samples in random order (SB3's and CleanRL's
        minibatches; ppo.minibatch_split=sample), each shaped as one step of B "envs" (1, B, ...), with a zero
        recurrent state: only for policies without recurrence. Masked-out slots are drawn too and stay masked,
        so the number of minibatches never depends on what was collected."""
        L, N = self.step, self.num_envs
        perm = torch.randperm(L * N, generator=generator).to(self.device)
        valid = self.valid[:L].reshape(L * N)

        def flat(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
            return x[:L].reshape(L * N, *x.shape[2:])[idx].unsqueeze(0)

        for idx in torch.tensor_split(perm, num_mini_batch):
            yield MiniBatch(
                obs={k: flat(v, idx) for k, v in self.obs.items()},
                episode_start=flat(self.episode_start, idx),
                hidden=self.hidden0.new_zeros(self.hidden0.shape[0], idx.numel(), self.hidden0.shape[-1]),
                actions=flat(self.actions, idx),
                old_logp=flat(self.logp, idx),
                old_values=flat(self.values, idx),
                advantages=flat(self.advantages, idx),
                returns=flat(self.returns, idx),
                valid=valid[idx].unsqueeze(0),
                ref_params=None if ref_params is None else flat(ref_params, idx),
                weight=None if self.env_weight is None else self.env_weight.to(self.device)[idx % N],
            )
