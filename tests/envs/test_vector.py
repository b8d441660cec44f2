"""Subprocess env workers: same results as in-process stepping, errors instead of hangs, cleanup."""

import dataclasses
import os
import signal
import time
from multiprocessing import shared_memory

import numpy as np
import pytest

from ddppo.envs.base import EnvError, VecEnv
from ddppo.envs.registry import make_vec_env
from ddppo.envs.base import EnvSpec
from ddppo.envs.runtime.vector import SubprocVecEnv, worker_spec

GRID = {"num_maps": 4, "max_episode_steps": 15}


@pytest.fixture
def closing():
    envs = []
    yield envs.append
    for env in envs:
        env.close()


def in_process(name, options, spec, num_workers):
    """The envs each worker builds, built here."""
    return [make_vec_env(name, options, worker_spec(spec, w, num_workers)) for w in range(num_workers)]


def assert_same_steps(sub, parts, actions):
    first = sub.reset()
    expected = [p.reset() for p in parts]
    for k in first:
        np.testing.assert_array_equal(first[k], np.concatenate([e[k] for e in expected]))
    for act in actions:
        got = sub.step(act)
        offset, eps, rows = 0, [], []
        for p in parts:
            rows.append(p.step(act[offset:offset + p.num_envs]))
            eps += [(e.env_index + offset, e.metrics) for e in rows[-1].episodes]
            offset += p.num_envs
        for k in got.obs:
            np.testing.assert_array_equal(got.obs[k], np.concatenate([r.obs[k] for r in rows]))
            done = got.done
            np.testing.assert_array_equal(got.final_obs[k][done], np.concatenate([r.final_obs[k] for r in rows])[done])
        for field in ("reward", "terminated", "truncated"):
            np.testing.assert_array_equal(getattr(got, field), np.concatenate([getattr(r, field) for r in rows]))
        assert [(e.env_index, e.metrics) for e in got.episodes] == eps


def test_workers_step_like_in_process_envs(closing):
    spec = EnvSpec(num_envs=5, seed=11, num_workers=2)
    sub = make_vec_env("gridnav", GRID, spec)
    closing(sub)
    assert isinstance(sub, SubprocVecEnv) and isinstance(sub, VecEnv)
    assert sub.num_envs == 5 and sub.observation_space["depth"].shape == (16,)
    parts = in_process("gridnav", GRID, spec, 2)
    assert [p.num_envs for p in parts] == [3, 2]
    assert_same_steps(sub, parts, np.random.default_rng(0).integers(0, 4, (40, 5)))


def test_one_worker_reproduces_in_process_stepping_and_state_round_trips(closing):
    spec = EnvSpec(num_envs=3, seed=4, num_workers=1)
    sub = make_vec_env("gridnav", GRID, spec)
    closing(sub)
    local = make_vec_env("gridnav", GRID, dataclasses.replace(spec, num_workers=0))
    actions = np.random.default_rng(1).integers(0, 4, (30, 3))
    assert_same_steps(sub, [local], actions[:10])
    state = sub.state_dict()
    assert len(state["workers"]) == 1
    sub.load_state_dict({"workers": [local.state_dict()]})
    for act in actions[10:]:
        np.testing.assert_array_equal(sub.step(act).obs["depth"], local.step(act).obs["depth"])
    with pytest.raises(EnvError, match="2 workers"):
        sub.load_state_dict({"workers": [state["workers"][0]] * 2})
    with pytest.raises(EnvError, match="without subprocess workers"):
        sub.load_state_dict(local.state_dict())


def test_worker_specs_split_envs_and_partition_work():
    spec = EnvSpec(num_envs=7, seed=3, rank=2)
    specs = [worker_spec(spec, w, 3) for w in range(3)]
    assert [s.num_envs for s in specs] == [3, 2, 2]
    assert [(s.worker_index, s.worker_count, s.num_workers, s.rank) for s in specs] == [
        (0, 3, 0, 2), (1, 3, 0, 2), (2, 3, 0, 2)]
    assert specs[0].seed == 3 and len({s.seed for s in specs}) == 3


