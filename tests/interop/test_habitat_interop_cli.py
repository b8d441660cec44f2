"""The CLI round trip: train with policy.architecture=habitat_baselines (small resnet18, grid backend, 32x32
depth), `ddppo export` to habitat-baselines' format, fine-tune from and evaluate that file, refusals."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from ddppo.interop import habitat_checkpoint as habitat_ckpt
from testutil import REPO, as_overrides, cli_env

pytestmark = pytest.mark.multiprocess

SMALL_HB = {"policy.architecture": "habitat_baselines", "policy.hidden_size": 16, "policy.rnn_type": "lstm",
            "policy.rnn_layers": 1, "policy.resnet_base_width": 8, "policy.resnet_layers": "[2,2,2,2]",
            "policy.resnet_bottleneck": "false"}


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> dict:
    from ddppo.envs.scenes.dataset import write_split
    from ddppo.envs.scenes.episode_gen import EpisodeGenParams, generate_for_scene
    from ddppo.envs.scenes.gridsim import GridSim
    from ddppo.envs.scenes.interface import SimSettings
    from ddppo.envs.scenes.layout import LayoutParams, generate_layout
    from ddppo.envs.scenes.scene_gen import write_scene

    root = tmp_path_factory.mktemp("hbcli")
    sim = GridSim(SimSettings(depth_sensor=False))
    files = write_scene(str(root / "scenes" / "gen"), "gen_000", generate_layout(
        np.random.default_rng(0), LayoutParams(size_min=5.0, size_max=6.0, max_rooms=3, max_furniture=1)))
    episodes = generate_for_scene(sim, files.glb, "gen/gen_000.glb", 8, seed=0,
                                  params=EpisodeGenParams(min_geodesic=1.0, max_geodesic=12.0, min_ratio=1.0))
    write_split(str(root / "pointnav" / "train"), episodes)
    return {"scenes_dir": str(root / "scenes"), "dataset": str(root / "pointnav" / "train")}


def ddppo(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ddppo", *map(str, args)], cwd=REPO, env=cli_env(),
                          capture_output=True, text=True, timeout=300)


def settings(data: dict, run_dir: Path, **extra) -> list[str]:
    return as_overrides({"run.dir": run_dir, "env.habitat.backend": "grid", "env.habitat.dataset": data["dataset"],
                         "env.habitat.scenes_dir": data["scenes_dir"], "env.habitat.depth_width": 32,
                         "env.habitat.depth_height": 32, "env.habitat.max_episode_steps": 10, "env.num_envs": 2,
                         "env.num_workers": 0, "rollout.num_steps": 8, "ppo.num_mini_batch": 1, "ppo.epochs": 1,
                         "run.total_env_steps": 16, "checkpoint.interval_updates": 1, "log.tensorboard": "false",
                         "run.torch_threads": 1, **SMALL_HB, **extra})


def test_train_export_finetune_evaluate(data, tmp_path):
    config = REPO / "configs" / "pointnav_habitat_cpu.yaml"
    run = tmp_path / "run"
    proc = ddppo("train", config, *settings(data, run))
    assert proc.returncode == 0, proc.stderr[-2000:]

    out = tmp_path / "ckpt.0.pth"
    proc = ddppo("export", run, "--format", "habitat-baselines", "-o", out, "--habitat-version", "0.3")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "0.3.x key layout, as asked" in proc.stdout
    old = tmp_path / "ckpt.old.pth"
    proc = ddppo("export", run, "--format", "habitat-baselines", "-o", old, "--habitat-version", "0.2")
    assert proc.returncode == 0 and "0.2.x key layout" in proc.stdout, proc.stderr[-2000:]
    old_sd = torch.load(old, map_location="cpu", weights_only=True)["state_dict"]
    assert all(k.startswith("actor_critic.") for k in old_sd)  # what 0.2.x's PPO agent loads
    exported = torch.load(out, map_location="cpu", weights_only=True)  # plain data: no pickled classes
    assert set(exported) == {"state_dict", "config", "extra_state"}
    assert exported["extra_state"]["step"] == 16
    assert exported["config"]["habitat_baselines"]["rl"]["ddppo"]["backbone"] == "resnet18"
    assert habitat_ckpt.summary(exported["state_dict"])["policy.hidden_size"] == 16
    before = out.read_bytes()
    proc = ddppo("export", run, "--format", "habitat-baselines", "-o", out)
    assert proc.returncode == 2 and "exists; pass --force" in proc.stderr and len(proc.stderr.splitlines()) == 1
    assert out.read_bytes() == before

    proc = ddppo("train", config, *settings(data, tmp_path / "tuned", **{"checkpoint.path": out}))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "initialised weights from the habitat-baselines checkpoint" in proc.stderr

    proc = ddppo("train", config, *settings(data, tmp_path / "wrong", **{"checkpoint.path": out,
                                                                          "policy.hidden_size": 32}))
    assert proc.returncode == 2, proc.stderr[-2000:]
    line = proc.stderr.strip().splitlines()[-1]
    assert "policy.hidden_size: checkpoint 16, this config 32" in line and "Traceback" not in proc.stderr

    proc = ddppo("eval", config, *settings(data, tmp_path / "tuned", **{"eval.num_episodes": 2}),
                 "--checkpoint", out, "--out", tmp_path / "ev")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert any((tmp_path / "ev").iterdir())
    assert (tmp_path / "ev" / "ckpt.0.json").is_file() and proc.stdout.startswith("ckpt.0 (16 env steps)")


def test_export_refuses_a_ddppo_architecture_run(tmp_path):
    from ddppo.errors import ConfigError
    from ddppo.export.habitat_baselines import export_habitat_baselines
    from testutil import save_checkpoint

    run = tmp_path / "run"
    save_checkpoint(run, 1, {"actor.weight": torch.zeros(4, 8)}, counters={"update": 1, "env_steps": 8})
    with pytest.raises(ConfigError, match="policy.architecture='ddppo'; only policy.architecture="
                                                "habitat_baselines or habitat_baselines_simple"):
        export_habitat_baselines(run, tmp_path / "x.pth")
    assert not (tmp_path / "x.pth").exists()
