"""habitat-lab 0.3.x's own Benchmark (`ddppo bench habitat-lab-metrics`: habitat.Benchmark.local_evaluate, its
episode loop and metric averaging) and `ddppo eval` on one checkpoint of habitat-lab's own PointNav config, greedy
actions, the same held-out episodes: the same success, SPL and final distance. The checkpoint's STOP logit is
shifted so that some episodes STOP part-way and others run to the step limit, and every STOP counts as a success
(success_distance 100 m): success is neither 0 nor 1 and the final distance to the goal is each path's own, so the
figures agree only where both evaluators play the same trajectories. Skipped where habitat-lab 0.3.x or habitat-sim does not import."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest

from hl_testutil import gpu, real_habitat_lab_v03, run_ddppo

HABITAT, WHY = real_habitat_lab_v03()
pytestmark = pytest.mark.skipif(HABITAT is None, reason=WHY)

SENSORS = "habitat.simulator.agents.main_agent.sim_sensors"
TASK = [f"~{SENSORS}.rgb_sensor", f"{SENSORS}.depth_sensor.width=32", f"{SENSORS}.depth_sensor.height=32"]
EVERY_STOP_SUCCEEDS = "habitat.task.measurements.success.success_distance=100.0"
LIMIT = 25  # env.habitat_lab.max_episode_steps
VAL_EPISODES = 8


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A 2-update in-process run of habitat-lab's own pointnav_habitat_test.yaml on generated data (train: scene
    0, val: scene 1, 8 episodes)."""
    from ddppo.envs.scenes.dataset import write_split
    from ddppo.envs.scenes.episode_gen import EpisodeGenParams, generate_for_scene
    from ddppo.envs.scenes.interface import SimSettings
    from ddppo.envs.scenes.layout import LayoutParams
    from ddppo.envs.scenes.scene_gen import generate_scenes
    from ddppo.envs.scenes.sim import HabitatSim

    root = tmp_path_factory.mktemp("v03_bench")
    params = LayoutParams(size_min=5.0, size_max=6.0, max_rooms=2, max_furniture=1)
    scenes, note = generate_scenes(str(root / "scenes" / "gen"), 2, seed=0, params=params, gpu_device_id=gpu())
    assert all(s.navmesh for s in scenes), note
    sim = HabitatSim(SimSettings(depth_sensor=False, gpu_device_id=gpu()))
    try:
        for k, (split, scene) in enumerate(zip(("train", "val"), scenes)):
            write_split(str(root / "pointnav" / split), generate_for_scene(
                sim, scene.glb, f"gen/{os.path.basename(scene.glb)}", 4 if split == "train" else VAL_EPISODES,
                seed=k, params=EpisodeGenParams(min_geodesic=1.0, max_geodesic=4.0)))
    finally:
        sim.close()
    run = root / "run"
    code, out = run_ddppo(
        "train", "configs/habitat_lab_pointnav.yaml", f"run.dir={run}",
        "env.habitat_lab.config=benchmark/nav/pointnav/pointnav_habitat_test.yaml",
        f"env.habitat_lab.overrides=[{','.join(TASK)}]",
        f"env.habitat_lab.dataset={root}/pointnav/{{split}}/{{split}}.json.gz", "env.habitat_lab.split=train",
        f"env.habitat_lab.scenes_dir={root / 'scenes'}", f"env.habitat_lab.gpu_device_id={gpu()}",
        f"env.habitat_lab.max_episode_steps={LIMIT}", "env.num_envs=2", "env.num_workers=0", "rollout.num_steps=16",
        "run.total_env_steps=64", "policy.hidden_size=32", "checkpoint.interval_updates=1", "run.torch_threads=1",
        "dist.device=cpu")
    assert code == 0, out[-3000:]
    return run