def test_gym_env_through_workers(closing):
    sub = make_vec_env("gym:CartPole-v1", {}, EnvSpec(num_envs=4, seed=0, num_workers=2))
    closing(sub)
    sub.reset()
    done = 0
    for _ in range(60):
        res = sub.step(np.ones(4, dtype=np.int64))
        done += len(res.episodes)
    assert done >= 4 and res.obs["state"].shape == (4, 4)


def test_worker_exception_is_raised_with_its_traceback(closing):
    sub = make_vec_env("synthetic", {"fail_at_step": 2}, EnvSpec(num_envs=4, seed=0, num_workers=2))
    closing(sub)
    sub.reset()
    sub.step(np.zeros(4, int))
    with pytest.raises(EnvError, match=r"(?s)env worker \d failed during 'step'.*Traceback.*SyntheticFailure"):
        sub.step(np.zeros(4, int))
    with pytest.raises(EnvError, match="unusable"):
        sub.step(np.zeros(4, int))


def test_build_error_in_a_worker_is_reported():
    with pytest.raises(EnvError, match=r"(?s)env worker 0 failed during 'build'.*num_headings"):
        make_vec_env("gridnav", {"num_headings": 6}, EnvSpec(num_envs=2, seed=0, num_workers=1))


def test_killed_worker_is_reported_fast(closing):
    """A dead worker is seen as dead (its pipe closes), not waited for until worker_timeout_s: the error names
    the signal that killed it, not the timeout (which would say "did not answer ... within")."""
    sub = make_vec_env("synthetic", {}, EnvSpec(num_envs=4, seed=0, num_workers=2, worker_timeout_s=300.0))
    closing(sub)
    sub.reset()
    os.kill(sub.worker_pids[1], signal.SIGKILL)
    with pytest.raises(EnvError, match="env worker 1 .*SIGKILL") as err:
        sub.step(np.zeros(4, int))
    assert "did not answer" not in str(err.value)


def test_hung_worker_times_out(closing):
    """The error names the configured worker_timeout_s; close kills the sleeping workers instead of waiting for
    their 600 s step. The 120 s bound only catches that hang (400 x the timeout, a fifth of the sleep)."""
    spec = EnvSpec(num_envs=2, seed=0, num_workers=2, worker_timeout_s=0.3)
    sub = make_vec_env("synthetic", {"step_sleep_s": 600.0, "slow_ranks": [0]}, spec)
    closing(sub)
    sub.reset()
    start = time.monotonic()
    with pytest.raises(EnvError, match=r"env worker\(s\) \[0, 1\] did not answer 'step' within 0.3 s"):
        sub.step(np.zeros(2, int))
    sub.close()
    assert time.monotonic() - start < 120


def test_workers_ignore_interrupt_terminate_and_usr1(closing):
    sub = make_vec_env("synthetic", {}, EnvSpec(num_envs=2, seed=0, num_workers=2))
    closing(sub)
    sub.reset()
    for pid in sub.worker_pids:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1):
            os.kill(pid, sig)
    time.sleep(0.2)
    assert sub.step(np.zeros(2, int)).obs["obs"].shape == (2, 8)


SURVIVAL_SCRIPT = """
import os, signal, time
from multiprocessing import forkserver, resource_tracker
import numpy as np
import psutil
from ddppo.envs.base import EnvSpec
from ddppo.envs.registry import make_vec_env

def alive(pid):
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False

sub = make_vec_env("synthetic", {}, EnvSpec(num_envs=2, seed=0, num_workers=2))
try:
    sub.reset()
    helpers = {"forkserver": forkserver._forkserver._forkserver_pid,
               "resource tracker": resource_tracker._resource_tracker._pid}
    assert all(helpers.values()), helpers
    for pid in [*helpers.values(), *sub.worker_pids]:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1):
            os.kill(pid, sig)
    time.sleep(0.3)
    print("dead:", sorted(name for name, pid in helpers.items() if not alive(pid)))
    print("step:", sub.step(np.zeros(2, int)).obs["obs"].shape)
    print("state:", sub.state_dict() is not None)
finally:
    sub.close()
"""


