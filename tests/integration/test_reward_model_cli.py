"""A reward model from the user's own module through the real `ddppo` console script (reward.*): it scores every
step in batches of the rank's envs, its time is its own phase, the run records which weights it was trained with
and refuses a resume with other ones; a model returning NaN ends the run with one line naming it, exit 2."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from testutil import REPO, cli_env

GRIDNAV = str(REPO / "configs" / "gridnav.yaml")
SMALL = ["env.num_envs=4", "rollout.num_steps=8", "ppo.num_mini_batch=1", "ppo.epochs=1", "policy.hidden_size=16",
         "log.tensorboard=false", "run.torch_threads=1", "dist.device=cpu", "run.total_env_steps=64"]
MODULE = '''
import torch


class Closer(torch.nn.Module):
    """Reward = -distance to the goal (gridnav's pointgoal: r first); counts its calls and batch sizes."""

    calls = []

    def __init__(self, scale=1.0, nan=False):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.tensor(float(scale)))
        self.nan = nan

    def forward(self, obs, actions, episode_step, done):
        type(self).calls.append(len(episode_step))
        with open("calls.txt", "a") as f:
            f.write(f"{len(episode_step)}\\n")
        if self.nan:
            return torch.full((len(episode_step),), float("nan"))
        return -self.scale * obs["pointgoal"][:, 0]
'''


def run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    script = Path(sys.executable).parent / "ddppo"
    if not script.is_file():
        pytest.skip(f"no `ddppo` console script beside {sys.executable} (pip install -e . makes it)")
    return subprocess.run([str(script), *args], cwd=cwd, env=cli_env(), capture_output=True, text=True, timeout=300)


def test_a_reward_model_from_your_module_scores_every_step_and_its_weights_are_checked(tmp_path):
    (tmp_path / "rm_mod.py").write_text(MODULE)
    weights = tmp_path / "rm.pt"
    torch.save({"scale": torch.tensor(2.0)}, weights)
    run_dir = tmp_path / "run"
    res = run(["train", GRIDNAV, *SMALL, f"run.dir={run_dir}", "reward.model=rm_mod:Closer",
               f"reward.weights={weights}", "reward.env_weight=0", "reward.model_weight=0.5"], tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    calls = [int(n) for n in (tmp_path / "calls.txt").read_text().split()]
    assert calls == [4] * 16  # 2 updates x 8 steps, each one batched call over the rank's 4 envs
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert all(r["perf/reward_model_s"] > 0 for r in rows)
    # what is optimised is logged: the model's part (-2 x distance: negative), the env's, and their weighted sum
    # with reward.env_weight=0 and model_weight=0.5 (the progress line of the last update says the same)
    for r in rows:
        assert r["train/reward_model_step"] < 0 and math.isfinite(r["train/reward_env_step"])
        assert r["train/reward_learned_step"] == pytest.approx(0.5 * r["train/reward_model_step"])
    last = rows[-1]
    assert (f"learned reward/step {last['train/reward_learned_step']:.4f} (env {last['train/reward_env_step']:.4f}, "
            f"model {last['train/reward_model_step']:.4f})") in res.stderr, res.stderr[-2000:]
    torch.save({"scale": torch.tensor(3.0)}, weights)  # the same file, other contents
    again = run(["train", GRIDNAV, *SMALL, f"run.dir={run_dir}", "reward.model=rm_mod:Closer",
                 f"reward.weights={weights}", "reward.env_weight=0", "reward.model_weight=0.5",
                 "run.total_env_steps=128"], tmp_path)
    assert again.returncode == 2
    line = again.stderr.strip().splitlines()[-1]
    assert "reward.weights=" in line and "is not the file this run was trained with" in line, again.stderr[-2000:]
    assert "Traceback" not in again.stderr


def test_a_reward_model_returning_nan_is_one_line_and_exit_2(tmp_path):
    (tmp_path / "rm_mod.py").write_text(MODULE)
    res = run(["train", GRIDNAV, *SMALL, f"run.dir={tmp_path / 'run'}", "reward.model=rm_mod:Closer",
               "reward.kwargs={nan: true}"], tmp_path)
    assert res.returncode == 2, res.stderr[-2000:]
    line = res.stderr.strip().splitlines()[-1]
    assert "reward.model='rm_mod:Closer' returned a non-finite reward (nan) for env 0" in line
    assert "Traceback" not in res.stderr
