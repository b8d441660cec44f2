"""Normalisation while training: built once from the config and the envs' spaces (`build_normalization`), handed
to the policy, the acting path and the scoring stage at construction, and kept identical on every rank.

What goes where (nothing is patched in afterwards):
- `obs` (an ObsNormalizer, or None) is the policy's module: its statistics are saved with the weights;
  `policy_normalizes` says whether the training policy applies it (not with normalize.update=step, where the
  collector hands it observations already normalised);
- `obs_transform` (normalize.update=step: a LiveObsNormalizer) goes on the collector's acting path, where every
  observation leaves the envs; `rewards` (a RewardScaler) to the scoring stage (ddppo/rollout/scoring.py), which
  scales every stored step's reward, in the order stored, before advantages.

Once per update, after the end-of-rollout sync, every rank sends its rollout's batch moments (count, mean, M2: of
each normalised observation key over its valid steps, and of the discounted returns the reward scaler saw) in one
all-gather through DistContext (`sync`); every rank merges the rows in rank order with the parallel-variance
formula, so the statistics come out bit-identical everywhere without drifting per rank:

- the return statistics are merged at once: they scale the next rollout's rewards (normalization/rewards.py);
- the observation statistics are merged after the PPO update (`apply`): the rollout was acted on, and the update
  learns on it, under the same normalisation, so the first epoch's importance ratios start at exactly 1.

With normalize.update=step the batches are what the acting path counted step by step (normalization/live.py, the
reward scaler's live scale): every observation the envs returned, rather than the stored ones.

Nothing is sent when both are off (the same on every rank: resolved from the config and the spaces).
"""

from __future__ import annotations

from typing import Any

import gymnasium
import torch

from ddppo.config import Config
from ddppo.errors import ConfigError
from ddppo.distributed import DistContext
from ddppo.normalization.live import LiveObsNormalizer
from ddppo.normalization.moments import batch_moments, merge_moments
from ddppo.normalization.observations import ObsNormalizer, observation_normalizer
from ddppo.normalization.rewards import RewardScaler
from ddppo.normalization.spaces import resolve

Moments = tuple  # (count: float, mean: Tensor, M2: Tensor)


