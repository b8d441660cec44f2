"""Round trip of one env worker step with an env that does nothing (the transport alone), beside the references it
is measured against: a bare multiprocessing Pipe and a shared-memory counter the other side spins on, between two
forkserver processes. Printed by `ddppo bench env-fps --transport`; figures only, never asserted.
"""

from __future__ import annotations

import multiprocessing as mp
import time
from multiprocessing import shared_memory
from typing import Any, Callable

import gymnasium
import numpy as np

from ddppo.envs.base import EnvSpec, StepResult
from ddppo.envs.runtime.vector import SubprocVecEnv

_STOP = 2**63


class NullVecEnv:
    """Envs whose step does no work: a one-float observation, no reward, never done."""

    def __init__(self, spec: EnvSpec):
        self.num_envs = spec.num_envs
        self.observation_space = gymnasium.spaces.Dict({"obs": gymnasium.spaces.Box(0, 1, (1,), np.float32)})
        self.action_space = gymnasium.spaces.Discrete(2)

    def reset(self) -> dict[str, np.ndarray]:
        return {"obs": np.zeros((self.num_envs, 1), np.float32)}

    def step(self, actions: np.ndarray) -> StepResult:
        no = np.zeros(self.num_envs, bool)
        obs = self.reset()
        return StepResult(obs, np.zeros(self.num_envs, np.float32), no, no, obs, [])

    def close(self) -> None:
        pass

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        pass


def _build_null(name: str, options: Any, spec: EnvSpec) -> NullVecEnv:
    return NullVecEnv(spec)


def _pipe_echo(conn) -> None:
    while (message := conn.recv()) is not None:
        conn.send(message)


def _spin_echo(name: str) -> None:
    shm = shared_memory.SharedMemory(name=name)
    words = np.ndarray((16,), np.uint64, buffer=shm.buf)
    seen = 0
    while seen != _STOP:
        while words[0] == seen:
            pass
        seen = int(words[0])
        words[8] = seen  # another cache line
    del words
    shm.close()


def _percentiles(call: Callable[[], Any], samples: int) -> tuple[float, float]:
    """Median and 90th percentile of `call`'s wall time in microseconds, after a warm-up."""
    for _ in range(samples // 10):
        call()
    times = np.empty(samples)
    for i in range(samples):
        start = time.perf_counter()
        call()
        times[i] = time.perf_counter() - start
    p50, p90 = np.percentile(times, [50, 90]) * 1e6
    return float(p50), float(p90)


def _pipe(ctx, samples: int) -> tuple[float, float]:
    mine, theirs = ctx.Pipe()
    proc = ctx.Process(target=_pipe_echo, args=(theirs,))
    proc.start()
    try:
        return _percentiles(lambda: (mine.send(1), mine.recv()), samples)
    finally:
        mine.send(None)
        proc.join(10)


def _spin(ctx, samples: int) -> tuple[float, float]:
    shm = shared_memory.SharedMemory(create=True, size=128)
    words = np.ndarray((16,), np.uint64, buffer=shm.buf)
    words[:] = 0
    proc = ctx.Process(target=_spin_echo, args=(shm.name,))
    proc.start()
    seq = [0]

    def once() -> None:
        seq[0] += 1
        words[0] = seq[0]
        while words[8] != seq[0]:
            pass

    try:
        return _percentiles(once, samples)
    finally:
        words[0] = _STOP
        proc.join(10)
        del words
        shm.close()
        shm.unlink()


def _worker(spin_s: float | None, samples: int) -> tuple[float, float]:
    env = SubprocVecEnv("null", {}, EnvSpec(num_envs=1, seed=0, num_workers=1), 1, _build_null, spin_s=spin_s)
    try:
        env.reset()
        actions = np.zeros(1, np.int64)
        return _percentiles(lambda: (env.send(0, actions), env.recv()), samples)
    finally:
        env.close()


def round_trips(samples: int = 3000) -> list[tuple[str, float, float]]:
    """(what, median us, 90th percentile us) of each round trip, measured one after the other."""
    ctx = mp.get_context("forkserver")
    return [("bare multiprocessing Pipe (pickled int)", *_pipe(ctx, samples)),
            ("shared counter, both sides spinning", *_spin(ctx, samples)),
            ("env worker step, spin then block (default)", *_worker(None, samples)),
            ("env worker step, block at once (spin_s=0)", *_worker(0.0, samples))]
