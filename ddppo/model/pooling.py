"""Adaptive average pooling that also runs under `torch.use_deterministic_algorithms` on CUDA.

`nn.AdaptiveAvgPool2d`'s CUDA backward has no deterministic kernel, so `run.deterministic=true` with an image
observation through the small CNN raised at the first PPO update. On CUDA in deterministic mode the same
pooling is computed as two matrix products with fixed averaging matrices (output bin i of n over a size-L axis
averages [floor(i L / n), ceil((i + 1) L / n)), as adaptive pooling does); their backward is deterministic.
Everywhere else the native op runs, so CPU results are unchanged.
"""

from __future__ import annotations

import torch
from torch import nn


def averaging_matrix(size: int, bins: int) -> torch.Tensor:
    """(bins, size): row i averages the input positions adaptive pooling assigns to output bin i."""
    m = torch.zeros(bins, size)
    for i in range(bins):
        start, end = (i * size) // bins, -((-(i + 1) * size) // bins)
        m[i, start:end] = 1.0 / (end - start)
    return m


class AdaptiveAvgPool(nn.Module):
    """`nn.AdaptiveAvgPool2d(output_size)` with a deterministic CUDA path; no parameters, no saved state.

    The averaging matrices are made once per input size, device and dtype and kept on the device (a plain
    cache, not buffers: nothing enters the state dict), not rebuilt on the CPU and copied from pageable memory on
    every forward, acting steps included."""

    def __init__(self, output_size: tuple[int, int]):
        super().__init__()
        self.output_size = tuple(output_size)
        self.native = nn.AdaptiveAvgPool2d(self.output_size)
        self._matrices: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not (x.is_cuda and torch.are_deterministic_algorithms_enabled()):
            return self.native(x)
        return self.by_matrices(x)

    def matrices(self, height: int, width: int, device: torch.device, dtype: torch.dtype) -> tuple[torch.Tensor,
                                                                                                 torch.Tensor]:
        """(rows, transposed cols) averaging matrices for a (height, width) input, cached on `device`."""
        key = (height, width, device, dtype)
        found = self._matrices.get(key)
        if found is None:
            rows = averaging_matrix(height, self.output_size[0]).to(device, dtype)
            cols_t = averaging_matrix(width, self.output_size[1]).T.contiguous().to(device, dtype)
            found = self._matrices[key] = (rows, cols_t)
        return found

    def by_matrices(self, x: torch.Tensor) -> torch.Tensor:
        rows, cols_t = self.matrices(x.shape[-2], x.shape[-1], x.device, x.dtype)
        return rows @ x @ cols_t
