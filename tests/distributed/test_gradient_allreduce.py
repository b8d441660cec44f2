"""The bucketed, backward-overlapped all-reduce gives the single-process gradient on the union of the ranks' data.

Two and three real gloo ranks hold rollouts of different lengths (as after
preemption: 8, 3 and 1 valid steps of 4 environments). Each back-propagates the
PPO loss (mean over its own valid samples) through the recurrent policy with a
`GradientReducer` armed (buckets launched from autograd hooks as backward fills
them); the result must equal the gradient of the mean loss over all valid samples
of all ranks, computed in one process on the union (padded to a common length and
masked), and, to float32 rounding, the sample-weighted sum of every rank's own
gradient gathered and summed exactly (in float64) -- what the former single flat
all-reduce computed. Tiny buckets force many buckets and hooks; one bucket
covers the case where everything goes at the end.
"""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
import torch
from dist_harness import spawn_ranks

STEPS = (8, 3, 1)  # valid steps per rank: unequal sample counts
NUM_ENVS, T, OBS_DIM, ACTIONS = 4, 8, 6, 5


def make_policy(seed: int):
    from ddppo.config import PolicyConfig
    from ddppo.model.policy import Policy

    torch.manual_seed(seed)
    obs_space = gymnasium.spaces.Dict({"obs": gymnasium.spaces.Box(-np.inf, np.inf, (OBS_DIM,), np.float32)})
    return Policy(obs_space, gymnasium.spaces.Discrete(ACTIONS), PolicyConfig(hidden_size=16, rnn_type="gru"))


def rank_data(rank: int, policy) -> dict[str, torch.Tensor]:
    """Rank `rank`'s rollout, (T, NUM_ENVS), padded past its STEPS[rank] valid steps; the same on every rank."""
    g = torch.Generator().manual_seed(100 + rank)
    obs = torch.randn(T, NUM_ENVS, OBS_DIM, generator=g)
    start = (torch.rand(T, NUM_ENVS, generator=g) < 0.2).float()
    start[0] = 1.0
    hidden = torch.randn(NUM_ENVS, 1, 16, generator=g) * 0.1  # the GRU's memory, env first
    actions = torch.randint(0, ACTIONS, (T, NUM_ENVS), generator=g)
    with torch.no_grad():
        logp, _, values = policy.evaluate({"obs": obs}, {"rnn": hidden}, start, actions)
    valid = torch.zeros(T, NUM_ENVS)
    valid[: STEPS[rank]] = 1.0
    return {"obs": obs, "start": start, "hidden": hidden, "actions": actions,
            "old_logp": logp + 0.3 * torch.randn(T, NUM_ENVS, generator=g),  # ratios away from 1: clipping active
            "old_values": values + 0.2 * torch.randn(T, NUM_ENVS, generator=g),
            "advantages": torch.randn(T, NUM_ENVS, generator=g),
            "returns": torch.randn(T, NUM_ENVS, generator=g), "valid": valid}


def loss_on(policy, d: dict[str, torch.Tensor], steps: int | None = None) -> torch.Tensor:
    """PPO loss as the updater computes it: on the first `steps` steps (the storage's [:L] slice), masked."""
    from ddppo.ppo.loss import ppo_loss

    L = steps if steps is not None else d["valid"].shape[0]
    logp, entropy, values = policy.evaluate({"obs": d["obs"][:L]}, {"rnn": d["hidden"]}, d["start"][:L],
                                            d["actions"][:L])
    return ppo_loss(logp, d["old_logp"][:L], d["advantages"][:L], entropy, values, d["old_values"][:L],
                    d["returns"][:L], d["valid"][:L], clip=0.2, clip_value_loss=True, value_coef=0.5,
                    entropy_coef=0.01).total


def union(datas: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """All ranks' environments side by side (env dimension: 1 for (T, N, ...), 0 for the memory (N, layers, H))."""
    return {k: torch.cat([d[k] for d in datas], dim=0 if k == "hidden" else 1) for k in datas[0]}


def grads(params) -> list[torch.Tensor]:
    return [p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p) for p in params]


