"""End to end with the real simulator; runs wherever habitat-sim imports (skipped elsewhere).

Generated scene -> navmesh -> episodes -> env with random and expert actions ->
a few training updates. Also cross-checks habitat-sim against the grid double
built from the same floor plan (same frame, same distances, same depth), which
catches a wrongly oriented GLB or sensor.

The renderer device comes from DDPPO_HABITAT_GPU (default: 0 with CUDA, else -1 = software EGL).
"""

import dataclasses
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

habitat_sim = pytest.importorskip("habitat_sim")

from ddppo.envs.scenes.dataset import write_split  # noqa: E402
from ddppo.envs.habitat.env import HabitatPointNavEnv  # noqa: E402
from ddppo.envs.scenes.episode_gen import EpisodeGenParams, generate_for_scene  # noqa: E402
from ddppo.envs.habitat.follower import ShortestPathFollower  # noqa: E402
from ddppo.envs.scenes.geometry import quat_from_yaw  # noqa: E402
from ddppo.envs.scenes.gridsim import GridSim  # noqa: E402
from ddppo.envs.scenes.interface import SimSettings  # noqa: E402
from ddppo.envs.scenes.layout import LayoutParams  # noqa: E402
from ddppo.envs.habitat.options import HabitatOptions  # noqa: E402
from ddppo.envs.scenes.scene_gen import generate_scenes  # noqa: E402
from ddppo.envs.scenes.sim import HabitatSim  # noqa: E402
from ddppo.envs.base import EnvSpec  # noqa: E402
from habitat_testutil import habitat_gpu  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


GPU = habitat_gpu()
PARAMS = LayoutParams(size_min=5.0, size_max=7.0, max_rooms=3, max_furniture=2)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("real_habitat")
    scenes_dir = root / "scenes"
    scenes, note = generate_scenes(str(scenes_dir / "gen"), 2, seed=0, params=PARAMS, gpu_device_id=GPU)
    assert all(s.navmesh and os.path.isfile(s.navmesh) for s in scenes), note
    sim = HabitatSim(SimSettings(depth_sensor=False, gpu_device_id=GPU))
    episodes = []
    try:
        for k, s in enumerate(scenes):
            episodes += generate_for_scene(sim, s.glb, f"gen/{os.path.basename(s.glb)}", 6, seed=k,
                                           params=EpisodeGenParams(min_geodesic=1.5, max_geodesic=12.0))
    finally:
        sim.close()
    dataset = root / "pointnav" / "train"
    write_split(str(dataset), episodes)
    return {"scenes": scenes, "scenes_dir": str(scenes_dir), "dataset": str(dataset), "episodes": episodes}


def options(data, **kw):
    base = dict(dataset=data["dataset"], scenes_dir=data["scenes_dir"], backend="habitat", depth_width=64,
                depth_height=64, gpu_device_id=GPU)
    base.update(kw)
    return HabitatOptions(**base)


def test_navmesh_is_the_floor_and_is_connected(data):
    sim = HabitatSim(SimSettings(depth_sensor=False, gpu_device_id=GPU, seed=3))
    try:
        sim.load_scene(data["scenes"][0].glb)
        points = [sim.sample_navigable_point() for _ in range(200)]
        heights = np.array([p[1] for p in points])
        assert np.all(np.abs(heights) < 0.5), "navigable points off the floor (ceiling/furniture-top islands?)"
        grid = GridSim(SimSettings(depth_sensor=False))
        grid.load_scene(data["scenes"][0].glb)
        x0, z0, x1, z1 = grid.layout.footprint
        assert all(x0 < p[0] < x1 and z0 < p[2] < z1 for p in points)  # same frame as the floor plan
        reachable = [math.isfinite(sim.geodesic_distance(points[k], points[k + 1])) for k in range(0, 200, 2)]
        assert np.mean(reachable) > 0.95
    finally:
        sim.close()


def test_habitat_and_grid_double_agree(data):
    """Same geodesic distances and depth from the same pose: the GLB frame and sensors are right."""
    settings = SimSettings(depth_width=64, depth_height=64, gpu_device_id=GPU)
    real, grid = HabitatSim(settings), GridSim(dataclasses.replace(settings))
    try:
        for ep in data["episodes"][:6]:
            scene = os.path.join(data["scenes_dir"], ep.scene_id)
            real.load_scene(scene)
            grid.load_scene(scene)
            start, goal = np.array(ep.start_position), np.array(ep.goals[0].position)
            g_real = real.geodesic_distance(start, goal)
            g_grid = grid.geodesic_distance(grid.snap_point(start), grid.snap_point(goal))
            assert g_grid == pytest.approx(g_real, rel=0.15, abs=0.3)
            for yaw in np.linspace(0.0, 2 * np.pi, 6, endpoint=False):
                real.set_agent_pose(start, quat_from_yaw(yaw))
                grid.set_agent_pose(start, quat_from_yaw(yaw))
                assert grid.agent_pose()[0][1] == pytest.approx(real.agent_pose()[0][1], abs=1e-3)  # same height
                d_real, d_grid = real.observe()["depth"], grid.observe()["depth"]
                assert d_real.shape == d_grid.shape == (64, 64)
                # every pixel (floor, ceiling, walls, furniture seen over or not): a few cm at most in the median
                assert np.median(np.abs(d_real - d_grid)) < 0.03, (ep.episode_id, yaw)
                assert np.mean(np.abs(d_real - d_grid) < 0.1) > 0.9, (ep.episode_id, yaw)
    finally:
        real.close()


