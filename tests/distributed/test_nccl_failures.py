"""A failed or timed-out NCCL work (a mocked Work: under TORCH_NCCL_BLOCKING_WAIT its wait() raises
DistBackendError in the waiting thread) becomes the same PeerLostError as on gloo, naming the rank that did not
check in; every collective of DistContext is issued async and waited for inside its guard."""

from __future__ import annotations

import re

import pytest
import torch
import torch.distributed as dist

from ddppo.distributed import DistContext, Launch, PeerLostError

TIMED_OUT = ("[PG ID 1 PG GUID 1 Rank 0] Work WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=1024, Timeout(ms)=1000) "
             "timed out in blocking wait.\nException raised from ...")


class FakeWork:
    def __init__(self, error: Exception | None):
        self.error, self.waited = error, 0

    def wait(self, timeout=None):
        self.waited += 1
        if self.error is not None:
            raise self.error
        return True


def _ctx(world: int = 2) -> DistContext:
    launch = Launch(0, world, 0, world, "127.0.0.1", 0, "torchrun")
    return DistContext(launch, torch.device("cpu"), "gloo", dist.HashStore(), 0, timeout_s=0.5)


@pytest.mark.parametrize("error", [dist.DistBackendError(TIMED_OUT),
                                   dist.DistBackendError("NCCL error: remote process exited or there was a network "
                                                         "error, NCCL version 2.27.5\nncclRemoteError: ...")])
def test_a_failed_nccl_work_is_a_peer_lost_error_naming_the_rank(error):
    ctx = _ctx()
    work = FakeWork(error)
    with pytest.raises(PeerLostError) as info:
        ctx.wait_async((work, torch.zeros(3)), "gradient all-reduce")
    line = str(info.value)
    assert work.waited == 1 and "\n" not in line
    assert re.match(r"rank 0: gradient all-reduce failed: peer rank\(s\) \[1\] lost \(they did not check in", line)
    assert str(error).splitlines()[0][:60] in line


def test_a_completed_work_returns_its_buffer():
    buf = torch.arange(3.0)
    assert _ctx().wait_async((FakeWork(None), buf), "gradient all-reduce") is buf


def test_every_collective_waits_on_its_work(monkeypatch):
    """From torch 2.8 a synchronous NCCL collective returns no work (nothing to wait for: a lost peer would
    stall a later host read). Emulated here: async_op=False returns None; async_op=True a work whose wait()
    raises as a blocking wait does. Every collective of DistContext must be issued async and waited for."""
    def nccl_like(*args, async_op=False, **kwargs):
        return FakeWork(dist.DistBackendError(TIMED_OUT)) if async_op else None

    for name in ("all_gather", "all_reduce", "broadcast"):
        monkeypatch.setattr(dist, name, nccl_like)
    ctx = _ctx()
    with pytest.raises(PeerLostError, match=r"stats all-gather failed: peer rank\(s\) \[1\] lost"):
        ctx.all_gather_stats(torch.zeros(2))
    with pytest.raises(PeerLostError, match=r"advantage sums failed: peer rank\(s\) \[1\] lost"):
        ctx.all_reduce_sums(torch.zeros(2), "advantage sums")
    with pytest.raises(PeerLostError, match=r"end-of-rollout sync failed"):
        ctx.rollout_barrier(3)
    with pytest.raises(PeerLostError, match=r"broadcast of the parameters failed"):
        ctx.broadcast_module(torch.nn.Linear(2, 2))


def test_pickled_objects_go_through_the_object_group(monkeypatch):
    """An NCCL context's object collectives (synchronous inside torch) use its gloo group."""
    seen = []
    monkeypatch.setattr(dist, "broadcast_object_list", lambda box, src, group: seen.append(group))
    monkeypatch.setattr(dist, "gather_object", lambda obj, out, dst, group: seen.append(group))
    gloo_side = object()
    launch = Launch(0, 2, 0, 2, "127.0.0.1", 0, "torchrun")
    ctx = DistContext(launch, torch.device("cpu"), "nccl", dist.HashStore(), 0, 0.5, object_group=gloo_side)
    ctx.broadcast_object("decision")
    ctx.gather_objects(b"state")
    assert seen == [gloo_side, gloo_side]
    assert _ctx()._objects() is None  # gloo: the collectives' own group
