"""VER's sample weighting across ranks (rollout.variable_weighting=per_sample, ppo/update.py).

Two real gloo ranks hold variable-mode segments of different lengths (issue 33's two examples, one per rank)
and run `PPOUpdater.update` on a probe policy with one parameter per (rank, env), so the applied gradient on
each parameter is that env's summed sample weight. With per_sample every valid sample of both ranks counts
alike over an epoch, times its importance weight: env (r, n) gets w_rn * L_rn / (N / M), N the valid samples
of both ranks; both ranks apply the same gradients and take the same steps. per_minibatch does not.
"""

from __future__ import annotations

import pytest
import torch
from dist_harness import spawn_ranks

NUM_ENVS, T, M = 4, 8, 2
LENGTHS = {0: [16, 3, 1, 12], 1: [4, 8, 10, 10]}


def weighting_worker(rank: int, world: int, port: int, weighting: str) -> list:
    from ddppo.config import PPOConfig
    from ddppo.advantage import estimator_for
    from ddppo.ppo.update import PPOUpdater
    from testutil import env_value_probe, epoch_gradients, gloo_context, variable_rollout

    ctx = gloo_context(rank, world, port)
    try:
        ppo = PPOConfig(epochs=2, num_mini_batch=M, normalize_advantage=False, clip_value_loss=False,
                        value_coef=1.0, entropy_coef=0.0, max_grad_norm=0.0)
        updater = PPOUpdater(env_value_probe(world * NUM_ENVS), ppo, ctx, sample_weighting=weighting,
                             advantage=estimator_for(ppo, NUM_ENVS))
        storage = variable_rollout(LENGTHS[rank], T, first_env=rank * NUM_ENVS)
        return epoch_gradients(updater, storage, seed=rank).tolist()
    finally:
        ctx.close()


def _ver_weights() -> torch.Tensor:
    from ddppo.rollout.variable import importance_weights

    lengths = [torch.tensor(LENGTHS[r]) for r in (0, 1)]
    return torch.cat([importance_weights(L, T).double() * L for L in lengths])


@pytest.mark.timeout(180)
def test_per_sample_weighs_every_valid_sample_of_every_rank_alike():
    ranks = spawn_ranks(weighting_worker, 2, "per_sample")
    assert ranks[0] == ranks[1]  # the same applied gradients on both ranks
    total = sum(sum(v) for v in LENGTHS.values())
    expected = (_ver_weights() * M / total).tolist()
    for epoch in ranks[0]:
        assert epoch == pytest.approx(expected, rel=1e-5)


@pytest.mark.timeout(180)
def test_per_minibatch_weighs_samples_by_their_minibatch():
    ranks = spawn_ranks(weighting_worker, 2, "per_minibatch")
    assert ranks[0] == ranks[1]
    g = torch.tensor(ranks[0][0], dtype=torch.float64)
    ver = _ver_weights()
    assert (g / g.sum() - ver / ver.sum()).abs().max() > 0.02