def test_env_random_actions(data):
    env = HabitatPointNavEnv(options(data, max_episode_steps=40), EnvSpec(num_envs=2, seed=0, gpu_device_id=GPU))
    try:
        obs = env.reset()
        rng = np.random.default_rng(0)
        finished = []
        for _ in range(100):
            res = env.step(rng.integers(0, 4, size=2))
            for key, space in env.observation_space.spaces.items():
                assert all(space.contains(row) for row in res.obs[key])
            finished += res.episodes
        assert finished and all(0.0 <= e.metrics["spl"] <= 1.0 for e in finished)
        assert obs["depth"].std() > 0  # something was rendered
    finally:
        env.close()


def test_shortest_path_follower_reaches_every_goal(data):
    env = HabitatPointNavEnv(options(data, shuffle=False), EnvSpec(num_envs=2, seed=0, gpu_device_id=GPU))
    try:
        env.reset()
        experts = [ShortestPathFollower(sim) for sim in env.simulators]
        done = []
        for _ in range(4000):
            goals = [np.array(ep.goals[0].position) for ep in env.current_episodes()]
            done += env.step(np.array([f.act(g) for f, g in zip(experts, goals)])).episodes
            if len(done) >= len(data["episodes"]):
                break
        assert len(done) >= len(data["episodes"])
        assert all(e.metrics["success"] == 1.0 for e in done)
        spl = [e.metrics["spl"] for e in done]
        assert np.mean(spl) > 0.9 and min(spl) > 0.75
    finally:
        env.close()


def test_state_dict_resumes_with_habitat(data):
    opt, spec = options(data), EnvSpec(num_envs=1, seed=2, gpu_device_id=GPU)
    a, b = HabitatPointNavEnv(opt, spec), HabitatPointNavEnv(opt, spec)
    try:
        a.reset()
        b.reset()
        acts = np.random.default_rng(0).integers(1, 4, size=(30, 1))
        for t in range(10):
            a.step(acts[t])
        b.load_state_dict(a.state_dict())
        for t in range(10, 30):
            ra, rb = a.step(acts[t]), b.step(acts[t])
            assert np.array_equal(ra.obs["depth"], rb.obs["depth"]) and np.array_equal(ra.reward, rb.reward)
    finally:
        a.close()
        b.close()


def _train(data, run_dir, *extra: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "ddppo", "train", os.path.join(REPO, "configs", "pointnav_habitat_cpu.yaml"),
           f"env.habitat.dataset={data['dataset']}", f"env.habitat.scenes_dir={data['scenes_dir']}",
           f"env.habitat.gpu_device_id={GPU}", f"run.dir={run_dir}", "env.num_envs=2", "rollout.num_steps=16",
           "policy.hidden_size=64", "log.tensorboard=false", *extra]
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("HABITAT_SIM_LOG", None)
    env.pop("MAGNUM_LOG", None)
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("workers", [0, 2])
def test_a_few_training_updates_exit_cleanly_and_quietly(data, tmp_path, workers):
    proc = _train(data, tmp_path / "run", "run.total_env_steps=96", f"env.num_workers={workers}")
    assert proc.returncode == 0, proc.stderr[-3000:]  # no abort (SIGABRT = -6 / 134) at close
    assert (tmp_path / "run" / "metrics.jsonl").is_file()
    noise = [line for line in proc.stderr.splitlines() if "ddppo" not in line and "rank 0" not in line]
    assert len(noise) <= 2, noise[:20]  # habitat-sim / Magnum logs are off by default


def _metrics(run) -> list[dict]:
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    timing = ("perf/", "preempt/straggler_wait", "fps", "wall_time")
    return [{k: v for k, v in r.items() if not (k.startswith(timing) or k.endswith("/step_ms"))} for r in rows]


def test_training_resume_is_bit_identical_on_the_real_simulator(data, tmp_path):
    """6 updates straight == 3 updates, a new process resuming from the checkpoint, 3 more (2 workers)."""
    straight, split = tmp_path / "straight", tmp_path / "split"
    assert _train(data, straight, "run.total_env_steps=192").returncode == 0
    assert _train(data, split, "run.total_env_steps=96").returncode == 0
    resumed = _train(data, split, "run.total_env_steps=192")
    assert resumed.returncode == 0 and "resumed from" in resumed.stderr, resumed.stderr[-3000:]
    a, b = _metrics(straight), _metrics(split)
    assert [r["update"] for r in b] == list(range(1, 7))
    assert a == b  # every reward, success, SPL and loss value of every update, before and after the resume
    last = [torch.load(sorted((run / "checkpoints").glob("ckpt-*.pt"))[-1], weights_only=True)
            for run in (straight, split)]
    for key, value in last[0]["model"].items():
        assert torch.equal(value, last[1]["model"][key]), key
