"""`ddppo bench minigrid` and `ddppo bench atari` (benchmarks/peers/side_by_side.py) run end to end on a rollout's
worth of steps: both sides train as their own processes and the JSON holds each run's figures and learning curve, the
summary's ratios and the printed curve. Figures are not checked (they are the benchmark's output), only that both
sides ran to the budget and reported what the protocol says. Skips where SB3 or the env's package is absent; CI's
minigrid/atari step, which installs them, runs this file."""

from __future__ import annotations

import json

import pytest

from testutil import unavailable


def needs(*modules: str) -> None:
    for module in modules:
        try:
            __import__(module)
        except ImportError:
            unavailable("DDPPO_REQUIRE_SB3", f"{module} is not installed", "pip install -e '.[bench,minigrid,atari]'")


@pytest.mark.parametrize("what, env_module, budget", [("minigrid", "minigrid", 2048), ("atari", "ale_py", 1024)])
def test_a_side_by_side_bench_runs_both_sides_and_writes_their_curves(cli, tmp_path, what, env_module, budget):
    needs("stable_baselines3", env_module)
    out = tmp_path / f"{what}.json"
    r = cli("bench", what, "--seeds", "1", "--budget", str(budget), "--out", str(out), cwd=tmp_path, timeout=600)
    assert r.returncode == 0, r
    data = json.loads(out.read_text())
    assert [run["side"] for run in data["runs"]] == ["ddppo", "sb3"]
    for run in data["runs"]:
        assert run["env_steps"] >= budget and run["steps_per_s"] > 0 and run["cpu_s"] > 0, run
        assert run["curve"] and run["curve"][-1][0] == run["env_steps"], run["curve"]
    assert set(data["summary"]["ratio"]) == {"steps_per_s", "steps_per_cpu_s"}
    assert data["summary"]["curve"][-1]["env_steps"] == budget and "learning curve" in r.stdout
