"""One rollout as a value (the minibatches the PPO update cuts from it are ppo/batches.py's).

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
from typing import Any

import torch

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
