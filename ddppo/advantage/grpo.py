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

from ddppo.advantage.estimator import Advantages, register_estimator
from ddppo.config import Config, PPOConfig
from ddppo.distributed import DistContext
from ddppo.envs.registry import grouped_episode_envs
from ddppo.rollout.rollout import Rollout


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


@register_estimator("grpo")
class GRPO:
    """Group-relative advantages over whole episodes; episodes running at the rollout's end carry over (the
    carry is this estimator's saved state). No critic: nothing bootstraps, returns stay 0, and the advantages
    are normalised within their group already."""

    critic = False

    @staticmethod
    def env_group_size(ppo: PPOConfig) -> int:
        """ppo.group_size envs share each episode."""
        return ppo.group_size

    @staticmethod
    def config_problems(cfg: Config) -> list[str]:
        """Groups of at least 4 that tile each rank's envs, and envs that run grouped episodes, in-process and in
        lockstep."""
        p = []
        if cfg.ppo.group_size < 4:
            p.append(f"ppo.group_size={cfg.ppo.group_size} must be >= 4 with ppo.advantage=grpo: the within-group "
                     f"mean and std of fewer returns are too noisy to be a baseline")
        elif cfg.env.num_envs % cfg.ppo.group_size:
            p.append(f"ppo.group_size={cfg.ppo.group_size} must divide env.num_envs={cfg.env.num_envs} "
                     f"(groups never span ranks)")
        grouped = grouped_episode_envs()
        if cfg.env.name not in grouped:
            p.append(f"ppo.advantage=grpo needs grouped episodes, which env.name={cfg.env.name!r} does not run: use "
                     f"env.name={' or '.join(grouped)}, or ppo.advantage=gae")
        if cfg.env.num_workers > 0:
            p.append(f"ppo.advantage=grpo needs in-process envs (a group's members step together; got "
                     f"env.num_workers={cfg.env.num_workers}): set env.num_workers=0")
        if cfg.rollout.mode == "variable":
            p.append("rollout.mode=variable cannot run ppo.advantage=grpo: grouped episodes step in lockstep; "
                     "use rollout.mode=fixed")
        return p

    def __init__(self, ppo: PPOConfig, num_envs: int):
        self.group_size = ppo.group_size
        self.carry = torch.zeros(2, num_envs)  # partial returns and finished flags

    def minibatch(self, adv: torch.Tensor, valid: torch.Tensor | None) -> torch.Tensor:
        """As they are: normalised within their group already."""
        return adv

    def compute(self, rollout: Rollout) -> Advantages:
        """Only the steps of finished groups take part in the loss (the mask)."""
        adv, mask, self.carry = grpo_advantages(rollout.rewards.cpu(), rollout.dones.cpu(), rollout.idle.cpu(),
                                                self.carry, self.group_size)
        device = rollout.rewards.device
        return Advantages(adv.to(device), torch.zeros_like(rollout.rewards), mask.to(device) * rollout.valid)

    def normalise(self, adv: Advantages, ctx: DistContext) -> Advantages:
        """As they are: normalised within each group, which never spans ranks."""
        return adv

    def state_dict(self) -> torch.Tensor:
        return self.carry.clone()

    def load_state_dict(self, state) -> None:
        self.carry = torch.as_tensor(state).float().cpu()
