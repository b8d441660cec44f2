"""Per-scene metrics of real runs: the default training (gridnav) logs `train/scene/*` for its layouts, and the
per-scene window survives a resume: `train/scene/*` is windowed over `log.window` updates like `train/*`, and a
resumed run's first per-scene scalars are the ones an uninterrupted run logs at that update (the window is saved
with the training progress, in the checkpoint)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
GRIDNAV = str(REPO / "configs" / "gridnav.yaml")
STEPS = 4 * 8  # env steps per update
ARGS = ["env.name=synthetic", "env.synthetic.num_scenes=2", "env.synthetic.episode_length=4", "env.num_envs=4",
        "rollout.num_steps=8", "ppo.num_mini_batch=2", "ppo.epochs=1", "log.window=4", "log.tensorboard=false",
        "checkpoint.interval_updates=1000", "run.seed=3"]


def _scene_rows(run: Path) -> list[dict]:
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    # step_ms is a wall-clock timing (what placement by cost reads), never the same in two runs
    return [{k: v for k, v in r.items() if k.startswith("train/scene") and not k.endswith("/step_ms")} for r in rows]


def test_a_resumed_run_logs_the_per_scene_window_of_an_uninterrupted_one(tmp_path, cli_many, cli):
    straight, split = tmp_path / "straight", tmp_path / "split"
    first = cli_many([["train", GRIDNAV, f"run.dir={straight}", *ARGS, f"run.total_env_steps={6 * STEPS}"],
                      ["train", GRIDNAV, f"run.dir={split}", *ARGS, f"run.total_env_steps={3 * STEPS}"]])
    assert all(r.returncode == 0 for r in first), first
    resumed = cli("train", GRIDNAV, f"run.dir={split}", *ARGS, f"run.total_env_steps={6 * STEPS}")
    assert resumed.returncode == 0, resumed
    assert "resumed from" in resumed.stderr
    a, b = _scene_rows(straight), _scene_rows(split)
    assert len(a) == len(b) == 6
    assert a[3]["train/scene/scene0/episodes"] == 16  # 2 envs x 2 episodes x 4 updates: the window, not 1 update
    assert b[3] == a[3]  # the resumed run's first update
    assert a == b


def test_the_default_training_logs_each_gridnav_layouts_share_and_success(tmp_path, cli):
    run = tmp_path / "run"
    res = cli("train", "gridnav", f"run.dir={run}", "env.num_envs=4", "rollout.num_steps=64", "ppo.epochs=1",
              "run.total_env_steps=512", "log.tensorboard=false")
    assert res.returncode == 0, res
    last = json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])
    scenes = sorted({k.split("/")[2] for k in last if k.startswith("train/scene/")})
    assert scenes == ["rooms2", "rooms3", "rooms4"]  # gridnav's layouts (max_room_splits=3)
    assert sum(last[f"train/scene/{s}/sample_share"] for s in scenes) == pytest.approx(1.0)
    assert all(f"train/scene/{s}/success" in last for s in scenes)
