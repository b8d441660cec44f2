"""run.deterministic=true on CUDA: the recurrent core's sequence path must not call an op that raises under
torch.use_deterministic_algorithms on CUDA (a float torch.cumsum does). On CPU those ops do not raise, so the
CUDA rule is imposed here: a floating cumsum raises as it would on a GPU. The replacement gives the same
segments as the float cumsum did."""

from __future__ import annotations

import pytest
import torch

from ddppo.model.recurrent import RecurrentCore


@pytest.fixture
def cuda_deterministic_rules(monkeypatch):
    """torch.cumsum / Tensor.cumsum on a floating tensor raise, as on CUDA in deterministic mode."""
    real_fn, real_method = torch.cumsum, torch.Tensor.cumsum

    def check(t):
        if t.is_floating_point() or t.is_complex():
            raise RuntimeError("cumsum_cuda_kernel does not have a deterministic implementation")

    monkeypatch.setattr(torch, "cumsum", lambda t, *a, **k: (check(t), real_fn(t, *a, **k))[1])
    monkeypatch.setattr(torch.Tensor, "cumsum", lambda t, *a, **k: (check(t), real_method(t, *a, **k))[1])
    torch.use_deterministic_algorithms(True)
    yield
    torch.use_deterministic_algorithms(False)


def _starts(T: int, N: int, gen: torch.Generator) -> torch.Tensor:
    return (torch.rand(T, N, generator=gen) < 0.3).float()


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_sequence_path_runs_under_deterministic_rules_and_matches_stepping(cuda_deterministic_rules, kind):
    gen = torch.Generator().manual_seed(0)
    core = RecurrentCore(kind, 8, 2)
    T, N = 12, 5
    x = torch.randn(T, N, 8, generator=gen)
    h = torch.randn(core.state_layers, N, 8, generator=gen)
    start = _starts(T, N, gen)
    out, hn = core.run(x, h, start)
    step_h, outs = h, []
    for t in range(T):
        o, step_h = core.run(x[t:t + 1], step_h, start[t:t + 1])
        outs.append(o)
    torch.testing.assert_close(out, torch.cat(outs), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(hn, step_h, rtol=1e-5, atol=1e-5)


def test_integer_segments_equal_the_float_cumsum_ones():
    gen = torch.Generator().manual_seed(1)
    for T, N in [(1, 1), (7, 3), (64, 32), (3, 200)]:
        cut = _starts(T, N, gen).t().reshape(-1).clone()
        cut[::T] = 1.0
        assert torch.equal((cut != 0).to(torch.int64).cumsum(0) - 1, torch.cumsum(cut, 0).long() - 1)