def max_rel_error(got: list[torch.Tensor], want: list[torch.Tensor]) -> float:
    scale = max(float(w.abs().max()) for w in want)
    return max(float((g - w).abs().max()) for g, w in zip(got, want)) / scale


def allreduce_worker(rank: int, world: int, port: int, bucket_mb: float) -> dict:
    import torch.distributed as dist

    from testutil import gloo_context
    from ddppo.distributed.buckets import GradientReducer

    ctx = gloo_context(rank, world, port)
    try:
        policy = make_policy(seed=rank)  # different initialisations ...
        ctx.broadcast_module(policy)  # ... made identical from rank 0
        reference_policy = make_policy(seed=0)
        assert all(torch.equal(a, b) for a, b in zip(policy.state_dict().values(),
                                                      reference_policy.state_dict().values()))
        params = [p for p in policy.parameters() if p.requires_grad]
        datas = [rank_data(r, reference_policy) for r in range(world)]
        counts = [int(d["valid"].sum()) for d in datas]
        out: dict = {}

        reducer = GradientReducer(ctx, params, bucket_mb)
        out["buckets"] = len(reducer.buckets)

        # 1. every rank contributes its own mean-loss gradient, weighted by its valid samples
        policy.zero_grad(set_to_none=True)
        loss_on(policy, datas[rank], STEPS[rank]).backward()  # not armed: the hooks leave this alone
        own = grads(params)
        out["local_differs"] = max_rel_error(own, _reference(reference_policy, datas)) > 1e-3
        weighted = torch.cat([g.reshape(-1) for g in own]).double() * counts[rank]
        gathered = [torch.empty_like(weighted) for _ in range(world)]
        dist.all_gather(gathered, weighted)
        exact = torch.stack(gathered).sum(0) / sum(counts)
        policy.zero_grad(set_to_none=True)
        reducer.begin(torch.tensor(float(counts[rank])))
        loss_on(policy, datas[rank], STEPS[rank]).backward()
        out["launched_during_backward"] = reducer._launched
        out["total"] = float(reducer.finish())
        out["err_union"] = max_rel_error(grads(params), _reference(reference_policy, datas))
        got = torch.cat([g.reshape(-1) for g in grads(params)]).double()
        out["err_exact"] = float((got - exact).abs().max() / exact.abs().max())

        # 2. a rank with no valid samples contributes nothing, whatever its gradient buffers hold (NaN here,
        # set outside backward: its buckets all go at finish(), while the other ranks' go from their hooks)
        policy.zero_grad(set_to_none=True)
        if rank == world - 1:
            reducer.begin(torch.tensor(0.0))
            for p in params:
                p.grad = torch.full_like(p, float("nan"))
        else:
            reducer.begin(torch.tensor(float(counts[rank])))
            loss_on(policy, datas[rank], STEPS[rank]).backward()
        out["total_without_last"] = float(reducer.finish())
        out["err_without_last"] = max_rel_error(grads(params), _reference(reference_policy, datas[:-1]))

        # 3. a parameter without a gradient on some ranks is zero-filled there; a bucket whose parameter gets
        # no gradient on this rank still goes in bucket order
        extra = torch.nn.Parameter(torch.zeros(3))
        extra_reducer = GradientReducer(ctx, [extra], bucket_mb)
        extra_reducer.begin(counts[rank])
        extra.grad = torch.full((3,), 2.0) if rank == 0 else None
        extra_reducer.finish()
        out["extra"] = extra.grad.tolist()
        out["params_equal_after"] = _digest(policy)
        out["counts"] = counts
        return out
    finally:
        ctx.close()


def _reference(policy, datas) -> list[torch.Tensor]:
    """Single process: gradient of the mean loss over every valid sample of the union."""
    params = [p for p in policy.parameters() if p.requires_grad]
    policy.zero_grad(set_to_none=True)
    loss_on(policy, union(datas)).backward()
    out = grads(params)
    policy.zero_grad(set_to_none=True)
    return out


