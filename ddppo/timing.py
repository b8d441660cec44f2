"""Phase timers and the phase names, defined once.

Every timed phase of an update is named here; the collector, the trainer, the
PPO update, the stats reduction (`perf/*` columns) and the bottleneck report all
use these names, so a phase cannot be renamed in one place and missed in another.

Truthful on CUDA without a sync per phase: kernels and NCCL collectives return once queued, so a plain wall
clock would charge a phase's GPU work to whichever later phase first waits for it (the all-reduce would
absorb the backward pass). Waiting for the stream at the end of every phase fixes that but costs a host sync
per phase (four per environment step; one right after the pinned asynchronous observation copy cancels its
overlap). Instead each phase records a CUDA event on the current stream when it ends, and the events are read
once per update (`pop`, or every MAX_PENDING phases): a phase runs from when it started on the host (or when the
previous phase's work ended, if later) until both its host part and its GPU work are done; consecutive phases
never overlap, so they add up to the wall time, and each is charged its own GPU work, as a sync would charge it.
Event times are put on the host clock through an anchor event recorded while the stream is idle (after the
sync that reads them). `per_phase_sync=True` keeps the old sync per phase (`tools/gpu_check/ranks.py timing`,
the GPU check's timing_overhead, compares both). On CPU nothing changes: the clock alone.
"""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Any, Callable

import torch

# collection (rollout/)
POLICY_FORWARD = "policy_forward"
ENV_STEP = "env_step"
OBS_TRANSFER = "obs_transfer"
STORAGE = "storage"
STRAGGLER_WAIT = "straggler_wait"
REWARD_MODEL = "reward_model"  # the reward model's scoring of the steps' results (reward.model)
# returns and learning (train/, ppo/)
ADVANTAGE = "advantage"  # the advantage estimate ppo.advantage names (GAE, GRPO, yours): perf/advantage_s
NORMALIZATION_SYNC = "normalization_sync"  # the normalisation statistics' all-gather and merge (normalize.*)
REFERENCE_FORWARD = "reference_forward"
LEARN_FORWARD_BACKWARD = "learn_forward_backward"
ALLREDUCE = "allreduce"
OPTIMIZER = "optimizer"
LEARNER_WAIT = "learner_wait"  # rollout.overlap_learning: the main thread, collection done, waits for the learner
LOG_CHECKPOINT = "log_checkpoint"

# the order of the `perf/*` columns reduced across ranks
PHASES = (POLICY_FORWARD, ENV_STEP, OBS_TRANSFER, STORAGE, STRAGGLER_WAIT, REWARD_MODEL, ADVANTAGE,
          NORMALIZATION_SYNC, REFERENCE_FORWARD, LEARN_FORWARD_BACKWARD, ALLREDUCE, OPTIMIZER, LEARNER_WAIT,
          LOG_CHECKPOINT)


MAX_PENDING = 4096  # phases whose events are read at the latest (a timer nobody pops: evaluation's)


def phase_end_sync(device: torch.device | None) -> Callable[[], None] | None:
    """What a phase waits for before its clock stops: the current CUDA stream of `device`; None on CPU."""
    if device is None or device.type != "cuda":
        return None
    return lambda: torch.cuda.current_stream(device).synchronize()


class Timer:
    """Accumulates wall time per named phase: `with timer(ENV_STEP): ...`; with a CUDA `device`, each phase
    includes the GPU work it queued (see the module docstring).

    `sync`: a wait run at the end of every phase instead of events (tests, per_phase_sync); `events`: what
    makes an event (torch.cuda.Event with timing by default; record(), synchronize(), elapsed_time(other) ms).
    """

    def __init__(self, device: torch.device | None = None, sync: Callable[[], None] | None = None,
                 per_phase_sync: bool = False, events: Callable[[], Any] | None = None) -> None:
        self.totals: dict[str, float] = defaultdict(float)
        self.device, self._events = device, events
        self._pending: list[tuple[str, float, float, Any]] = []  # (phase, host start, host end, end event)
        self._free: list[Any] = []  # events read already, for reuse
        self._anchor: tuple[float, Any] | None = None  # (host time, event recorded then on an idle stream)
        self._configure(sync if sync is not None else phase_end_sync(device) if per_phase_sync else None)

    def _configure(self, sync: Callable[[], None] | None) -> None:
        cuda = self.device is not None and self.device.type == "cuda"
        self._sync = sync
        self._make_event = self._events if self._events is not None else (
            (lambda: torch.cuda.Event(enable_timing=True)) if cuda and sync is None else None)
        self._anchor, self._free = None, []

    def use_per_phase_sync(self, on: bool) -> None:
        """Time with a wait at the end of every phase (True) or with CUDA events (False) from now on (the phases
        timed so far keep their times): how `ddppo bench gpu-ranks timing` compares the two on one trainer."""
        self._read_events()
        self._configure(phase_end_sync(self.device) if on else None)

    def __call__(self, name: str) -> "_Phase":
        return _Phase(self, name)

    def _begin(self) -> float:
        if self._make_event is not None and self._anchor is None:
            self._set_anchor(sync_first=True)  # once: the stream may be busy before the first phase
        return time.perf_counter()

    def _end(self, name: str, start: float) -> None:
        if self._sync is not None:
            self._sync()
        if self._make_event is None:
            self.totals[name] += time.perf_counter() - start
        else:
            event = self._free.pop() if self._free else self._make_event()
            event.record()
            self._pending.append((name, start, time.perf_counter(), event))
            if len(self._pending) >= MAX_PENDING:
                self._read_events()

    def _set_anchor(self, sync_first: bool = False) -> None:
        event = self._anchor[1] if self._anchor is not None else self._make_event()
        if sync_first:
            probe = self._make_event()
            probe.record()
            probe.synchronize()
            self._free.append(probe)
        host = time.perf_counter()
        event.record()
        self._anchor = (host, event)

    def _read_events(self) -> None:
        """Wait for the last phase's event (one host sync), charge every pending phase, re-anchor."""
        if not self._pending:
            return
        self._pending[-1][3].synchronize()
        host0, anchor = self._anchor
        previous_end = float("-inf")
        for name, start, host_end, event in self._pending:
            event.synchronize()  # done already (same stream); cheap
            gpu_end = host0 + anchor.elapsed_time(event) / 1000.0
            begin = max(start, previous_end)
            end = max(host_end, gpu_end, begin)
            self.totals[name] += end - begin
            previous_end = end
            self._free.append(event)
        self._pending = []
        self._set_anchor()  # the stream is idle now: the anchor's time is the host's

    def pop(self) -> dict[str, float]:
        self._read_events()
        out, self.totals = dict(self.totals), defaultdict(float)
        return out


class _Phase:
    """`with timer(name):` a plain context manager (a few phases run every env step: no generator per phase)."""

    __slots__ = ("timer", "name", "start")

    def __init__(self, timer: Timer, name: str):
        self.timer, self.name = timer, name

    def __enter__(self) -> None:
        self.start = self.timer._begin()

    def __exit__(self, *exc: Any) -> None:
        self.timer._end(self.name, self.start)
