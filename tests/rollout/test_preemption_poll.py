"""The preemption check never waits for the store: a counter read runs on the store thread while the rank
steps on, its answer is looked at before a later step, reads start at most once per poll interval, and
the first one a step early.

A stand-in context holds the reads in flight (answered when the test says so) and a stand-in clock says
when steps happen; the store semantics themselves (real gloo ranks, counters per update, restarts) are
tested in tests/distributed/test_preemption.py, the PeerLostError of a silent store below.
"""

from __future__ import annotations

import concurrent.futures

import pytest

from ddppo.config import PreemptionConfig
from ddppo.distributed import Group, PeerLostError, PendingRead
from ddppo.rollout import preemption as preemption_module
from ddppo.rollout.preemption import Preemption


class Read:
    def __init__(self, key: str):
        self.key, self.answer = key, None

    def value(self):
        return self.answer


class StandInContext:
    world_size, rank, is_main = 2, 1, False

    def __init__(self) -> None:
        self.reads: list[Read] = []

    def group(self, name: str) -> Group:
        return Group(name, (0, 1), self.rank)

    def start_counter_read(self, key: str) -> Read:
        self.reads.append(Read(key))
        return self.reads[-1]


@pytest.fixture
def clock(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(preemption_module.time, "monotonic", lambda: now[0])
    return now


def make(interval: float) -> tuple[Preemption, StandInContext]:
    ctx = StandInContext()
    cfg = PreemptionConfig(enabled=True, sync_frac=0.5, min_rollout_fraction=0.25, poll_interval_s=interval)
    return Preemption(cfg, ctx, num_steps=16), ctx  # min_steps 4, threshold 1 of 2


def test_the_first_read_starts_a_step_early_and_a_straggler_stops_right_at_the_minimum(clock):
    pre, ctx = make(0.01)
    assert not any(pre.should_stop(1, t) for t in range(3))
    assert ctx.reads == []  # nothing before the step ahead of min_steps (4)
    assert not pre.should_stop(1, 3)  # the read starts; the step is not held for it
    assert [r.key for r in ctx.reads] == ["preempt/done/1"]
    ctx.reads[0].answer = 1  # other ranks had finished when the store answered
    assert not pre.should_stop(1, 3)  # (asked again at step 3) never before the minimum
    assert pre.should_stop(1, 4)


def test_the_rank_steps_on_while_a_read_is_in_flight(clock):
    pre, ctx = make(0.01)
    pre.should_stop(1, 3)
    clock[0] += 0.05
    assert not pre.should_stop(1, 4) and not pre.should_stop(1, 5)  # unanswered: no second read in flight
    assert len(ctx.reads) == 1
    ctx.reads[0].answer = 1
    assert pre.should_stop(1, 6)


def test_reads_start_at_most_once_per_interval(clock):
    pre, ctx = make(0.01)
    pre.should_stop(1, 3)
    ctx.reads[0].answer = 0
    clock[0] += 0.004
    assert not pre.should_stop(1, 4)  # answered 0; the interval has not passed: no new read
    assert len(ctx.reads) == 1
    clock[0] += 0.007
    assert not pre.should_stop(1, 5)
    assert len(ctx.reads) == 2
    ctx.reads[1].answer = 1
    assert pre.should_stop(1, 6)


def test_a_new_update_reads_its_own_key_and_an_older_answer_is_never_used(clock):
    pre, ctx = make(10.0)
    pre.should_stop(1, 4)
    ctx.reads[0].answer = 1  # update 1's counter: must not stop update 2
    assert not pre.should_stop(2, 4)  # within update 1's interval, but another update: its own fresh read
    assert [r.key for r in ctx.reads] == ["preempt/done/1", "preempt/done/2"]
    assert not pre.should_stop(2, 5)
    ctx.reads[1].answer = 1
    assert pre.should_stop(2, 6)


def test_interval_zero_starts_a_read_as_soon_as_the_last_answered(clock):
    pre, ctx = make(0.0)
    for t in range(16):
        pre.should_stop(1, t)
        if ctx.reads:
            ctx.reads[-1].answer = 0
    assert len(ctx.reads) == 13  # step 3, then steps 4..15: each looks at the answered read, starts the next


class SilentCtx:
    rank, _timeout_s = 1, 5.0

    def silent_store_error(self, what):
        from ddppo.distributed import DistContext

        return DistContext.silent_store_error(self, what)


def test_a_read_the_store_never_answers_is_a_lost_peer_after_the_timeout(monkeypatch):
    from ddppo.distributed import context as distributed

    now = [0.0]
    monkeypatch.setattr(distributed.time, "monotonic", lambda: now[0])
    read = PendingRead(SilentCtx(), concurrent.futures.Future(), "store counter preempt/done/3")
    now[0] = 4.9
    assert read.value() is None
    now[0] = 5.1
    with pytest.raises(PeerLostError, match="did not answer within dist.timeout_s=5"):
        read.value()
