"""The per-update watchdog (issue 43 item 6): a hang in native code that holds the GIL ends the process, every
thread's stack on stderr, where a Python-thread deadline never gets to run; and the training loop arms it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.distributed.dist_harness import PY, REPO, subprocess_env, synthetic, train_args

PROBE = Path(__file__).with_name("gil_hold_probe.py")


def probe(mode: str, bound_s: float, timeout_s: float) -> subprocess.CompletedProcess:
    return subprocess.run([PY, str(PROBE), mode, str(bound_s)], cwd=REPO, env=subprocess_env(), capture_output=True,
                          text=True, timeout=timeout_s)


def test_a_gil_holding_native_call_holds_off_a_python_thread_deadline():
    """The defect: the Python-thread deadline, due at 1 s, cannot run while `re` holds the GIL (the process is
    still stuck when the test gives up)."""
    with pytest.raises(subprocess.TimeoutExpired) as stuck:
        probe("none", 0, timeout_s=20)
    assert "the Python-thread deadline fired" not in (stuck.value.stderr or b"").decode()


def test_the_watchdog_fires_from_native_code_holding_the_gil_and_dumps_every_stack():
    r = probe("watchdog", 3, timeout_s=120)
    assert r.returncode == 1, r.stderr[-3000:]
    assert "Timeout (0:00:03)!" in r.stderr, r.stderr[-3000:]
    assert "stuck_in_native_code" in r.stderr and "ddppo-exit-deadline" not in r.stderr
    assert "the Python-thread deadline fired" not in r.stderr  # due first, at 1 s: held off by the GIL
    assert r.stderr.count("Thread 0x") >= 2  # every thread: the main one and the deadline's


def test_an_update_that_overruns_dist_update_timeout_s_ends_training(tmp_path):
    """The real CLI: each rollout step sleeps 1 s, so the first update takes 8 s > the 3 s bound."""
    overrides = [*synthetic(num_envs=2, num_steps=8), "env.synthetic.step_sleep_s=1.0", "dist.update_timeout_s=3",
                 "dist.startup_timeout_s=3"]
    r = subprocess.run([PY, *train_args(tmp_path / "run", overrides)], cwd=REPO, env=subprocess_env(),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 1, r.stderr[-3000:]
    assert "Timeout (0:00:03)!" in r.stderr and "synthetic/env.py" in r.stderr, r.stderr[-3000:]
    assert "update watchdog: an update running over 3 s" in r.stderr


def test_a_fast_run_is_not_ended_and_0_turns_the_watchdog_off(tmp_path):
    for bound in ("600", "0"):
        r = subprocess.run([PY, *train_args(tmp_path / f"run{bound}", [*synthetic(), "run.total_env_steps=64",
                                                                          f"dist.update_timeout_s={bound}"])],
                           cwd=REPO, env=subprocess_env(), capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr[-3000:]
        assert ("update watchdog" in r.stderr) == (bound != "0"), r.stderr[-3000:]
