"""Generalised advantage estimation (Schulman et al. 2016) as a pure function."""

from __future__ import annotations

import torch


def gae(rewards: torch.Tensor, values: torch.Tensor, dones: torch.Tensor, gamma: float,
        lam: float, lengths: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Advantages and returns for a (T, N) rollout.

    rewards[t], dones[t]: reward and episode end after the action at step t.
    values: (T + 1, N); values[T] bootstraps the step after the last one.
    A done step does not bootstrap (a truncated step's reward already holds
    gamma * V(final observation), added at collection time).
    lengths: (N,) steps env n collected (variable-length segments, <= T): only its
    first lengths[n] steps count, values[lengths[n], n] bootstraps them, and later
    steps get advantage 0 and return 0. None: every env collected T steps.

    The steps past an env's length hold an older rollout's data, which may be NaN (a NaN
    reward): they are selected away (torch.where), never multiplied by a zero mask
    (NaN * 0 is NaN, and would flow back into every valid step of the segment).
    """
    T = rewards.shape[0]
    advantages = torch.zeros_like(rewards)
    last = torch.zeros_like(rewards[0])
    not_done = 1.0 - dones.to(rewards.dtype)
    if lengths is not None:
        lengths = lengths.to(rewards.device)
    for t in reversed(range(T)):
        delta = rewards[t] + gamma * values[t + 1] * not_done[t] - values[t]
        last = delta + gamma * lam * not_done[t] * last
        if lengths is not None:
            last = torch.where(t < lengths, last, torch.zeros_like(last))
        advantages[t] = last
    returns = advantages + values[:T]
    if lengths is not None:
        collected = torch.arange(T, device=rewards.device)[:, None] < lengths
        returns = torch.where(collected, returns, torch.zeros_like(returns))
    return advantages, returns