def stop_gaps(checkpoint, overrides: list[str]) -> list[list[float]]:
    """Each val episode's (STOP logit - best other logit) at every step, playing greedily without STOP (what the
    checkpoint does until its STOP logit wins), one env in this process."""
    import torch

    torch.set_grad_enabled(False)
    from ddppo import checkpoint as ckpt
    from ddppo.config.loading import build_config, parse_overrides, yaml_layer
    from ddppo.envs.base import EnvSpec
    from ddppo.envs.habitat_lab.env import HabitatLabVecEnv
    from ddppo.envs.habitat_lab.options import HabitatLabOptions
    from ddppo.model.build import make_policy

    data = ckpt.load(checkpoint)
    cfg = build_config(("ckpt", yaml_layer(data["config_yaml"], "stored config")),
                       ("overrides", parse_overrides(overrides)))
    env = HabitatLabVecEnv(HabitatLabOptions(**cfg.env_options), EnvSpec(num_envs=1, seed=0))
    try:
        policy = make_policy(env.observation_space, env.action_space, cfg.policy).eval()
        policy.load_state_dict(data["model"])
        hidden, start, obs = policy.initial_memory(1), torch.ones(1), env.reset()
        gaps: list[list[float]] = [[]]
        while len(gaps) <= VAL_EPISODES:
            tensors = {k: torch.as_tensor(v).to(torch.uint8 if v.dtype == np.uint8 else torch.float32)
                       for k, v in obs.items()}
            feats, hidden = policy.features({k: v[None] for k, v in tensors.items()}, hidden, start[None])
            logits = policy.actor(feats[0])[0]
            gaps[-1].append(float(logits[0] - logits[1:].max()))
            res = env.step(np.array([1 + int(logits[1:].argmax())]))
            obs, start = res.obs, torch.as_tensor(res.done, dtype=torch.float32)
            if res.done[0]:
                gaps.append([])
        return gaps[:VAL_EPISODES]
    finally:
        env.close()
        torch.set_grad_enabled(True)


def with_stop_shift(source, target, shift: float) -> None:
    """A copy of checkpoint `source` whose STOP logit is `shift` higher (the file as ddppo writes it)."""
    import torch

    raw = torch.load(source, weights_only=True)
    raw["model"]["actor.bias"][0] += shift
    torch.save(raw, target)


def test_habitat_labs_benchmark_agrees_with_ddppo_eval_on_one_checkpoint(trained, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(trained, run)
    overrides = ["env.habitat_lab.split=val", "env.num_envs=1", "ppo.num_mini_batch=1", "env.num_workers=0",
                 f"env.habitat_lab.overrides=[{','.join([*TASK, EVERY_STOP_SUCCEEDS])}]"]
    checkpoint = run / "checkpoints" / "ckpt-2.pt"
    gaps = stop_gaps(checkpoint, overrides)
    assert len(gaps) == VAL_EPISODES and all(len(g) == LIMIT for g in gaps)  # no STOP without the shift
    # the threshold half-way between two episodes' highest gaps, where neighbours lie furthest apart (at least two
    # episodes on each side): those above it STOP part-way, the rest do not, and no episode sits so near the
    # threshold that the evaluators' rounding could decide it (the gaps can lie 1e-4 apart)
    highest = sorted(max(g) for g in gaps)
    k = max(range(2, VAL_EPISODES - 1), key=lambda i: highest[i] - highest[i - 1])
    threshold = (highest[k - 1] + highest[k]) / 2
    with_stop_shift(checkpoint, checkpoint, -threshold)

    code, out = run_ddppo("eval", str(run), "--checkpoint", str(checkpoint), *overrides)
    assert code == 0, out[-3000:]
    ours = json.loads((run / "eval" / "ckpt-2.json").read_text())
    code, out = run_ddppo("bench", "habitat-lab-metrics", str(run), "--checkpoint", str(checkpoint), *overrides)
    assert code == 0, out[-3000:]
    theirs = json.loads(next(line for line in out.splitlines() if line.startswith('{"checkpoint"')))
    assert theirs["episodes"] == ours["num_episodes"] == VAL_EPISODES
    lengths = [e["metrics"]["length"] for e in ours["episodes"]]
    assert 0.0 < ours["metrics"]["success"]["mean"] < 1.0 and 1 < min(lengths) and min(lengths) < LIMIT
    assert len({round(e["metrics"]["distance_to_goal"], 3) for e in ours["episodes"]}) == VAL_EPISODES
    for name in ("success", "spl", "distance_to_goal"):
        assert theirs["habitat_lab_metrics"][name] == pytest.approx(ours["metrics"][name]["mean"], abs=1e-5), name
