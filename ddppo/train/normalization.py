"""Observation and reward normalisation statistics, kept identical on every rank (the `normalize` section).

Once per update, after the end-of-rollout sync, every rank sends its rollout's batch moments (count, mean, M2:
of each normalised observation key over its valid steps, and of the discounted returns the reward scaler saw)
in one all-gather through DistContext; every rank merges the rows in rank order with the parallel-variance
formula, so the statistics come out bit-identical everywhere without drifting per rank:

- the return statistics are merged at once: they scale the next rollout's rewards (rollout/reward_scale.py);
- the observation statistics are merged after the PPO update (`apply`): the rollout was acted on, and the update
  learns on it, under the same normalisation, so the first epoch's importance ratios start at exactly 1.

With normalize.update=step the batches are what the acting path counted step by step (rollout/live_obs.py, the
reward scaler's live scale): every observation the envs returned, rather than the stored ones.

Nothing is sent when both are off (the same on every rank: resolved from the config and the spaces).
"""

from __future__ import annotations

import torch

from ddppo.distributed import DistContext
from ddppo.model.normalize import ObsNormalizer, batch_moments, merge_moments
from ddppo.rollout.live_obs import LiveObsNormalizer
from ddppo.rollout.reward_scale import RewardScaler
from ddppo.rollout.storage import RolloutStorage

Moments = tuple  # (count: float, mean: Tensor, M2: Tensor)


class Normalization:
    def __init__(self, obs_norm: ObsNormalizer | None, scaler: RewardScaler | None, ctx: DistContext,
                 live_obs: LiveObsNormalizer | None = None):
        self.obs_norm, self.scaler, self.ctx = obs_norm, scaler, ctx
        self.live_obs = live_obs  # normalize.update=step: the acting path counts the observations (live_obs.py)
        self.pending: dict[str, Moments] | None = None

    @property
    def enabled(self) -> bool:
        return self.obs_norm is not None or self.scaler is not None

    def _local(self, storage: RolloutStorage) -> list[Moments]:
        """This rank's batch moments: one per normalised observation key, then the returns'."""
        out: list[Moments] = []
        if self.live_obs is not None:
            out.extend((n, torch.from_numpy(mean), torch.from_numpy(m2)) for n, mean, m2 in self.live_obs.take_batch())
        elif self.obs_norm is not None:
            L = storage.step
            valid = storage.valid[:L].bool()
            for k in self.obs_norm.keys:
                x = storage.obs[k][:L][valid]
                out.append(batch_moments(x.reshape(x.shape[0], -1).cpu()))
        if self.scaler is not None:
            n, mean, m2 = self.scaler.take_batch().tolist()
            out.append((n, torch.tensor([mean], dtype=torch.float64), torch.tensor([m2], dtype=torch.float64)))
        return out

    def sync(self, storage: RolloutStorage) -> None:
        """The collective (every rank, once per update): merge all ranks' batches; the returns' take effect now,
        the observations' at `apply`."""
        if not self.enabled:
            return
        local = self._local(storage)
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
        if self.scaler is not None:
            n, mean, m2 = merged.pop()
            self.scaler.merge(n, float(mean[0]), float(m2[0]))
        if self.obs_norm is not None:
            shapes = {k: self.obs_norm.stats[k].mean.shape for k in self.obs_norm.keys}
            self.pending = {k: (n, mean.view(shapes[k]), m2.view(shapes[k]))
                            for k, (n, mean, m2) in zip(self.obs_norm.keys, merged)}

    def apply(self) -> None:
        """After the PPO update: the observation statistics merged at `sync` take effect."""
        if self.pending is None:
            return
        for k, (n, mean, m2) in self.pending.items():
            self.obs_norm.stats[k].merge(torch.tensor(n, dtype=torch.float64), mean, m2)
        self.pending = None
