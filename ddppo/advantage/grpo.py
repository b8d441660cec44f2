"""Critic-free GRPO advantages: each episode's return normalised within its group of shared episodes.

Environments run in groups of `group_size` that start the same episode together
(ddppo.envs.base.StepResult.idle/started). When every member of a group has finished
the shared episode, each member's return R_i becomes the advantage of every
step of its episode: A_i = (R_i - mean(R)) / (std(R) + eps) (population std).

Partial episodes: an episode still running when the rollout ends (preempted or
not) carries its partial return and "finished" flag into the next rollout, so
its return is exact; the steps it took in the earlier rollout were masked out
(their advantage was unknown then), and the steps in the rollout where its group
completes are trained on. Idle steps (a finished member waiting for its group)
are always masked.
"""

from __future__ import annotations

import torch


def grpo_advantages(rewards: torch.Tensor, dones: torch.Tensor, idle: torch.Tensor, carry: torch.Tensor,
                    group_size: int, eps: float = 1e-8) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """rewards, dones, idle: (L, N); carry: (2, N) = (partial return, finished flag) at rollout start.

    Returns advantages (L, N), loss mask (L, N) and the carry for the next rollout.
    """
    L, N = rewards.shape
    g = group_size
    adv = torch.zeros(L, N, dtype=torch.float32)
    mask = torch.zeros(L, N, dtype=torch.float32)
    ret = carry[0].clone().double()
    ended = carry[1].clone().bool()
    seg_start = torch.zeros(N // g, dtype=torch.long)  # first step of each group's current episode in this rollout
    active = ~idle.bool()
    for t in range(L):
        ret += torch.where(active[t], rewards[t].double(), torch.zeros((), dtype=torch.float64))  # idle: no-op
        ended |= dones[t].bool() & active[t]
        complete = torch.nonzero(ended.view(-1, g).all(1), as_tuple=False).flatten()
        for c in complete.tolist():
            members = slice(c * g, (c + 1) * g)
            r = ret[members]
            a = ((r - r.mean()) / (r.std(unbiased=False) + eps)).float()
            s = int(seg_start[c])
            steps = active[s: t + 1, members].float()
            adv[s: t + 1, members] = a.unsqueeze(0) * steps
            mask[s: t + 1, members] = steps
            ret[members] = 0.0
            ended[members] = False
            seg_start[c] = t + 1
    return adv, mask, torch.stack([ret.float(), ended.float()])
