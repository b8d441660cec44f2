"""The advantage estimator, decided once from `ppo.advantage`: GAE bootstraps from the critic, GRPO normalises
episode returns within groups of envs that share each episode (no critic).

Each is the saved-state owner of what it carries from one rollout to the next (namespace "advantage"): nothing
for GAE, GRPO's partial returns and finished flags of the episodes still running.
"""

from __future__ import annotations

import torch

from ddppo.config import PPOConfig
from ddppo.advantage.grpo import grpo_advantages
from ddppo.rollout.storage import RolloutStorage


class GAE:
    """Generalised advantage estimation with the critic's bootstrap at each env's last valid step."""

    def __init__(self, ppo: PPOConfig):
        self.gamma, self.lam = ppo.gamma, ppo.gae_lambda

    def compute(self, storage: RolloutStorage, bootstrap_value) -> None:
        storage.compute_returns(bootstrap_value(), self.gamma, self.lam)

    def state_dict(self) -> None:
        return None

    def load_state_dict(self, state) -> None:
        """Nothing is carried (a GRPO carry in an older file is ignored)."""


class GRPO:
    """Group-relative advantages over whole episodes; episodes running at the rollout's end carry over."""

    def __init__(self, ppo: PPOConfig, num_envs: int):
        self.group_size = ppo.group_size
        self.carry = torch.zeros(2, num_envs)  # partial returns and finished flags

    def compute(self, storage: RolloutStorage, bootstrap_value) -> None:
        L = storage.step
        adv, mask, self.carry = grpo_advantages(storage.rewards[:L].cpu(), storage.dones[:L].cpu(),
                                                storage.idle[:L].cpu(), self.carry, self.group_size)
        storage.set_advantages(adv, mask)

    def state_dict(self) -> torch.Tensor:
        return self.carry.clone()

    def load_state_dict(self, state) -> None:
        self.carry = torch.as_tensor(state).float().cpu()


def advantage_for(ppo: PPOConfig, num_envs: int) -> GAE | GRPO:
    """The estimator `ppo.advantage` names."""
    return GRPO(ppo, num_envs) if not ppo.critic else GAE(ppo)
