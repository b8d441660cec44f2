"""Advantages are normalised with statistics over every valid sample of every rank.

Two real gloo ranks hold rollouts of different lengths (8 and 3 valid steps of 4 environments, as after
preemption; some steps masked out of the loss) whose advantages have different means and scales. After
normalisation (what `PPOUpdater.update` does first, on every rank), each rank's advantages must be exactly those of normalising the union of all ranks'
valid samples (mean and population std over the union): a sample's advantage must not depend on which
rank it landed on, and ranks count by their number of valid samples.
"""

from __future__ import annotations

import pytest
import torch
from dist_harness import fill_random_rollout, spawn_ranks, tiny_learner

WORLD = 2
STEPS = (8, 3)
NUM_ENVS, T, OBS_DIM, ACTIONS = 4, 8, 5, 3
SHIFT_SCALE = ((4.0, 1.0), (-2.0, 5.0))  # each rank's advantages: N(shift, scale)


def rank_advantages(rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(advantages, loss mask) over rank `rank`'s collected steps (STEPS[rank], NUM_ENVS)."""
    g = torch.Generator().manual_seed(10 + rank)
    shift, scale = SHIFT_SCALE[rank]
    adv = shift + scale * torch.randn(STEPS[rank], NUM_ENVS, generator=g)
    mask = (torch.rand(STEPS[rank], NUM_ENVS, generator=g) > 0.25).float()
    return adv, mask


def normalise_worker(rank: int, world: int, port: int) -> list:
    from ddppo.config import PPOConfig
    from ddppo.advantage import Advantages
    from ddppo.timing import Timer

    ppo = PPOConfig(epochs=1, num_mini_batch=2, normalize_advantage=True)
    ctx, policy, updater, storage = tiny_learner(rank, world, port, ppo, NUM_ENVS, T, OBS_DIM, ACTIONS)
    try:
        rollout = fill_random_rollout(storage, policy, STEPS[rank], ACTIONS, torch.Generator().manual_seed(rank))
        adv, mask = rank_advantages(rank)
        handed = Advantages(adv.clone(), torch.zeros_like(adv), mask)
        normalised = updater.advantage.normalise(handed, ctx)  # what update does first, on every rank
        updater.update(rollout, handed, Timer())
        assert torch.equal(handed.advantages, adv)  # neither writes into what it was handed
        return normalised.advantages[mask > 0].tolist()
    finally:
        ctx.close()


@pytest.mark.timeout(180)
def test_two_ranks_with_different_sample_counts_get_the_union_normalisation():
    results = spawn_ranks(normalise_worker, WORLD)
    valid = [a[m > 0] for a, m in (rank_advantages(r) for r in range(WORLD))]
    union = torch.cat(valid).double()
    assert [len(v) for v in valid][0] != [len(v) for v in valid][1]
    expected = (union - union.mean()) / (union.std(unbiased=False) + 1e-8)
    got = torch.tensor(results[0] + results[1], dtype=torch.float64)
    torch.testing.assert_close(got, expected, rtol=0, atol=2e-6)
    # and the per-rank normalisation it replaces would differ by far more than that
    per_rank = torch.cat([(v - v.mean()) / v.std(unbiased=False) for v in (x.double() for x in valid)])
    assert float((per_rank - expected).abs().max()) > 0.5
