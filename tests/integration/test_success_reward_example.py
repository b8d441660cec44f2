"""The objectives guide's worked example (docs/examples/success_reward.py) through the real CLI: record expert
demonstrations, learn the success classifier from them, and train with its terminal score as the only reward."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from testutil import REPO, cli_env

EXAMPLE = REPO / "docs" / "examples" / "success_reward.py"
SMALL = ["env.num_envs=4", "rollout.num_steps=8", "ppo.num_mini_batch=1", "ppo.epochs=1", "policy.hidden_size=16",
         "log.tensorboard=false", "run.torch_threads=1", "dist.device=cpu", "run.total_env_steps=64"]


def run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=cwd, env=cli_env(), capture_output=True, text=True, timeout=300)


def test_the_classifier_learns_from_demonstrations_and_rewards_a_run(tmp_path):
    script = Path(sys.executable).parent / "ddppo"
    if not script.is_file():
        pytest.skip(f"no `ddppo` console script beside {sys.executable} (pip install -e . makes it)")
    shutil.copy(EXAMPLE, tmp_path / "success_reward.py")
    rec = run([str(script), "record", "gridnav", "--episodes", "64", "--out", "demos"], tmp_path)
    assert rec.returncode == 0, rec.stderr[-2000:]
    fit = run([sys.executable, "success_reward.py", "demos", "success.pt"], tmp_path)
    assert fit.returncode == 0, fit.stderr[-2000:]
    accuracy = float(re.search(r"accuracy on the demonstrations: ([\d.]+)", fit.stdout).group(1))
    assert accuracy >= 0.95
    train = run([str(script), "train", "gridnav", *SMALL, "run.dir=run",
                 "reward.model=success_reward:SuccessClassifier", "reward.weights=success.pt", "reward.mode=terminal",
                 "reward.env_weight=0"], tmp_path)
    assert train.returncode == 0, train.stderr[-2000:]
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and "perf/reward_model_s" in rows[-1]
