"""The shipped configs of packages' environments train as written, for one update (a rollout's worth of steps),
and evaluate: `ddppo train minigrid` (MiniGrid's raw observation, the mission dropped), `ddppo train
minigrid_memory` (MiniGrid-MemoryS7 with the transformer core) and
`ddppo train atari env.name=gym:ale_py:ALE/Breakout-v5` (whole games as episodes). Each skips where its package
is not installed (the extras `.[minigrid]`, `.[atari]`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from testutil import cli_env

FAST = ["run.torch_threads=1", "dist.device=cpu", "log.tensorboard=false"]


def ddppo(args: list[str], cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    res = subprocess.run([sys.executable, "-m", "ddppo", *args], cwd=cwd, env=cli_env(), capture_output=True,
                         text=True, timeout=timeout)
    assert res.returncode == 0, res.stderr[-3000:]
    return res


def rows(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_minigrid_trains_on_the_raw_observation(tmp_path):
    pytest.importorskip("minigrid")
    ddppo(["train", "minigrid", "run.dir=mg", "run.total_env_steps=2048", *FAST], tmp_path)
    assert [r["update"] for r in rows(tmp_path / "mg")] == [1]
    ddppo(["eval", "mg", "eval.num_episodes=4"], tmp_path)
    result = json.loads((tmp_path / "mg" / "eval" / "ckpt-1.json").read_text())
    assert result["num_episodes"] == 4


def test_minigrid_memory_trains_with_the_transformer_core(tmp_path):
    pytest.importorskip("minigrid")
    ddppo(["train", "minigrid_memory", "run.dir=mem", "run.total_env_steps=2048", *FAST], tmp_path)
    assert [r["update"] for r in rows(tmp_path / "mem")] == [1]
    ddppo(["eval", "mem", "eval.num_episodes=4"], tmp_path)
    result = json.loads((tmp_path / "mem" / "eval" / "ckpt-1.json").read_text())
    assert result["num_episodes"] == 4
    assert "rnn_type: transformer" in (tmp_path / "mem" / "config.yaml").read_text()


def test_atari_trains_as_written_and_evaluates_whole_games(tmp_path):
    pytest.importorskip("ale_py")
    ddppo(["train", "atari", "env.name=gym:ale_py:ALE/Breakout-v5", "run.dir=atari", "run.total_env_steps=1024",
           *FAST], tmp_path)
    (row,) = rows(tmp_path / "atari")
    assert row["update"] == 1 and row["env_steps"] == 1024
    ddppo(["eval", "atari", "eval.num_episodes=1", "eval.deterministic=false"], tmp_path)
    (episode,) = json.loads((tmp_path / "atari" / "eval" / "ckpt-1.json").read_text())["episodes"]
    assert episode["metrics"]["length"] > 50  # a whole game of 5 lives, not one life
