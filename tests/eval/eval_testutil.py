"""Helpers of the eval tests (a plain module with a unique name: conftest names are not importable safely)."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch

from ddppo import checkpoint as ckpt
from ddppo.config import Config, load_config, to_yaml
from ddppo.distributed import rank_seed
from ddppo.eval.command import EvalRequest, run
from ddppo.eval.loading import resolve_config
from ddppo.model.policy import Policy
from ddppo.envs.registry import make_vec_env
from ddppo.envs.base import EnvSpec
from testutil import cli_env, gloo_context, obs_to_torch  # tests/testutil.py, shared with tests/conftest.py

REPO = Path(__file__).resolve().parents[2]

def start_cli(*args: str, torchrun: int = 0) -> subprocess.Popen:
    """`python -m ddppo ARGS` (or under torchrun with that many ranks), started, not waited for."""
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={torchrun}"] \
        if torchrun else [sys.executable]
    return subprocess.Popen([*launcher, "-m", "ddppo", *map(str, args)], cwd=REPO, env=cli_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc: subprocess.Popen, timeout: float = 300) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def overrides(values: dict) -> list[str]:
    return [f"{k}={v}" for k, v in values.items()]


def eval_in_process(target, overrides=(), **request) -> tuple[int, str]:
    """`ddppo eval` in this process (world size 1); (exit code, stdout)."""
    cfg = resolve_config(str(target), list(overrides))
    ctx = gloo_context(seed=cfg.run.seed)
    out = io.StringIO()
    try:
        rc = run(EvalRequest(str(target), list(overrides), **request), cfg, ctx, out)
    finally:
        ctx.close()
    return rc, out.getvalue()


def make_habitat_dataset(root: Path, scenes: int = 2, per_scene: int = 12) -> dict:
    """Generated scenes (grid backend floor plans) and a split folder of PointNav episodes."""
    from ddppo.envs.scenes.dataset import write_split
    from ddppo.envs.scenes.episode_gen import EpisodeGenParams, generate_for_scene
    from ddppo.envs.scenes.gridsim import GridSim
    from ddppo.envs.scenes.interface import SimSettings
    from ddppo.envs.scenes.layout import LayoutParams, generate_layout
    from ddppo.envs.scenes.scene_gen import write_scene

    small = LayoutParams(size_min=5.0, size_max=6.0, max_rooms=3, max_furniture=1)
    sim = GridSim(SimSettings(depth_sensor=False))
    episodes = []
    for k in range(scenes):
        files = write_scene(str(root / "scenes" / "gen"), f"gen_{k:03d}", generate_layout(np.random.default_rng(k), small))
        episodes += generate_for_scene(sim, files.glb, f"gen/gen_{k:03d}.glb", per_scene, seed=k,
                                       params=EpisodeGenParams(min_geodesic=1.0, max_geodesic=12.0, min_ratio=1.0))
    dataset = root / "pointnav" / "val"
    write_split(str(dataset), episodes)
    return {"scenes_dir": str(root / "scenes"), "dataset": str(dataset), "episodes": episodes}


def habitat_overrides(data: dict, run_dir: Path, **extra) -> list[str]:
    values = {"run.dir": str(run_dir), "env.habitat.backend": "grid", "env.habitat.dataset": data["dataset"],
              "env.habitat.scenes_dir": data["scenes_dir"], "env.habitat.depth_width": 16,
              "env.habitat.depth_height": 12, "env.habitat.max_episode_steps": 25, "env.num_envs": 2,
              "policy.hidden_size": 16, "policy.rnn_type": "gru", "policy.rnn_layers": 1, "policy.image_encoder": "cnn",
              "log.tensorboard": "false", "run.torch_threads": 1, **extra}
    return [f"{k}={v}" for k, v in values.items()]


def fake_checkpoint(cfg: Config, update: int = 3, env_steps: int = 999) -> Path:
    """An untrained policy for `cfg`'s env saved as a checkpoint of run dir cfg.run.dir (with its config.yaml)."""
    envs = make_vec_env(cfg.env.name, cfg.env_options, EnvSpec(num_envs=1, seed=0))
    try:
        torch.manual_seed(0)
        policy = Policy(envs.observation_space, envs.action_space, cfg.policy)
    finally:
        envs.close()
    run_dir = Path(cfg.run.dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.yaml").write_text(to_yaml(cfg))
    payload = {"model": policy.state_dict(), "optimizer": {}, "config_yaml": to_yaml(cfg), "world_size": 1,
               "counters": {"update": update, "env_steps": env_steps, "skipped_in_a_row": 0}, "rank_states": []}
    return ckpt.save(run_dir, update, payload, keep_last=100)


def habitat_config(data: dict, run_dir: Path, **extra) -> Config:
    return load_config(REPO / "configs" / "pointnav_habitat_cpu.yaml", habitat_overrides(data, run_dir, **extra))


def replay_gridnav(cfg: Config, checkpoint: Path, episodes: list[dict]) -> list[dict]:
    """Each recorded episode played again on its own, in a fresh one-env gridnav, with a plain loop."""
    from ddppo.envs.gridnav.env import GridNav
    from ddppo.envs.gridnav.options import GridNavOptions

    env = GridNav(GridNavOptions(**cfg.env_options), EnvSpec(num_envs=1, seed=rank_seed(
        cfg.run.seed + cfg.eval.seed_offset, 0)))
    policy = Policy(env.observation_space, env.action_space, cfg.policy)
    policy.load_state_dict(ckpt.load(checkpoint)["model"])
    env.reset()
    out = []
    for rec in episodes:
        ep = rec["episode"]
        env.set_episode(0, tuple(ep["start"]), tuple(ep["goal"]), ep["heading"], ep["map_index"])
        obs, hidden, start = env.observe(), policy.initial_memory(1), torch.ones(1)
        while True:
            action, _, _, hidden = policy.act(obs_to_torch(obs, torch.device("cpu")), hidden, start,
                                              deterministic=True)
            res = env.step(action.numpy())
            start = torch.zeros(1)
            obs = res.obs
            if res.episodes:
                out.append(res.episodes[0].metrics)
                break
    return out
