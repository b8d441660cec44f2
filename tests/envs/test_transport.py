"""The env workers' step hand-over (ddppo.envs.runtime.transport): both of its modes, in threads and in workers."""

import os
import threading
import time

import numpy as np
import psutil
import pytest

from ddppo.envs.base import EnvError, EnvSpec
from ddppo.envs.registry import make_vec_env
from ddppo.envs.runtime.transport import (CMD, DONE, ROW_WORDS, WORKER_ASLEEP, TrainerEnd, WorkerEnd, default_spin_s,
                                          drain, ring)
from ddppo.envs.runtime.vector import SubprocVecEnv, worker_spec

MODES = [pytest.param(default_spin_s() or 5e-5, id="spin"), pytest.param(0.0, id="block")]


class Link:
    """A trainer end and one worker end in threads of this process, joined by the same rows and pipes; neither
    looks again on its own (backstop) before a test's wait gives up, so a lost wake-up fails the test."""

    def __init__(self, spin_s: float):
        self.rows = np.zeros((1, ROW_WORDS), np.uint64)
        self.to_worker, self.to_trainer, self.cmd = os.pipe(), os.pipe(), os.pipe()
        self.trainer = TrainerEnd(self.rows, [self.to_worker[1]], [self.to_trainer[0]], spin_s, backstop_s=600)
        self.sentinel = os.pipe()  # stands for the worker's process sentinel: readable once "dead"
        conn = type("Conn", (), {"fileno": lambda _, fd=self.cmd[0]: fd})()
        self.worker = WorkerEnd(self.rows[0], self.to_worker[0], self.to_trainer[1], conn, spin_s, backstop_s=600)

    def close(self):
        for pair in (self.to_worker, self.to_trainer, self.cmd, self.sentinel):
            for fd in pair:
                os.close(fd)


@pytest.mark.parametrize("spin_s", MODES)
def test_every_step_is_handed_over_once_and_in_order(spin_s):
    """The worker thread doubles the value the trainer wrote; some steps find it asleep (a pause before the post),
    so both the spinning and the blocking hand-over are taken."""
    link, box = Link(spin_s), np.zeros(2, np.int64)

    def worker():
        while link.worker.next():
            box[1] = 2 * box[0]
            link.worker.publish(has_message=bool(box[0] % 7 == 0))

    thread = threading.Thread(target=worker, daemon=True)
    thread.start()
    try:
        for i in range(1, 301):
            if i % 50 == 0:  # let it fall asleep
                deadline = time.monotonic() + 60
                while spin_s and not link.rows[0, WORKER_ASLEEP] and time.monotonic() < deadline:
                    time.sleep(0.001)
            box[0] = i
            link.trainer.post(0)
            done, dead = link.trainer.wait([0], 1, 20.0, [link.sentinel[0]])
            assert (done, dead) == ([0], []) and box[1] == 2 * i
            assert link.trainer.has_message(0) == (i % 7 == 0)
        assert link.rows[0, CMD] == link.rows[0, DONE] == 300
    finally:
        os.write(link.cmd[1], b"x")  # a command on the pipe ends the worker's loop
        thread.join(60)
        link.close()


@pytest.mark.parametrize("spin_s", MODES)
def test_a_silent_worker_times_out_and_a_dead_one_is_named(spin_s):
    link = Link(spin_s)
    try:
        link.trainer.post(0)
        assert link.trainer.wait([0], 1, 0.05, [link.sentinel[0]]) == ([], [])
        os.write(link.sentinel[1], b"x")
        assert link.trainer.wait([0], 1, 60.0, [link.sentinel[0]]) == ([], [0])
    finally:
        link.close()


def test_ring_never_blocks_and_drain_empties_the_pipe():
    r, w = os.pipe()
    os.set_blocking(r, False)
    os.set_blocking(w, False)
    try:
        for _ in range(100_000):  # far beyond a pipe's buffer
            ring(w)
        drain(r)
        with pytest.raises(BlockingIOError):
            os.read(r, 1)
    finally:
        os.close(r)
        os.close(w)


@pytest.mark.parametrize("spin_s", MODES)
def test_workers_step_box_actions_like_in_process_envs(spin_s):
    """Float actions cross in the shared block exactly (Pendulum's torque), in both hand-over modes."""
    spec = EnvSpec(num_envs=3, seed=5, num_workers=2)
    sub = SubprocVecEnv("gym:Pendulum-v1", {}, spec, 2, make_vec_env, spin_s=spin_s)
    parts = [make_vec_env("gym:Pendulum-v1", {}, worker_spec(spec, w, 2)) for w in range(2)]
    try:
        sub.reset()
        for p in parts:
            p.reset()
        rng = np.random.default_rng(0)
        for _ in range(30):
            act = rng.uniform(-2, 2, (3, 1)).astype(np.float32)
            got = sub.step(act)
            want = np.concatenate([parts[0].step(act[:2]).obs["state"], parts[1].step(act[2:]).obs["state"]])
            np.testing.assert_array_equal(got.obs["state"], want)
        with pytest.raises(EnvError, match=r"env worker 0 steps 2 envs with actions of shape \(1,\); .*\(3,\)"):
            sub.send(0, np.zeros(3, np.float32))
    finally:
        sub.close()
        for p in parts:
            p.close()


def test_idle_workers_sleep_instead_of_spinning():
    """Between steps a worker spins only briefly, then blocks (its process sleeps, its asleep flag set): with more
    processes than cores an idle worker must not take the trainer's core."""
    sub = make_vec_env("synthetic", {}, EnvSpec(num_envs=2, seed=0, num_workers=2))
    try:
        sub.reset()
        sub.step(np.zeros(2, int))
        procs = [psutil.Process(pid) for pid in sub.worker_pids]
        deadline = time.monotonic() + 60
        flagged = not default_spin_s()  # without spinning no flag is needed: every post rings

        def asleep():
            return all(p.status() == psutil.STATUS_SLEEPING for p in procs) and (
                flagged or sub._link.rows[:, WORKER_ASLEEP].all())

        while time.monotonic() < deadline and not asleep():
            time.sleep(0.01)
        assert asleep()
        assert sub.step(np.ones(2, int)).obs["obs"].shape == (2, 8)  # and wakes for the next step
    finally:
        sub.close()
