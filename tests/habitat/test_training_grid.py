"""The trainer runs the habitat PointNav config end to end on the grid double (no habitat-sim)."""

import json
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize("mode", [pytest.param([], marks=pytest.mark.slow, id="fixed"),
                                  pytest.param(["rollout.mode=variable", "env.num_workers=2"], id="variable")])
def test_cpu_config_trains_on_grid_backend(generated, tmp_path, mode):
    run = tmp_path / "run"
    cmd = [sys.executable, "-m", "ddppo", "train", os.path.join(REPO, "configs", "pointnav_habitat_cpu.yaml"),
           "env.habitat.backend=grid", f"env.habitat.dataset={generated['dataset']}",
           f"env.habitat.scenes_dir={generated['scenes_dir']}", f"run.dir={run}", "env.num_envs=2",
           "env.habitat.depth_width=32", "env.habitat.depth_height=32", "rollout.num_steps=8",
           "run.total_env_steps=32", "policy.hidden_size=32", "policy.resnet_base_width=8", "log.tensorboard=false",
           *mode]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    assert lines and lines[-1]["env_steps"] >= 32


def test_configs_load():
    from ddppo.config import load_config

    paper = load_config(os.path.join(REPO, "configs", "pointnav_habitat.yaml"))
    assert paper.env.name == "habitat_pointnav" and paper.env.habitat.depth_width == 256
    assert (paper.rollout.num_steps, paper.ppo.epochs, paper.ppo.num_mini_batch) == (128, 2, 2)
    assert (paper.ppo.lr, paper.ppo.clip, paper.ppo.max_grad_norm, paper.preemption.sync_frac) == (2.5e-4, 0.2, 0.2, 0.6)
    assert (paper.policy.rnn_type, paper.policy.rnn_layers, paper.policy.hidden_size) == ("lstm", 2, 512)
    cpu = load_config(os.path.join(REPO, "configs", "pointnav_habitat_cpu.yaml"))
    assert cpu.env.habitat.depth_width == 64 and cpu.env.habitat.gpu_device_id == -1
