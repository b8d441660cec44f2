"""Phase timers: on CPU the clock alone; with a phase-end sync (CUDA's stream wait) the time the sync blocks
belongs to the phase that queued the work, never to the next one."""

from __future__ import annotations

import pytest
import torch

from ddppo import timing
from ddppo.timing import Timer, phase_end_sync


@pytest.fixture
def clock(monkeypatch):
    now = [0.0]
    monkeypatch.setattr(timing.time, "perf_counter", lambda: now[0])
    return now


def test_cpu_timer_is_the_clock_alone(clock):
    assert phase_end_sync(torch.device("cpu")) is None and phase_end_sync(None) is None
    t = Timer(torch.device("cpu"))
    with t(timing.ENV_STEP):
        clock[0] += 2.0
    with t(timing.ENV_STEP):
        clock[0] += 1.0
    assert t.pop() == {timing.ENV_STEP: 3.0}
    assert t.pop() == {}


def test_queued_work_is_charged_to_the_phase_that_queued_it(clock):
    queued = [0.0]  # seconds of device work queued and not yet done

    def sync() -> None:  # waiting for the stream takes as long as the queued work
        clock[0] += queued[0]
        queued[0] = 0.0

    t = Timer(sync=sync)
    with t(timing.LEARN_FORWARD_BACKWARD):
        clock[0] += 0.1  # launching kernels returns at once ...
        queued[0] = 5.0  # ... leaving 5 s of backward on the device
    with t(timing.ALLREDUCE):
        clock[0] += 0.5
    totals = t.pop()
    assert totals[timing.LEARN_FORWARD_BACKWARD] == pytest.approx(5.1)
    assert totals[timing.ALLREDUCE] == pytest.approx(0.5)


def test_the_sync_runs_even_when_the_phase_raises(clock):
    calls = []
    t = Timer(sync=lambda: calls.append(1))
    with pytest.raises(ValueError):
        with t(timing.STORAGE):
            raise ValueError("boom")
    assert calls == [1] and timing.STORAGE in t.pop()
