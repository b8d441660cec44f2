"""A gymnasium pixel environment (uint8 images) trains through the CLI, in process and with env workers."""

import json
import math
import os
import subprocess
import sys

import pytest

from testutil import REPO, cli_env

UPDATES = 3
NUM_ENVS, STEPS = 4, 16


@pytest.mark.parametrize("workers", [0, 2])
def test_pixel_cartpole_trains_for_a_few_updates(tmp_path, workers):
    run = tmp_path / "run"
    env = cli_env()
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(REPO / "tests"), env.get("PYTHONPATH", "")])
    args = ["train", "configs/cartpole.yaml", f"run.dir={run}", "env.name=gym:pixelenv:PixelCartPole-v0",
            f"env.num_envs={NUM_ENVS}", f"env.num_workers={workers}", f"rollout.num_steps={STEPS}",
            "ppo.epochs=2", "policy.hidden_size=32", "log.tensorboard=false", "log.interval_s=0.1",
            f"run.total_env_steps={UPDATES * NUM_ENVS * STEPS}"]
    proc = subprocess.run([sys.executable, "-m", "ddppo", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["update"] for r in rows] == list(range(1, UPDATES + 1))
    assert all(math.isfinite(r["loss/total"]) and r["loss/grad_norm"] > 0 for r in rows)
    assert (run / "checkpoints" / f"ckpt-{UPDATES}.pt").is_file()
