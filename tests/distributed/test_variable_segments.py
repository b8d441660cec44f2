"""Variable-length per-env segments (rollout.mode=variable) keep every rank's collectives identical.

Two real gloo ranks fill their storage with segments of very different lengths per env (one env of rank 0
collected nothing), compute returns and run `PPOUpdater.update` (2 epochs x 2 minibatches): both ranks must
issue the same collectives in the same number and end with identical parameters.
"""

from __future__ import annotations

import pytest
import torch
from dist_harness import digest, spawn_ranks, tiny_learner

from ddppo.advantage.gae import rollout_gae

NUM_ENVS, CAPACITY, OBS_DIM, ACTIONS = 4, 8, 5, 3
LENGTHS = {0: [1, 8, 3, 0], 1: [5, 2, 8, 6]}
COLLECTIVES = ("all_reduce", "all_gather", "all_gather_into_tensor", "broadcast", "reduce_scatter", "barrier",
               "broadcast_object_list", "all_gather_object")


def segments_worker(rank: int, world: int, port: int) -> dict:
    import torch.distributed as dist

    from ddppo.config import PPOConfig
    from ddppo.timing import Timer

    ctx, policy, updater, storage = tiny_learner(rank, world, port, PPOConfig(epochs=2, num_mini_batch=2, lr=1e-2),
                                                 NUM_ENVS, CAPACITY, OBS_DIM, ACTIONS)
    calls: list[str] = []

    def counting(name, fn):
        def wrapped(*args, **kwargs):
            calls.append(name)
            return fn(*args, **kwargs)
        return wrapped

    for name in COLLECTIVES:
        if hasattr(dist, name):
            setattr(dist, name, counting(name, getattr(dist, name)))
    try:
        ctx.broadcast_module(policy)
        g = torch.Generator().manual_seed(rank)
        storage.begin({"obs": torch.randn(NUM_ENVS, OBS_DIM, generator=g)}, torch.ones(NUM_ENVS),
                      policy.initial_memory(NUM_ENVS), segments=True)
        remaining = list(LENGTHS[rank])
        while any(remaining):  # interleaved, as ready envs come back in variable mode
            envs = torch.tensor([n for n in range(NUM_ENVS) if remaining[n]])
            k = len(envs)
            storage.insert_envs(envs, torch.randint(0, ACTIONS, (k,), generator=g), torch.full((k,), -1.0),
                                torch.randn(k, generator=g), torch.randn(k, generator=g),
                                (torch.rand(k, generator=g) < 0.2).float(),
                                {"obs": torch.randn(k, OBS_DIM, generator=g)}, torch.zeros(k))
            for n in envs.tolist():
                remaining[n] -= 1
        rollout = storage.rollout(torch.randn(NUM_ENVS, generator=g))
        adv = rollout_gae(rollout, 0.99, 0.95)
        start = len(calls)
        result = updater.update(rollout, adv, Timer())
        return {"calls": calls[start:], "lengths": storage.lengths.tolist(), "skipped": result.skipped_steps,
                "params": digest(dict(policy.named_parameters()))}
    finally:
        ctx.close()


@pytest.mark.timeout(180)
def test_unequal_segment_lengths_give_identical_collectives_and_parameters():
    ranks = spawn_ranks(segments_worker, 2)
    assert [r["lengths"] for r in ranks] == [LENGTHS[0], LENGTHS[1]]
    assert ranks[0]["calls"] and ranks[0]["calls"] == ranks[1]["calls"]
    assert ranks[0]["params"] == ranks[1]["params"]
    assert [r["skipped"] for r in ranks] == [0, 0]
