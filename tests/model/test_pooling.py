"""The deterministic CUDA path of the CNN's adaptive pooling equals nn.AdaptiveAvgPool2d (run on CPU), and is
the one chosen where deterministic algorithms are on and the input is on CUDA."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from ddppo.model.pooling import AdaptiveAvgPool


@pytest.mark.parametrize("h, w, out", [(8, 8, (4, 4)), (7, 5, (4, 4)), (16, 9, (4, 4)), (3, 2, (3, 2)),
                                       (13, 17, (4, 3))])
def test_matrix_pooling_equals_adaptive_pooling(h, w, out):
    x = torch.randn(3, 6, h, w, requires_grad=True)
    native = nn.AdaptiveAvgPool2d(out)(x)
    ours = AdaptiveAvgPool(out).by_matrices(x)
    torch.testing.assert_close(ours, native, rtol=1e-5, atol=1e-6)
    g = torch.randn_like(native)
    (grad_native,) = torch.autograd.grad(native, x, g)
    (grad_ours,) = torch.autograd.grad(ours, x, g)
    torch.testing.assert_close(grad_ours, grad_native, rtol=1e-5, atol=1e-6)


def test_the_matrix_path_is_taken_only_for_deterministic_cuda(monkeypatch):
    pool, x = AdaptiveAvgPool((4, 4)), torch.randn(2, 3, 7, 7)
    calls = []
    monkeypatch.setattr(pool, "by_matrices", lambda t: calls.append(t) or t)
    pool(x)
    assert calls == []  # CPU: the native op, results unchanged
    monkeypatch.setattr(torch.Tensor, "is_cuda", property(lambda self: True))
    pool(x)
    assert calls == []  # CUDA, not deterministic: native
    monkeypatch.setattr(torch, "are_deterministic_algorithms_enabled", lambda: True)
    pool(x)
    assert len(calls) == 1


def test_the_averaging_matrices_are_made_once_per_size_and_kept_on_the_device(monkeypatch):
    """Not built on the CPU and copied on every forward (acting steps included): one build per input size,
    device and dtype; never in the state dict (checkpoints are unchanged)."""
    from ddppo.model import pooling

    built = []
    real = pooling.averaging_matrix
    monkeypatch.setattr(pooling, "averaging_matrix", lambda size, bins: built.append((size, bins)) or real(size, bins))
    pool = AdaptiveAvgPool((4, 3))
    x = torch.randn(2, 3, 13, 17)
    first = pool.by_matrices(x)
    for _ in range(3):
        torch.testing.assert_close(pool.by_matrices(x), first)
    assert built == [(13, 4), (17, 3)]
    rows, cols_t = pool.matrices(13, 17, x.device, x.dtype)
    assert rows.device == x.device and rows.dtype == x.dtype and cols_t.shape == (17, 3)
    pool.by_matrices(x.double())  # another dtype (or device, or size): its own pair
    assert len(built) == 4 and list(pool.state_dict()) == []