def test_forkserver_and_resource_tracker_survive_the_jobs_signals():
    """SLURM, `timeout` and `kill -PGID` signal every process of the job: the forkserver (whose death reads as
    every worker dead, exit code 255) and the resource tracker (SIGUSR1 killed it) must outlive them. In a fresh
    interpreter, as a rank is: in this one an earlier test may have started the tracker already, unsheltered."""
    import subprocess
    import sys

    res = subprocess.run([sys.executable, "-c", SURVIVAL_SCRIPT], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == ["dead: []", "step: (2, 8)", "state: True"], (res.stdout, res.stderr)


def test_close_stops_workers_and_frees_shared_memory():
    sub = make_vec_env("synthetic", {}, EnvSpec(num_envs=2, seed=0, num_workers=2))
    sub.reset()
    procs, name = list(sub._res.procs), sub._res.shm.name
    sub.close()
    sub.close()
    assert not any(p.is_alive() for p in procs)
    with pytest.raises(FileNotFoundError):
        shared_memory.SharedMemory(name=name)


def test_bad_worker_count_is_rejected():
    with pytest.raises(EnvError, match="num_workers=3"):
        make_vec_env("synthetic", {}, EnvSpec(num_envs=2, seed=0, num_workers=3))


def test_async_send_to_some_workers_and_receive_whichever_are_ready(closing):
    spec = EnvSpec(num_envs=4, seed=3, num_workers=3)
    sub = make_vec_env("gridnav", GRID, spec)
    closing(sub)
    parts = in_process("gridnav", GRID, spec, 3)
    sub.reset()
    for p in parts:
        p.reset()
    assert sub.bounds == [(0, 2), (2, 3), (3, 4)]
    rng = np.random.default_rng(2)
    for _ in range(20):  # workers 0 and 2 step; worker 1 stays idle
        want = {}
        for w in (0, 2):
            lo, hi = sub.bounds[w]
            act = rng.integers(0, 4, hi - lo)
            sub.send(w, act)
            want[w] = parts[w].step(act)
        got = []
        while sub.in_flight:
            got += sub.recv(min_ready=2, wait_s=5.0)
        assert sorted(g.worker for g in got) == [0, 2]
        for g in got:
            exp = want[g.worker]
            np.testing.assert_array_equal(g.result.obs["depth"], exp.obs["depth"])
            np.testing.assert_array_equal(g.result.reward, exp.reward)
            done = exp.done
            np.testing.assert_array_equal(g.result.final_obs["depth"][done], exp.final_obs["depth"][done])
            assert [e.env_index for e in g.result.episodes] == [e.env_index + g.lo for e in exp.episodes]
    sub.send(1, np.zeros(1, int))
    with pytest.raises(EnvError, match="still stepping"):
        sub.send(1, np.zeros(1, int))
    (only,) = sub.recv()
    assert only.worker == 1
    np.testing.assert_array_equal(only.result.obs["depth"], parts[1].step(np.zeros(1, int)).obs["depth"])
    with pytest.raises(EnvError, match="no env worker stepping"):
        sub.recv()


def test_workers_carry_where_episodes_start_apart_from_done(closing):
    """Atari: a lost life is done for the learner while the game (and the policy's memory) goes on; the flag where
    an episode starts crosses from the workers in `step` and in `recv` alike."""
    pytest.importorskip("ale_py")
    sub = make_vec_env("gym:ale_py:ALE/Breakout-v5", {"atari": True}, EnvSpec(num_envs=2, seed=3, num_workers=1))
    closing(sub)
    sub.reset()
    rng = np.random.default_rng(0)
    lost = np.zeros(2, bool)
    for t in range(4000):
        if t % 2:
            res = sub.step(rng.integers(0, 4, 2))
        else:
            sub.send(0, rng.integers(0, 4, 2))
            (step,) = sub.recv_all()
            res = step.result
        lost = res.terminated.copy()
        lost[[e.env_index for e in res.episodes]] = False  # a game over: a new game starts
        if lost.any():
            break
    assert lost.any(), "no life lost in 4000 random steps"
    assert not res.episode_start[lost].any()  # the game goes on