class Normalization:
    def __init__(self, obs: ObsNormalizer | None, rewards: RewardScaler | None, ctx: DistContext,
                 obs_transform: LiveObsNormalizer | None = None):
        self.obs, self.rewards, self.ctx = obs, rewards, ctx
        self.obs_transform = obs_transform  # normalize.update=step: the acting path counts the observations
        self.pending: dict[str, Moments] | None = None

    @property
    def enabled(self) -> bool:
        return self.obs is not None or self.rewards is not None

    @property
    def policy_normalizes(self) -> bool:
        """Whether the training policy applies `obs` itself (False: the acting path already did, step mode)."""
        return self.obs_transform is None

    # ------------------------------------------------------------ saved state
    def shared_owners(self) -> dict[str, Any]:
        """The saved-state owners every rank holds alike: the return statistics (namespace "reward_scale")."""
        return {"reward_scale": self.rewards.moments_owner()} if self.rewards is not None else {}

    def episode_owners(self) -> dict[str, Any]:
        """Each rank's own episode state: the per-env running returns (namespace "reward_returns")."""
        return {"reward_returns": self.rewards.returns_owner()} if self.rewards is not None else {}

    # ------------------------------------------------------------ rank merge
    def _local(self, obs: dict[str, torch.Tensor], mask: torch.Tensor) -> list[Moments]:
        """This rank's batch moments: one per normalised observation key, then the returns'."""
        out: list[Moments] = []
        if self.obs_transform is not None:
            out.extend((n, torch.from_numpy(mean), torch.from_numpy(m2))
                       for n, mean, m2 in self.obs_transform.take_batch())
        elif self.obs is not None:
            valid = mask.bool()
            for k in self.obs.keys:
                x = obs[k][valid]
                out.append(batch_moments(x.reshape(x.shape[0], -1).cpu()))
        if self.rewards is not None:
            n, mean, m2 = self.rewards.take_batch().tolist()
            out.append((n, torch.tensor([mean], dtype=torch.float64), torch.tensor([m2], dtype=torch.float64)))
        return out

    def sync(self, obs: dict[str, torch.Tensor], mask: torch.Tensor) -> None:
        """The collective (every rank, once per update, on a rollout's observations (L, N, ...) and the (L, N) mask
        of its samples that take part in the loss): merge all ranks' batches; the returns' take effect now, the
        observations' at `apply`."""
        if not self.enabled:
            return
        local = self._local(obs, mask)
        vec = torch.cat([torch.cat([torch.tensor([n], dtype=torch.float64), m.double(), s.double()])
                         for n, m, s in local])
        table = self.ctx.all_gather_stats(vec)  # (world, K), the same on every rank
        merged: list[Moments] = []
        offset = 0
        for n, m, _ in local:
            d = m.numel()
            rows = table[:, offset:offset + 1 + 2 * d]
            total: Moments = (0.0, torch.zeros(d, dtype=torch.float64), torch.zeros(d, dtype=torch.float64))
            for row in rows:  # rank order: the same arithmetic on every rank
                total = merge_moments(total, (float(row[0]), row[1:1 + d], row[1 + d:]))
            merged.append(total)
            offset += 1 + 2 * d
        if self.rewards is not None:
            n, mean, m2 = merged.pop()
            self.rewards.merge(n, float(mean[0]), float(m2[0]))
        if self.obs is not None:
            shapes = {k: self.obs.stats[k].mean.shape for k in self.obs.keys}
            self.pending = {k: (n, mean.view(shapes[k]), m2.view(shapes[k]))
                            for k, (n, mean, m2) in zip(self.obs.keys, merged)}

    def apply(self, hold: bool = False) -> None:
        """After the PPO update: the observation statistics merged at `sync` take effect (`hold`: they are
        dropped, the statistics kept as they are: ppo.critic_warmup_updates)."""
        if self.pending is None or hold:
            self.pending = None
            return
        for k, (n, mean, m2) in self.pending.items():
            self.obs.stats[k].merge(torch.tensor(n, dtype=torch.float64), mean, m2)
        self.pending = None


def build_normalization(cfg: Config, obs_space: gymnasium.spaces.Dict, action_space: gymnasium.spaces.Space,
                        num_envs: int, ctx: DistContext) -> Normalization:
    """normalize.obs / normalize.reward / normalize.update resolved on these spaces for a rank of `num_envs`
    envs; ConfigError naming the keys for what cannot run together (rollout.overlap_learning, which `auto`
    can reach only here, on the spaces)."""
    n = cfg.normalize
    step = n.update == "step"
    obs = observation_normalizer(n, cfg.policy, obs_space, action_space)
    rewards = None
    if resolve(n.reward, obs_space, action_space):
        rewards = RewardScaler(num_envs, cfg.ppo.gamma, n.clip_reward, n.epsilon, live=step)
    if step and obs is not None and cfg.ppo.critic_warmup_updates > 0:
        raise ConfigError(f"ppo.critic_warmup_updates={cfg.ppo.critic_warmup_updates} holds the observation "
                          f"statistics the actor sees, which normalize.update=step moves every step: set "
                          f"normalize.update=rollout, or normalize.obs=off")
    norm = Normalization(obs, rewards, ctx, LiveObsNormalizer(obs) if step and obs is not None else None)
    if norm.enabled and cfg.rollout.overlap_learning:
        raise ConfigError("rollout.overlap_learning=true cannot run with observation or reward normalisation "
                          "(normalize.obs / normalize.reward, on here for continuous control): set "
                          "normalize.obs=off normalize.reward=off, or rollout.overlap_learning=false")
    return norm
