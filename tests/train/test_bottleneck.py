"""The bottleneck diagnosis names the right culprit, on hand-made timings and on real runs built to be
environment-bound, learner-bound and straggler-bound (synthetic env)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ddppo.train.bottleneck import diagnose
from testutil import cli_env

REPO = Path(__file__).resolve().parents[2]


def perf(update_s, env=0.0, policy=0.0, learn=0.0, comm=0.0, wait=0.0):
    return {"perf/update_s": update_s, "perf/env_step_s": env, "perf/policy_forward_s": policy,
            "perf/learn_forward_backward_s": learn, "perf/allreduce_s": comm, "perf/straggler_wait_s_max": wait}


@pytest.mark.parametrize("kwargs, expected", [
    (dict(env=0.7, policy=0.1, learn=0.1), "environment-bound"),
    (dict(env=0.1, policy=0.6, learn=0.2), "policy-bound"),
    (dict(env=0.1, policy=0.1, learn=0.7), "learner-bound"),
    (dict(env=0.1, learn=0.2, comm=0.6), "communication-bound"),
    (dict(env=0.2, learn=0.1, wait=0.6), "straggler-bound"),
])
def test_diagnose_hand_made(kwargs, expected):
    d = diagnose([perf(1.0, **kwargs)] * 3)
    assert d.name == expected
    assert d.share == pytest.approx(max(kwargs.values()))
    assert "->" in d.line() and d.knob in d.line()


def test_memory_pressure_wins_over_timings():
    d = diagnose([perf(1.0, env=0.9)], memory_fraction=0.95)
    assert d.name == "memory pressure" and "env.num_envs" in d.knob


def test_no_window_no_diagnosis():
    assert diagnose([]) is None


def _train(tmp_path: Path, overrides: list[str], nproc: int = 1) -> str:
    (tmp_path / "empty.yaml").write_text("{}\n")
    args = [str(tmp_path / "empty.yaml"), f"run.dir={tmp_path / 'run'}", "env.name=synthetic",
            "log.bottleneck_interval_s=1000", "dist.device=cpu", *overrides]
    if nproc == 1:
        cmd = [sys.executable, "-m", "ddppo", "train", *args]
    else:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
               "-m", "ddppo", "train", *args]
    env = cli_env()
    res = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=240, env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    lines = [line for line in res.stderr.splitlines() if "bottleneck:" in line]
    assert lines, res.stderr[-2000:]
    return lines[-1]


def test_env_bound_run(tmp_path):
    line = _train(tmp_path, ["env.synthetic.step_sleep_s=0.004", "env.num_envs=4", "rollout.num_steps=32",
                             "ppo.epochs=1", "ppo.num_mini_batch=1", "run.total_env_steps=1024"])
    assert "environment-bound" in line


def test_learner_bound_run(tmp_path):
    line = _train(tmp_path, ["env.num_envs=8", "rollout.num_steps=32", "ppo.epochs=8", "ppo.num_mini_batch=4",
                             "policy.hidden_size=256", "policy.mlp_layers=3", "run.total_env_steps=2048"])
    assert "learner-bound" in line


def test_straggler_bound_run(tmp_path):
    line = _train(tmp_path, ["env.synthetic.step_sleep_s=0.002", "env.synthetic.slow_ranks=[1]",
                             "env.synthetic.slow_factor=6", "preemption.sync_frac=1.0", "env.num_envs=2",
                             "rollout.num_steps=32", "ppo.epochs=1", "ppo.num_mini_batch=1",
                             "run.total_env_steps=640"], nproc=2)
    assert "straggler-bound" in line


def test_overlapped_learning_counts_only_the_wait_for_the_learner():
    """rollout.overlap_learning: a learner hidden behind collection is no bottleneck, an exposed one is."""
    hidden = {**perf(1.0, env=0.6, policy=0.2, learn=0.7), "perf/learner_wait_s": 0.05}
    assert diagnose([hidden] * 3).name == "learner-bound"  # read as serial, the learner would be blamed
    d = diagnose([hidden] * 3, overlapped=True)
    assert d.name == "environment-bound" and d.shares["learner wait"] == pytest.approx(0.05)
    exposed = {**perf(1.0, env=0.3, policy=0.1, learn=0.9), "perf/learner_wait_s": 0.5}
    d = diagnose([exposed] * 3, overlapped=True)
    assert d.name == "learner-bound" and d.share == pytest.approx(0.5)
