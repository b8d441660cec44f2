"""Named groups on real gloo ranks: every collective runs on its role's ranks only, and the colocated default
(`train` on every rank) trains exactly as the one flat group did.

Three ranks with `train` on ranks 0-1 and a second role on rank 2 (the shape of a served reward model, issue 63):
the train group's collectives sum, gather, broadcast and all-reduce gradients over two ranks, before and after
`mark_started` makes the groups anew, while rank 2 talks on its own group and may not call train's.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from dist_harness import spawn_ranks, synthetic, train_and_digest

from ddppo.distributed.placement import TRAIN


def groups_worker(rank: int, world: int, port: int) -> dict:
    import torch

    from ddppo.distributed.buckets import GradientReducer
    from ddppo.distributed.placement import resolve
    from testutil import gloo_context

    ctx = gloo_context(rank, world, port, placement=resolve({TRAIN: "0-1", "server": "2"}, world))
    out: dict = {"role": ctx.role, "group": tuple(ctx.group(ctx.role).ranks)}
    try:
        for phase in ("startup", "started"):
            if ctx.role == TRAIN:
                sums = ctx.all_reduce_sums(torch.tensor([rank + 1.0]), "sums")
                stats = ctx.all_gather_stats(torch.tensor([10.0 * rank]))
                chosen = ctx.broadcast_object(f"from {rank}")
                gathered = ctx.gather_objects(rank)
                decided = ctx.decide_on_main(lambda: rank if rank == 0 else None)
                torch.manual_seed(rank)
                net = torch.nn.Linear(2, 1)
                ctx.broadcast_module(net)
                reducer = GradientReducer(ctx, list(net.parameters()))
                reducer.begin(rank + 1)  # rank 0 counts 1 sample, rank 1 two
                net(torch.full((1, 2), float(rank + 1))).sum().backward()
                total = reducer.finish()
                out[phase] = {"sums": sums.tolist(), "stats": stats[:, 0].tolist(), "chosen": chosen,
                              "gathered": gathered, "decided": decided, "grad": net.weight.grad.tolist(),
                              "total": float(total), "barrier": ctx.rollout_barrier(rank + 5).tolist()}
            else:
                alone = ctx.all_reduce_sums(torch.tensor([7.0]), "sums", group="server")
                try:
                    ctx.all_reduce_sums(torch.tensor([1.0]), "sums")
                    refused = ""
                except RuntimeError as err:
                    refused = str(err)
                out[phase] = {"alone": alone.tolist(), "refused": refused}
            ctx.mark_started()
        return out
    finally:
        ctx.close()


@pytest.mark.timeout(120)
def test_collectives_run_on_their_roles_ranks_only():
    r0, r1, r2 = spawn_ranks(groups_worker, 3, timeout_s=100)
    assert (r0["role"], r1["role"], r2["role"]) == (TRAIN, TRAIN, "server")
    assert r0["group"] == r1["group"] == (0, 1) and r2["group"] == (2,)
    for phase in ("startup", "started"):
        a, b = r0[phase], r1[phase]
        assert a["sums"] == b["sums"] == [3.0]  # 1 + 2: rank 2's 7 is not in it
        assert a["stats"] == b["stats"] == [0.0, 10.0]
        assert a["chosen"] == b["chosen"] == "from 0"
        assert a["gathered"] == [0, 1] and b["gathered"] is None
        assert a["decided"] == b["decided"] == 0
        assert a["barrier"] == b["barrier"] == [5.0, 6.0]
        # sum_r n_r * g_r / sum_r n_r with g_r = x_r = (r + 1) for weight's two entries: (1*1 + 2*2) / 3
        assert a["grad"] == b["grad"] and a["grad"][0] == pytest.approx([5 / 3, 5 / 3], rel=1e-6)
        assert a["total"] == b["total"] == 3.0
        assert r2[phase]["alone"] == [7.0]
        assert "rank 2 (server) called a collective of the group 'train', which it is not in (ranks [0, 1])" \
            in r2[phase]["refused"]


OVERRIDES = synthetic(num_envs=4, num_steps=8, **{
    "preemption.enabled": "false",  # no timing in it: the same run twice gives the same bits
    "run.total_env_steps": 192, "dist.timeout_s": 60, "dist.backend": "gloo", "dist.device": "cpu"})


@pytest.mark.timeout(240)
def test_colocated_training_gives_the_same_bits_whichever_way_its_ranks_are_named(tmp_path: Path):
    """`placement.train=all` (the default) and `0-1` are one placement on two ranks: the same group, the same
    collectives, the same parameters and Adam state after several updates, on both ranks."""
    runs = [spawn_ranks(train_and_digest, 2, [*OVERRIDES, f"placement.train={spec}"], str(tmp_path / spec),
                        timeout_s=200) for spec in ("all", "0-1")]
    for r0, r1 in runs:
        assert r0["code"] == r1["code"] == 0 and r0["update"] == r1["update"] == 3
        assert r0["model"] == r1["model"] and r0["optimizer"] == r1["optimizer"]
        assert r0["model"] != r0["initial"]
    assert runs[0][0]["model"] == runs[1][0]["model"] and runs[0][0]["optimizer"] == runs[1][0]["optimizer"]
