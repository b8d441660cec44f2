"""Generalised advantage estimation (Schulman et al. 2016): the pure function, the estimator that returns it for a
rollout, and the advantage normalisation over every rank.

Advantage normalisation (ppo.normalize_advantage, GAE; ppo.normalize_advantage_per=update): mean and population
std over every valid sample of every rank, from one all-reduce of (sum, sum of squares, count) before the epochs, so a sample's advantage does not
depend on which rank collected it and ranks count by their number of valid samples. (GRPO advantages are already
normalised within their group, and a group never spans ranks, so they are rank-independent as they are.)
"""

from __future__ import annotations

import math
import numpy as np
import torch

from ddppo.advantage.estimator import Advantages, register_estimator
from ddppo.config import Config, PPOConfig
from ddppo.distributed import DistContext
from ddppo.rollout.rollout import Rollout


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
    not_done = 1.0 - dones.to(rewards.dtype)
    # every step's TD error and decay at once; only the recursion runs step by step, on the host in numpy: a few
    # microseconds a step, where torch ops cost a dozen calls (on a GPU, kernels) a step (the same float32
    # arithmetic in the same order, so the same numbers)
    delta = (rewards + gamma * values[1:T + 1] * not_done - values[:T]).cpu().numpy()
    decay = (gamma * lam * not_done).cpu().numpy()
    out = np.zeros_like(delta)
    last = np.zeros(delta.shape[1:], delta.dtype)
    zero = np.zeros((), delta.dtype)
    collected = None if lengths is None else lengths.cpu().numpy()
    with np.errstate(all="ignore"):  # past an env's length anything goes (selected away below)
        for t in reversed(range(T)):
            last = delta[t] + decay[t] * last
            if collected is not None:
                last = np.where(t < collected, last, zero)
            out[t] = last
    advantages = torch.from_numpy(out).to(rewards.device)
    returns = advantages + values[:T]
    if lengths is not None:
        mask = torch.arange(T, device=rewards.device)[:, None] < lengths.to(rewards.device)
        returns = torch.where(mask, returns, torch.zeros_like(returns))
    return advantages, returns


def rollout_gae(rollout: Rollout, gamma: float, lam: float) -> Advantages:
    """GAE over a rollout's collected steps, each env bootstrapping from `rollout.bootstrap` after its last step
    (in variable mode its own); advantages and returns are 0 past each env's steps. New tensors."""
    L, N = rollout.steps, rollout.num_envs
    values = torch.cat([rollout.values, rollout.bootstrap.reshape(1, N).to(rollout.values.dtype)])
    if rollout.lengths is not None:  # each env bootstraps from the value after its own last step
        values[rollout.lengths.to(values.device), torch.arange(N, device=values.device)] = rollout.bootstrap
    adv, ret = gae(rollout.rewards, values, rollout.dones, gamma, lam, rollout.lengths)
    return Advantages(adv, ret, rollout.valid)


def normalize_advantages(adv: torch.Tensor, valid: torch.Tensor, ctx: DistContext) -> torch.Tensor:
    """(adv - mean) / (std + 1e-8), mean and population std over the valid samples of all ranks (a new tensor).

    Every rank calls this once per update, whatever it collected (a rank with no samples sends zeros);
    the statistics are exact: sums in float64, ranks weighted by their valid sample counts.
    """
    m = valid.double()
    a = torch.where(valid > 0, adv.double(), torch.zeros_like(m))  # selected, not multiplied: padding may be NaN
    local = torch.stack([a.sum(), (a * a).sum(), m.sum()])
    total, total_sq, count = ctx.all_reduce_sums(local, "advantage statistics all-reduce").tolist()
    if count <= 0:
        return adv
    mean = total / count
    std = math.sqrt(max(total_sq / count - mean * mean, 0.0))
    return (adv - mean) / (std + 1e-8)


def minibatch_normalized(adv: torch.Tensor, valid: torch.Tensor | None) -> torch.Tensor:
    """(adv - mean) / (std + 1e-8) over this minibatch's valid samples on this rank (ppo.normalize_advantage_per=
    minibatch, as SB3 and CleanRL; sample std, as torch's and numpy's defaults there differ: SB3 uses torch's).
    No collective: each rank's minibatch is standardised on its own. `valid` None: every sample is valid."""
    if valid is None:
        return adv if adv.numel() < 2 else (adv - adv.mean()) / (adv.std() + 1e-8)
    mask = valid > 0
    n = int(mask.sum())
    if n < 2:
        return adv
    picked = adv[mask]
    return torch.where(mask, (adv - picked.mean()) / (picked.std() + 1e-8), adv)


@register_estimator("gae")
class GAE:
    """Generalised advantage estimation with the critic's bootstrap at each env's last valid step; advantages
    normalised over every rank when ppo.normalize_advantage. Carries nothing from one rollout to the next."""

    critic = True

    @staticmethod
    def env_group_size(ppo: PPOConfig) -> int:
        return 1

    @staticmethod
    def config_problems(cfg: Config) -> list[str]:
        return []

    def __init__(self, ppo: PPOConfig, num_envs: int):
        self.gamma, self.lam = ppo.gamma, ppo.gae_lambda
        # over the whole rollout of every rank; per minibatch (normalize_advantage_per=minibatch) the update does it
        self.normalize = ppo.normalize_advantage and ppo.normalize_advantage_per == "update"
        self.per_minibatch = ppo.normalize_advantage and ppo.normalize_advantage_per == "minibatch"

    def compute(self, rollout: Rollout) -> Advantages:
        return rollout_gae(rollout, self.gamma, self.lam)

    def normalise(self, adv: Advantages, ctx: DistContext) -> Advantages:
        if not self.normalize:  # config-driven: the same on every rank
            return adv
        return adv._replace(advantages=normalize_advantages(adv.advantages, adv.mask, ctx))

    def minibatch(self, adv: torch.Tensor, valid: torch.Tensor | None) -> torch.Tensor:
        """One minibatch's advantages as the PPO loss takes them: standardised on this rank with
        ppo.normalize_advantage_per=minibatch (`minibatch_normalized`), else as they are."""
        return minibatch_normalized(adv, valid) if self.per_minibatch else adv

    def state_dict(self) -> None:
        return None

    def load_state_dict(self, state) -> None:
        """Nothing is carried (a GRPO carry in an older file is ignored)."""
