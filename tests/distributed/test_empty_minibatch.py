"""No optimiser step on a minibatch without valid samples on any rank.

Two real gloo ranks run `PPOUpdater.update` (1 epoch x 1 minibatch) three times on the same policy:
  1. both ranks have samples: a normal step (it gives Adam some momentum);
  2. no rank has a valid sample (GRPO with no finished group, an empty preempted rollout): the gradient is
     zero, and an Adam step would still move every weight by its stale momentum and advance the step
     count; parameters and the whole Adam state must stay exactly as they were;
  3. only rank 1 has samples: the global count is positive, so BOTH ranks step, and stay identical.
The decision comes from the all-reduced sample count, which is the same on every rank.
"""

from __future__ import annotations

import pytest
import torch
from dist_harness import digest, fill_random_rollout, spawn_ranks, tiny_learner

NUM_ENVS, T, OBS_DIM, ACTIONS = 4, 6, 5, 3


def _snapshot(policy, optimizer) -> dict:
    state = {f"param/{k}": v for k, v in policy.named_parameters()}
    for i, s in optimizer.state_dict()["state"].items():
        state.update({f"adam/{i}/{k}": torch.as_tensor(v) for k, v in s.items()})
    return {"digest": digest(state), "steps": sorted({float(s["step"]) for s in optimizer.state.values()})}


def empty_worker(rank: int, world: int, port: int) -> list:
    from ddppo.config import PPOConfig
    from ddppo.advantage import Advantages
    from ddppo.timing import Timer

    ctx, policy, updater, storage = tiny_learner(rank, world, port, PPOConfig(epochs=1, num_mini_batch=1, lr=1e-2),
                                                 NUM_ENVS, T, OBS_DIM, ACTIONS)
    try:
        g = torch.Generator().manual_seed(rank)
        out = []
        for phase, has_samples in enumerate([True, False, rank == 1]):
            rollout = fill_random_rollout(storage, policy, T, ACTIONS, g)
            adv = Advantages(torch.randn(T, NUM_ENVS, generator=g), torch.randn(T, NUM_ENVS, generator=g),
                             torch.full((T, NUM_ENVS), 1.0 if has_samples else 0.0))
            result = updater.update(rollout, adv, Timer())
            out.append({**_snapshot(policy, updater.optimizer), "skipped": result.skipped_steps})
        return out
    finally:
        ctx.close()


@pytest.mark.timeout(180)
def test_no_adam_step_on_a_globally_empty_minibatch_but_a_step_on_every_rank_otherwise():
    ranks = spawn_ranks(empty_worker, 2)
    for phases in ranks:
        normal, empty, one_sided = phases
        assert normal["steps"] == [1.0]
        assert empty["digest"] == normal["digest"], "an empty minibatch moved the parameters or the Adam state"
        assert empty["steps"] == [1.0]
        assert one_sided["digest"] != empty["digest"] and one_sided["steps"] == [2.0]
        assert [p["skipped"] for p in phases] == [0, 0, 0]  # an empty minibatch is not a non-finite skip
    assert ranks[0][2]["digest"] == ranks[1][2]["digest"]  # both ranks stepped alike
