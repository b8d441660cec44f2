"""The bottleneck diagnosis names the right culprit from injected phase timings (a pure function); a real run is
checked only for the plumbing (the line is logged), since which phase dominates a real run depends on the load of
the machine it runs on."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from ddppo.train.bottleneck import KNOBS, diagnose
from testutil import cli_env

REPO = Path(__file__).resolve().parents[2]


def perf(update_s, env=0.0, policy=0.0, learn=0.0, comm=0.0, wait=0.0, reward=0.0):
    return {"perf/update_s": update_s, "perf/env_step_s": env, "perf/policy_forward_s": policy,
            "perf/learn_forward_backward_s": learn, "perf/allreduce_s": comm, "perf/straggler_wait_s_max": wait,
            "perf/reward_model_s": reward}


@pytest.mark.parametrize("kwargs, expected", [
    (dict(env=0.7, policy=0.1, learn=0.1), "environment-bound"),
    (dict(env=0.1, policy=0.6, learn=0.2), "policy-bound"),
    (dict(env=0.1, policy=0.1, learn=0.7), "learner-bound"),
    (dict(env=0.1, learn=0.2, comm=0.6), "communication-bound"),
    (dict(env=0.2, learn=0.1, wait=0.6), "straggler-bound"),
    (dict(env=0.1, policy=0.1, learn=0.1, reward=0.6), "reward-model-bound"),
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


def test_straggler_shaped_ranks():
    """Two ranks as a straggler run reduces them (stats.unpack): the fast rank waits at the sync for most of the
    update while the slow one steps; env step is the mean over ranks, the wait the slowest rank's maximum."""
    fast = {"env": 0.1, "wait": 0.7}
    slow = {"env": 0.8, "wait": 0.0}
    reduced = perf(1.0, env=(fast["env"] + slow["env"]) / 2, learn=0.1, wait=max(fast["wait"], slow["wait"]))
    d = diagnose([reduced] * 4)
    assert d.name == "straggler-bound" and d.share == pytest.approx(0.7)
    assert d.shares["env step"] == pytest.approx(0.45)


def test_diagnosis_over_a_window_weights_updates_by_their_wall_time():
    """A long update counts for more than a short one: shares are of the window's total wall time."""
    window = [perf(1.0, env=0.9, learn=0.1), perf(9.0, env=1.0, learn=8.0)]
    d = diagnose(window)
    assert d.name == "learner-bound" and d.share == pytest.approx(8.1 / 10.0)


def test_a_run_logs_the_bottleneck_line(tmp_path: Path):
    """The plumbing only: a real run's phase timings reach the diagnosis and its line is logged. Which culprit
    it names depends on how loaded the machine is, so that is tested above on injected timings, not here."""
    (tmp_path / "empty.yaml").write_text("{}\n")
    cmd = [sys.executable, "-m", "ddppo", "train", str(tmp_path / "empty.yaml"), f"run.dir={tmp_path / 'run'}",
           "env.name=synthetic", "log.bottleneck_interval_s=1000", "dist.device=cpu", "env.num_envs=2",
           "rollout.num_steps=16", "ppo.epochs=1", "ppo.num_mini_batch=1", "run.total_env_steps=64"]
    res = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=240, env=cli_env())
    assert res.returncode == 0, res.stderr[-3000:]
    lines = [line for line in res.stderr.splitlines() if "bottleneck:" in line]
    assert lines, res.stderr[-2000:]
    names = "|".join(re.escape(k) for k in KNOBS)
    assert re.search(rf"bottleneck: ({names}) \(\d+% of wall time\) -> .+ \[.*env step \d+%.*\]$", lines[-1]), lines[-1]


def test_overlapped_learning_counts_only_the_wait_for_the_learner():
    """rollout.overlap_learning: a learner hidden behind collection is no bottleneck, an exposed one is."""
    hidden = {**perf(1.0, env=0.6, policy=0.2, learn=0.7), "perf/learner_wait_s": 0.05}
    assert diagnose([hidden] * 3).name == "learner-bound"  # read as serial, the learner would be blamed
    d = diagnose([hidden] * 3, overlapped=True)
    assert d.name == "environment-bound" and d.shares["learner wait"] == pytest.approx(0.05)
    exposed = {**perf(1.0, env=0.3, policy=0.1, learn=0.9), "perf/learner_wait_s": 0.5}
    d = diagnose([exposed] * 3, overlapped=True)
    assert d.name == "learner-bound" and d.share == pytest.approx(0.5)
    # the knob offered is one that is not already turned: overlap_learning is on, so it is not advised
    assert "overlap_learning" not in d.line() and "ppo.epochs" in d.line()
    assert "rollout.overlap_learning=true" in diagnose([exposed] * 3).line()  # serial: it is