def _digest(policy) -> str:
    from dist_harness import digest

    return digest(dict(policy.named_parameters()))


@pytest.mark.timeout(180)
@pytest.mark.parametrize("world,bucket_mb", [(2, 0.001), (3, 0.001), (3, 100.0)])
def test_allreduced_gradient_is_the_union_gradient_with_unequal_sample_counts(world, bucket_mb):
    results = spawn_ranks(allreduce_worker, world, bucket_mb, timeout_s=150)
    counts = results[0]["counts"]
    assert counts == [s * NUM_ENVS for s in STEPS[:world]]
    for rank, r in enumerate(results):
        if bucket_mb < 1:  # ~1 KiB buckets: several, and the early ones went out while backward ran
            assert r["buckets"] > 3 and r["launched_during_backward"] > 0
        else:
            assert r["buckets"] == 1
        # the test has teeth: a rank's own gradient is not the union's
        assert r["local_differs"], f"rank {rank}: local gradient already equals the union gradient"
        assert r["total"] == sum(counts)
        assert r["err_union"] < 1e-5, f"rank {rank}: relative error {r['err_union']:.2e} vs the union gradient"
        assert r["err_exact"] < 1e-6, f"rank {rank}: relative error {r['err_exact']:.2e} vs the exact weighted sum"
        assert r["total_without_last"] == sum(counts[:-1])
        assert r["err_without_last"] < 1e-5, f"rank {rank}: a rank with zero samples changed the gradient"
        expected = 2.0 * counts[0] / sum(counts)
        assert r["extra"] == pytest.approx([expected] * 3, rel=1e-6)
    assert len({r["params_equal_after"] for r in results}) == 1


# ------------------------------------------------ bucket order across ranks
def order_worker(rank: int, world: int, port: int) -> dict:
    """Rank 0's backward never reaches the head (bucket 0, the last parameters); rank 1's reaches everything.
    Buckets must still go in the same order on both, or the sums mix buckets (or gloo refuses mismatched sizes)."""
    import torch.distributed as dist

    from testutil import gloo_context
    from ddppo.distributed.buckets import GradientReducer

    ctx = gloo_context(rank, world, port)
    try:
        torch.manual_seed(0)
        body = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 16))
        head = torch.nn.Linear(16, 3)
        params = list(body.parameters()) + list(head.parameters())
        reducer = GradientReducer(ctx, params, bucket_mb=0.0002)  # ~210 B: the head (204 B) alone is bucket 0
        x = torch.randn(5, 6, generator=torch.Generator().manual_seed(rank))
        count = [5.0, 2.0][rank]

        def backward() -> None:
            features = body(x)
            (features.pow(2).mean() if rank == 0 else head(features).pow(2).mean() + features.mean()).backward()

        backward()  # not armed: the reference, every rank's own gradient weighted and summed exactly
        own = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in params])
        gathered = [torch.empty_like(own, dtype=torch.float64) for _ in range(world)]
        dist.all_gather(gathered, own.double() * count)
        exact = torch.stack(gathered).sum(0) / 7.0
        for p in params:
            p.grad = None
        reducer.begin(torch.tensor(count))
        backward()
        launched = reducer._launched
        total = float(reducer.finish())
        got = torch.cat([p.grad.reshape(-1) for p in params]).double()
        return {"buckets": len(reducer.buckets), "head_bucket": reducer.buckets[0], "launched": launched,
                "total": total, "err": float((got - exact).abs().max() / exact.abs().max())}
    finally:
        ctx.close()


def test_buckets_go_in_the_same_order_when_one_rank_leaves_the_first_bucket_without_gradients():
    r0, r1 = spawn_ranks(order_worker, 2, timeout_s=120)
    assert r0["head_bucket"] == [5, 4] and r0["buckets"] > 2  # the head's weight and bias, last registered
    assert r0["launched"] == 0  # bucket 0 never filled on rank 0: nothing may go before it
    assert r1["launched"] == r1["buckets"]  # rank 1's backward filled every bucket
    for r in (r0, r1):
        assert r["total"] == 7.0
        assert r["err"] < 1e-6, r
