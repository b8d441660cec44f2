"""Running mean and variance, and the parallel-variance merge (Chan et al.) that every part of normalisation uses.

`RunningMoments` keeps float64 buffers (mean, var, count) and merges batch moments (count, mean, M2) into them;
merging every rank's batch in rank order gives bit-identical statistics on every rank.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn


def merge_moments(a: tuple[float, float, float], b: tuple[float, float, float]) -> tuple[float, float, float]:
    """(count, mean, M2) of the union of two batches; M2 is the sum of squared deviations from the mean."""
    na, ma, m2a = a
    nb, mb, m2b = b
    n = na + nb
    if nb == 0:
        return a
    if na == 0:
        return b
    delta = mb - ma
    return n, ma + delta * nb / n, m2a + m2b + delta * delta * na * nb / n


def batch_moments(x: torch.Tensor) -> tuple[float, torch.Tensor, torch.Tensor]:
    """(count, mean, M2) over the first dimension of x (float64)."""
    x = x.double()
    n = x.shape[0]
    if n == 0:
        zeros = x.new_zeros(x.shape[1:])
        return 0.0, zeros, zeros
    mean = x.mean(0)
    return float(n), mean, ((x - mean) ** 2).sum(0)


class RunningMoments(nn.Module):
    """Mean and (population) variance of everything merged so far, per feature; float64 buffers."""

    def __init__(self, shape: tuple[int, ...]):
        super().__init__()
        self.register_buffer("mean", torch.zeros(shape, dtype=torch.float64))
        self.register_buffer("var", torch.ones(shape, dtype=torch.float64))
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))
        self.version = 0  # advanced whenever the statistics change (merge, load): users cache what they derive

    def _load_from_state_dict(self, *args: Any, **kwargs: Any) -> None:
        super()._load_from_state_dict(*args, **kwargs)
        self.version += 1

    @torch.no_grad()
    def merge(self, count: torch.Tensor, mean: torch.Tensor, m2: torch.Tensor) -> None:
        """Merge a batch given by its count, mean and sum of squared deviations (M2) per feature."""
        n0, n1 = float(self.count), float(count)
        if n1 <= 0:
            return
        mean, m2 = mean.to(self.mean), m2.to(self.mean)
        if n0 <= 0:
            self.mean.copy_(mean)
            self.var.copy_(m2 / n1)
        else:
            n = n0 + n1
            delta = mean - self.mean
            total_m2 = self.var * n0 + m2 + delta * delta * (n0 * n1 / n)
            self.mean.add_(delta * (n1 / n))
            self.var.copy_(total_m2 / n)
        self.count.fill_(n0 + n1)
        self.version += 1
