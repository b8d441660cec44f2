"""The preemption counter is read from the store at most once per poll interval (not before every step).

A stand-in context counts the store reads and a stand-in clock says when they happen; the store
semantics themselves (real gloo ranks, counters per update, restarts) are tested in
tests/distributed/test_preemption.py.
"""

from __future__ import annotations

import pytest

from ddppo.config import PreemptionConfig
from ddppo.rollout import preemption as preemption_module
from ddppo.rollout.preemption import Preemption


class CountingContext:
    world_size, rank, is_main = 2, 1, False

    def __init__(self) -> None:
        self.reads: list[tuple[str, int]] = []
        self.count = 0

    def add_to_counter(self, key: str, amount: int) -> int:
        self.reads.append((key, amount))
        return self.count


@pytest.fixture
def clock(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(preemption_module.time, "monotonic", lambda: now[0])
    return now


def make(interval: float) -> tuple[Preemption, CountingContext]:
    ctx = CountingContext()
    cfg = PreemptionConfig(enabled=True, sync_frac=0.5, min_rollout_fraction=0.25, poll_interval_s=interval)
    return Preemption(cfg, ctx, num_steps=16), ctx  # min_steps 4, threshold 1 of 2


def test_reads_at_the_first_eligible_step_then_once_per_interval(clock):
    pre, ctx = make(0.01)
    assert not any(pre.should_stop(1, t) for t in range(4))
    assert ctx.reads == []  # never before min_steps
    assert not pre.should_stop(1, 4)
    assert len(ctx.reads) == 1  # at once at the first step where the rank may stop
    clock[0] += 0.004
    ctx.count = 1  # another rank finished: seen at the next read, not before
    assert not pre.should_stop(1, 5)
    assert len(ctx.reads) == 1
    clock[0] += 0.007
    assert pre.should_stop(1, 6)
    assert ctx.reads == [("preempt/done/1", 0)] * 2


def test_a_new_update_reads_at_once_under_its_own_key(clock):
    pre, ctx = make(10.0)
    assert not pre.should_stop(1, 4)
    ctx.count = 1
    assert pre.should_stop(2, 4)  # within update 1's interval, but another update: its own fresh read
    assert [k for k, _ in ctx.reads] == ["preempt/done/1", "preempt/done/2"]


def test_interval_zero_reads_before_every_step(clock):
    pre, ctx = make(0.0)
    for t in range(16):
        pre.should_stop(1, t)
    assert len(ctx.reads) == 12  # steps 4..15
