"""The preallocated buffers a rollout is collected into, and the only writes into them.

The collector (rollout/collector.py and its strategies) is the one writer: `begin` at the start of a rollout,
`insert` (every env a step together) or `insert_envs` (some envs, each at the end of its own segment) per step,
then `rollout(...)` returns the collected steps as a `Rollout` value (rollout/rollout.py), which every later phase
reads and nobody writes. Layout is (time, env, ...), T = the per-env capacity.

Variable-length segments (rollout.mode=variable and the overlapped mode, `insert_envs`): env n holds its own
`lengths[n]` steps at times 0..lengths[n]-1; the rest of its column is masked out, and `step` is the longest
segment. Masked-out steps may hold anything (an older rollout's data): a mask never multiplies them.
"""

from __future__ import annotations

from typing import Union

import gymnasium
import torch

from ddppo.model import kept
from ddppo.model.actions import action_buffer
from ddppo.model import memory as mem
from ddppo.model.memory import Memory
from ddppo.rollout.rollout import Rollout


class RolloutStorage:
    """Tensors for one rollout of `num_steps` x `num_envs`, allocated once."""

    def __init__(self, num_steps: int, num_envs: int, obs: Union[gymnasium.spaces.Dict, kept.Specs],
                 action_space: gymnasium.spaces.Space, memory: Memory, device: torch.device):
        """`obs`: the observation space, or what the rollout keeps of it (ddppo.model.kept.specs: each key's shape
        and dtype, frozen encoders' features in place of their images); `memory`: the policy's memory of the
        `num_envs` envs (its layout: Policy.initial_memory)."""
        T, N = num_steps, num_envs
        self.num_steps, self.num_envs, self.device = T, N, device
        specs = kept.specs(obs) if isinstance(obs, gymnasium.spaces.Dict) else obs
        self.obs = {k: torch.zeros((T + 1, N, *shape), dtype=dtype, device=device)
                    for k, (shape, dtype) in specs.items()}
        self.episode_start = torch.ones(T + 1, N, device=device)
        shape, dtype = action_buffer(action_space)
        self.actions = torch.zeros(T, N, *shape, dtype=dtype, device=device)
        self.logp = torch.zeros(T, N, device=device)
        self.values = torch.zeros(T, N, device=device)
        self.rewards = torch.zeros(T, N, device=device)
        self.dones = torch.zeros(T, N, device=device)
        self.idle = torch.zeros(T, N, device=device)  # grouped episodes: the env waited (a no-op step, no sample)
        self.memory0 = mem.to(mem.zeros(memory, N), device)  # the policy's memory before obs[0]
        self.step = 0  # steps collected so far in this rollout (L; the longest segment when lengths is set)
        self.lengths: torch.Tensor | None = None  # (N,) per-env segment lengths (insert_envs), on the CPU

    @property
    def valid(self) -> torch.Tensor:
        """(T, N) mask of collected steps that take part in the loss."""
        mask = torch.zeros(self.num_steps, self.num_envs, device=self.device)
        torch.sub(1.0, self.idle[: self.step], out=mask[: self.step])
        if self.lengths is not None:
            collected = torch.arange(self.num_steps, device=self.device)[:, None] < self.lengths.to(self.device)
            mask = torch.where(collected, mask, torch.zeros_like(mask))
        return mask

    def buffers(self) -> list[torch.Tensor]:
        """Every tensor this storage allocated (the policy's memory at the rollout start included)."""
        return [*self.obs.values(), self.episode_start, self.actions, self.logp, self.values, self.rewards,
                self.dones, self.idle, *self.memory0.values()]

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.buffers())

    def begin(self, obs: dict[str, torch.Tensor], episode_start: torch.Tensor, memory: Memory,
              segments: bool = False) -> None:
        """The observation, episode-start flags and policy memory the rollout starts from; `segments`: envs store
        their steps with `insert_envs`, each at the end of its own segment (all empty now)."""
        for k, v in obs.items():
            self.obs[k][0].copy_(v)
        self.episode_start[0].copy_(episode_start)
        mem.copy_into(self.memory0, memory)
        # every step counts until an insert marks it idle (grouped episodes): reset once here, so the common insert
        # writes nothing of it
        self.idle.zero_()
        self.step = 0
        self.lengths = torch.zeros(self.num_envs, dtype=torch.long) if segments else None

    def insert(self, action: torch.Tensor, logp: torch.Tensor, value: torch.Tensor, reward: torch.Tensor,
               done: torch.Tensor, next_obs: dict[str, torch.Tensor], next_start: torch.Tensor | None = None,
               idle: torch.Tensor | None = None) -> None:
        """One step; `next_start` (default: `done`) flags next_obs as an episode's first observation."""
        t = self.step
        if idle is not None:  # grouped episodes (None, the common case: every step counts, as begin left it)
            self.idle[t].copy_(idle)
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
            raise RuntimeError("insert_envs into a rollout begun without segments (begin(..., segments=True))")
        t = self.lengths[envs]
        if int(t.max()) >= self.num_steps:
            raise ValueError(f"env segment longer than the storage's capacity of {self.num_steps} steps")
        t_dev, e_dev = (t.to(self.device), envs.to(self.device)) if at is None else at
        self.idle[t_dev, e_dev] = 0.0
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

    def rollout(self, bootstrap: torch.Tensor, env_weight: torch.Tensor | None = None,
                rank_weight: float = 1.0) -> Rollout:
        """The steps collected since `begin`, as the value every later phase reads (views of these buffers, which
        the collector writes again only at its next `begin`); `bootstrap` (N,): V(the observation after each
        env's last step)."""
        L = self.step
        return Rollout(obs={k: v[:L] for k, v in self.obs.items()}, episode_start=self.episode_start[:L],
                       memory=self.memory0, actions=self.actions[:L], logp=self.logp[:L], values=self.values[:L],
                       rewards=self.rewards[:L], dones=self.dones[:L], idle=self.idle[:L], valid=self.valid[:L],
                       bootstrap=bootstrap, lengths=None if self.lengths is None else self.lengths.clone(),
                       env_weight=env_weight, rank_weight=rank_weight)
