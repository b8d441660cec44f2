"""Phase timers: on CPU the clock alone; on CUDA events read once per update (a fake GPU here), or with a
phase-end sync (CUDA's stream wait); either way the time the sync blocks
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


# ------------------------------------------------------- CUDA events, read once per update (fake GPU)
class FakeGPU:
    """One CUDA stream on the fake host clock: queued work runs back to back; an event completes when the
    stream reaches it; a synchronize blocks the host until then (counted when it had to wait)."""

    def __init__(self, clock):
        self.clock, self.busy_until, self.blocking_syncs = clock, 0.0, 0

    def queue(self, seconds: float) -> None:
        self.busy_until = max(self.busy_until, self.clock[0]) + seconds

    def wait_until(self, t: float) -> None:
        if t > self.clock[0]:
            self.blocking_syncs += 1
            self.clock[0] = t

    def event(self) -> FakeEvent:
        return FakeEvent(self)

    def stream(self, device=None) -> FakeStream:
        return FakeStream(self)


class FakeEvent:
    def __init__(self, gpu: FakeGPU):
        self.gpu, self.at = gpu, None

    def record(self) -> None:
        self.at = max(self.gpu.busy_until, self.gpu.clock[0])

    def synchronize(self) -> None:
        self.gpu.wait_until(self.at)

    def elapsed_time(self, other: FakeEvent) -> float:
        assert self.at is not None and other.at is not None and other.at <= self.gpu.clock[0], "not completed"
        return (other.at - self.at) * 1000.0


class FakeStream:
    def __init__(self, gpu: FakeGPU):
        self.gpu = gpu

    def synchronize(self) -> None:
        self.gpu.wait_until(self.gpu.busy_until)


@pytest.fixture
def gpu(clock, monkeypatch):
    fake = FakeGPU(clock)
    monkeypatch.setattr(torch.cuda, "Event", lambda enable_timing=False, **_: fake.event())
    monkeypatch.setattr(torch.cuda, "current_stream", fake.stream)
    return fake


def _steps(timer, gpu, clock, n):
    """n environment steps as the collector times them: the forward waits for its action (a host read),
    the observation copy is queued asynchronously, storage writes are queued after it."""
    for _ in range(n):
        with timer(timing.POLICY_FORWARD):
            clock[0] += 0.001
            gpu.queue(0.004)
            gpu.wait_until(gpu.busy_until)  # action.cpu()
        with timer(timing.ENV_STEP):
            clock[0] += 0.010
        with timer(timing.OBS_TRANSFER):
            clock[0] += 0.0005
            gpu.queue(0.002)  # pinned, non_blocking copy
        with timer(timing.STORAGE):
            clock[0] += 0.0005
            gpu.queue(0.001)


def test_cuda_timer_syncs_once_per_update_not_once_per_phase(clock, gpu):
    t = Timer(torch.device("cuda", 0))
    _steps(t, gpu, clock, 50)
    before_pop = gpu.blocking_syncs
    totals = t.pop()
    # 50 waits are the forward's own action reads; the timer adds at most one (the pop) on the hot path
    assert before_pop - 50 <= 1, f"{before_pop - 50} syncs added by the timer over 200 phases"
    assert totals[timing.OBS_TRANSFER] == pytest.approx(50 * (0.0005 + 0.002))  # host part + the copy, not ~0
    assert totals[timing.STORAGE] == pytest.approx(50 * 0.001)


def test_per_phase_sync_mode_waits_at_every_phase(clock, gpu):
    t = Timer(torch.device("cuda", 0), per_phase_sync=True)
    _steps(t, gpu, clock, 50)
    assert gpu.blocking_syncs - 50 >= 2 * 50  # after the copy and after storage, every step


def test_one_timer_switches_between_events_and_per_phase_sync(clock, gpu):
    """What `ddppo bench gpu-ranks timing` does between updates of one trainer: the same timer, either mode."""
    t = Timer(torch.device("cuda", 0))
    t.use_per_phase_sync(True)
    _steps(t, gpu, clock, 50)
    assert gpu.blocking_syncs - 50 >= 2 * 50
    t.pop()
    t.use_per_phase_sync(False)
    before = gpu.blocking_syncs
    _steps(t, gpu, clock, 50)
    totals = t.pop()
    assert gpu.blocking_syncs - before - 50 <= 2  # events again: the pop's read (and the new anchor's)
    assert totals[timing.STORAGE] == pytest.approx(50 * 0.001)


def test_events_charge_each_phase_its_own_gpu_work_and_add_up_to_the_wall_time(clock):
    gpu = FakeGPU(clock)
    t = Timer(events=gpu.event)
    start = clock[0]
    with t(timing.LEARN_FORWARD_BACKWARD):
        clock[0] += 0.1  # launching kernels returns at once ...
        gpu.queue(5.0)  # ... leaving 5 s of backward on the device
    with t(timing.ALLREDUCE):
        clock[0] += 0.05
        gpu.queue(0.5)  # the stream waits for the all-reduce
    with t(timing.ENV_STEP):  # host only, after the GPU work (the host blocked in pop's read below)
        clock[0] += 0.2
    totals = t.pop()
    wall = clock[0] - start
    assert totals[timing.LEARN_FORWARD_BACKWARD] == pytest.approx(5.1)
    assert totals[timing.ALLREDUCE] == pytest.approx(0.5)
    assert sum(totals.values()) == pytest.approx(wall)
    assert gpu.blocking_syncs <= 2  # the anchor's first sync and the pop's


def test_an_unpopped_timer_reads_its_events_before_they_pile_up(clock, monkeypatch):
    monkeypatch.setattr(timing, "MAX_PENDING", 8)
    gpu = FakeGPU(clock)
    t = Timer(events=gpu.event)
    made = []
    t._make_event = lambda: made.append(1) or gpu.event()
    start = clock[0]
    for _ in range(100):
        with t(timing.POLICY_FORWARD):
            clock[0] += 0.01
            gpu.queue(0.001)
    assert len(t._pending) < 8 and len(made) <= 8 + 2  # events are reused, not made per phase
    assert t.pop()[timing.POLICY_FORWARD] == pytest.approx(clock[0] - start)  # the wall time, reads included


def test_a_phase_that_raises_is_still_charged(clock):
    gpu = FakeGPU(clock)
    t = Timer(events=gpu.event)
    with pytest.raises(ValueError):
        with t(timing.STORAGE):
            gpu.queue(1.0)
            raise ValueError("boom")
    assert t.pop()[timing.STORAGE] == pytest.approx(1.0)
