"""Variable mode's sample weighting (rollout.variable_weighting, ppo/update.py), through the real
`RolloutStorage.minibatches`, `ppo_loss`/`masked_mean`, gradient reducer and update loop.

Each env's share of one epoch's gradient weight: habitat-baselines' VER cuts shuffled steps into equal-size
minibatches, so over an epoch every valid sample counts alike, times its importance weight w_n: env n's share
is w_n * L_n / sum_k(w_k * L_k). ddppo's minibatches are split by env (recurrent sequences stay whole), so they
hold different numbers of samples; `per_sample` scales each minibatch's gradient so the shares are VER's
whatever the split, `per_minibatch` (each minibatch a mean over its own samples) gives issue 33's other shares.
"""

from __future__ import annotations

import pytest
import torch

from ddppo.config import PPOConfig
from ddppo.advantage import estimator_for
from ddppo.ppo.update import PPOUpdater
from ddppo.rollout.variable import importance_weights
from testutil import env_value_probe, epoch_gradients, gloo_context, variable_rollout

T = 8  # rollout.num_steps: each rank collects 4 x 8 = 32 steps, spread over its envs as they come back
# issue 33's examples: (segment lengths, ppo.num_mini_batch)
EXAMPLES = [([16, 3, 1, 12], 2), ([4, 8, 10, 10], 4)]


def _ppo(num_mini_batch: int, epochs: int = 3) -> PPOConfig:
    return PPOConfig(epochs=epochs, num_mini_batch=num_mini_batch, normalize_advantage=False,
                     clip_value_loss=False, value_coef=1.0, entropy_coef=0.0, max_grad_norm=0.0)


def _gradients(lengths: list[int], num_mini_batch: int, weighting: str, seed: int) -> torch.Tensor:
    ctx = gloo_context()
    try:
        ppo = _ppo(num_mini_batch)
        updater = PPOUpdater(env_value_probe(len(lengths)), ppo, ctx, sample_weighting=weighting,
                             advantage=estimator_for(ppo, len(lengths)))
        return epoch_gradients(updater, variable_rollout(lengths, T), seed)
    finally:
        ctx.close()


def _ver(lengths: list[int]) -> torch.Tensor:
    """VER's per-env weight summed over an epoch's samples, before the 1 / (N / M) of its minibatch means."""
    L = torch.tensor(lengths)
    return importance_weights(L, T).double() * L


@pytest.mark.parametrize("lengths,num_mini_batch", EXAMPLES)
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_per_sample_gives_every_valid_sample_vers_weight_over_an_epoch(lengths, num_mini_batch, seed):
    grads = _gradients(lengths, num_mini_batch, "per_sample", seed)
    # each epoch: env n's gradient is w_n * L_n / (N / M), whichever envs shared its minibatches
    expected = _ver(lengths) * num_mini_batch / sum(lengths)
    for epoch in grads:
        assert epoch.double().tolist() == pytest.approx(expected.tolist(), rel=1e-5)
    shares = grads[0] / grads[0].sum()
    assert shares.tolist() == pytest.approx((_ver(lengths) / _ver(lengths).sum()).tolist(), rel=1e-5)


def test_issue_33_shares():
    """The figures of issue 33: VER's shares, and what per-minibatch normalisation gave instead."""
    shares = {w: [_gradients(*EXAMPLES[1], w, seed)[0] for seed in range(3)] for w in ("per_sample", "per_minibatch")}
    for s in shares["per_sample"]:
        assert (s / s.sum()).tolist() == pytest.approx([0.141, 0.282, 0.289, 0.289], abs=1e-3)
    for s in shares["per_minibatch"]:  # one env per minibatch: each env weighs w_n, the slow env the most
        assert (s / s.sum()).tolist() == pytest.approx([0.275, 0.275, 0.225, 0.225], abs=1e-3)
    s = _gradients(*EXAMPLES[0], "per_sample", 0)[0]
    assert (s / s.sum()).tolist() == pytest.approx([0.408, 0.144, 0.048, 0.400], abs=1e-3)


def test_per_minibatch_weights_depend_on_the_split():
    lengths, m = EXAMPLES[0]
    ver = _ver(lengths) / _ver(lengths).sum()
    for seed in range(4):
        g = _gradients(lengths, m, "per_minibatch", seed)[0].double()
        assert (g / g.sum() - ver).abs().max() > 0.02


def test_equal_minibatches_weigh_alike_either_way():
    """Equal segment lengths (fixed mode's shape): the per-sample factor is exactly 1."""
    a, b = (_gradients([8, 8, 8, 8], 2, w, 0) for w in ("per_minibatch", "per_sample"))
    assert torch.allclose(a, b, rtol=1e-6)


def test_an_unknown_weighting_is_refused():
    ctx = gloo_context()
    try:
        with pytest.raises(ValueError, match="sample_weighting='ver'"):
            PPOUpdater(env_value_probe(2), _ppo(1), ctx, sample_weighting="ver", advantage=estimator_for(_ppo(1), 2))
    finally:
        ctx.close()
