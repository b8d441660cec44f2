"""habitat-lab 0.3.x's own benchmark configs through `ddppo train` / `ddppo eval` on the real habitat-sim 0.3.x:
PointNav (benchmark/nav/pointnav/pointnav_habitat_test.yaml) and ObjectNav (benchmark/nav/objectnav/
objectnav_hm3d.yaml), pointed at generated scenes and episodes by the options a user with HM3D / Gibson passes for
their copy of the data (env.habitat_lab.dataset / split / scenes_dir) plus Hydra overrides (smaller sensors, the
generated navmeshes' agent radius). Each trains in-process (env.num_workers=0) and in env workers, resumes from its
checkpoint with the counters carried on, and is evaluated with a video. Skipped where habitat-lab 0.3.x or
habitat-sim does not import."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from hl_testutil import REPO, gpu, real_habitat_lab_v03, run_ddppo

HABITAT, WHY = real_habitat_lab_v03()
pytestmark = pytest.mark.skipif(HABITAT is None, reason=WHY)

SENSORS = "habitat.simulator.agents.main_agent.sim_sensors"
CATEGORIES = ("cabinet", "sofa", "plant", "bed", "table")
STEPS = 16  # rollout.num_steps
TASKS = {
    "pointnav": {
        "yaml": "configs/habitat_lab_pointnav.yaml",
        "config": "benchmark/nav/pointnav/pointnav_habitat_test.yaml",
        # its rgbd agent without the RGB camera (PointNav's policy reads depth), depth 32x32
        "overrides": [f"~{SENSORS}.rgb_sensor", f"{SENSORS}.depth_sensor.width=32",
                      f"{SENSORS}.depth_sensor.height=32"],
        "actions": 4,
    },
    "objectnav": {
        "yaml": "configs/habitat_lab_objectnav.yaml",
        "config": "benchmark/nav/objectnav/objectnav_hm3d.yaml",
        "overrides": [*(f"{SENSORS}.{s}_sensor.{d}=32" for s in ("rgb", "depth") for d in ("width", "height")),
                      "habitat.simulator.agents.main_agent.radius=0.1",  # the generated navmeshes' radius
                      "habitat.task.measurements.success.success_distance=0.2"],  # view points: a 0.25 m grid
        "actions": 6,  # its task has LOOK_UP / LOOK_DOWN
    },
}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """Two generated scenes with semantic annotations; PointNav-v1 and ObjectNav-v1 episodes, train on scene 0,
    val on scene 1, in habitat-lab's split layout."""
    from ddppo.envs.scenes.dataset import write_split
    from ddppo.envs.scenes.episode_gen import EpisodeGenParams, generate_for_scene as pointnav_episodes
    from ddppo.envs.scenes.interface import SimSettings
    from ddppo.envs.scenes.layout import LayoutParams
    from ddppo.envs.scenes.objectnav_gen import ObjectNavGenParams, generate_for_scene, write_objectnav_split
    from ddppo.envs.scenes.scene_gen import generate_scenes
    from ddppo.envs.scenes.sim import HabitatSim

    root = tmp_path_factory.mktemp("v03_train")
    params = LayoutParams(size_min=6.0, size_max=7.0, max_rooms=2, max_furniture=3)
    scenes, note = generate_scenes(str(root / "scenes" / "gen"), 2, seed=0, params=params, gpu_device_id=gpu())
    assert all(s.navmesh and s.semantic for s in scenes), note
    counts = {}
    sim = HabitatSim(SimSettings(depth_sensor=False, gpu_device_id=gpu()))
    try:
        for k, (split, scene) in enumerate(zip(("train", "val"), scenes)):
            scene_id = f"gen/{os.path.basename(scene.glb)}"
            episodes = pointnav_episodes(sim, scene.glb, scene_id, 4, seed=k,
                                         params=EpisodeGenParams(min_geodesic=1.0, max_geodesic=4.0))
            write_split(str(root / "pointnav" / split), episodes)
            objectnav = generate_for_scene(sim, scene.glb, scene_id, 4, seed=k, params=ObjectNavGenParams(
                categories=CATEGORIES, min_geodesic=0.5, max_geodesic=2.5))
            write_objectnav_split(str(root / "objectnav" / split), {scene_id: objectnav}, CATEGORIES)
            counts[split] = (len(episodes), len(objectnav["episodes"]))
    finally:
        sim.close()
    return {"scenes_dir": str(root / "scenes"), "root": root, "counts": counts}


def train_args(data, task: str, run, workers: int, total: int) -> list[str]:
    t = TASKS[task]
    return ["train", t["yaml"], f"run.dir={run}", f"env.habitat_lab.config={t['config']}",
            f"env.habitat_lab.overrides=[{','.join(t['overrides'])}]",
            f"env.habitat_lab.dataset={data['root']}/{task}/{{split}}/{{split}}.json.gz",
            "env.habitat_lab.split=train", f"env.habitat_lab.scenes_dir={data['scenes_dir']}",
            f"env.habitat_lab.gpu_device_id={gpu()}", "env.habitat_lab.max_episode_steps=20",
            "env.num_envs=2", f"env.num_workers={workers}", f"rollout.num_steps={STEPS}", f"run.total_env_steps={total}",
            "policy.hidden_size=32", "checkpoint.interval_updates=1", "run.torch_threads=1", "dist.device=cpu"]


def rows(run) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def counters(run, update: int) -> dict:
    from ddppo import checkpoint as ckpt

    return ckpt.load(run / "checkpoints" / f"ckpt-{update}.pt")["counters"]


_RUNS: dict = {}


@pytest.fixture(scope="module")
def in_process(data, tmp_path_factory):
    """`task` -> (run dir, output) of a 2-update in-process run of habitat-lab's own config (made once)."""

    def get(task: str):
        if task not in _RUNS:
            run = tmp_path_factory.mktemp(f"{task}_in_process") / "run"
            _RUNS[task] = (run, *run_ddppo(*train_args(data, task, run, workers=0, total=2 * 2 * STEPS)))
        return _RUNS[task]

    return get


@pytest.mark.parametrize("task", sorted(TASKS))
def test_habitat_labs_own_config_trains_in_process(in_process, task):
    run, code, out = in_process(task)
    assert code == 0, out[-3000:]
    assert "habitat-lab 0.3" in out
    assert [(r["update"], r["env_steps"]) for r in rows(run)] == [(1, 2 * STEPS), (2, 4 * STEPS)]
    # habitat-lab 0.3's measures under its own names; the task's own action set (ObjectNav's 6) reached the policy
    assert {"train/success", "train/spl", "train/distance_to_goal"} <= set(rows(run)[-1])
    from ddppo import checkpoint as ckpt

    model = ckpt.load(run / "checkpoints" / "ckpt-2.pt")["model"]
    assert tuple(model["actor.weight"].shape) == (TASKS[task]["actions"], 32)
    assert ("encoders.objectgoal" in " ".join(model)) == (task == "objectnav")


@pytest.mark.parametrize("task", sorted(TASKS))
def test_habitat_labs_own_config_trains_in_workers_then_resumes(data, task, tmp_path):
    run = tmp_path / "run"
    code, out = run_ddppo(*train_args(data, task, run, workers=2, total=2 * 2 * STEPS))
    assert code == 0, out[-3000:]
    assert counters(run, 2)["env_steps"] == 4 * STEPS
    code, out = run_ddppo(*train_args(data, task, run, workers=2, total=4 * 2 * STEPS))
    assert code == 0, out[-3000:]
    assert f"resumed from {run / 'checkpoints' / 'ckpt-2.pt'} at update 2 ({4 * STEPS} env steps)" in out
    assert "fresh episodes start" in out  # habitat-lab cannot put an episode back mid-way
    assert "not restored" not in out and "does not fit" not in out  # each env's episode order is restored
    assert [(r["update"], r["env_steps"]) for r in rows(run)] == [(u, 2 * STEPS * u) for u in (1, 2, 3, 4)]
    last = counters(run, 4)
    assert (last["update"], last["env_steps"]) == (4, 8 * STEPS)


@pytest.mark.parametrize("task", sorted(TASKS))
def test_eval_on_the_held_out_split_writes_a_video(data, in_process, task, tmp_path):
    trained, code, out = in_process(task)
    assert code == 0, out[-3000:]
    run = tmp_path / "run"
    shutil.copytree(trained, run)
    code, out = run_ddppo("eval", str(run), "--video", "1", "env.habitat_lab.split=val")
    assert code == 0, out[-3000:]
    result = json.loads((run / "eval" / "ckpt-2.json").read_text())
    expected = data["counts"]["val"][0 if task == "pointnav" else 1]
    keys = [f"{e['episode']['scene_id']}/{e['episode']['episode_id']}" for e in result["episodes"]]
    assert result["mode"] == "dataset" and len(keys) == len(set(keys)) == expected  # every val episode once
    assert {"success", "spl", "distance_to_goal"} <= set(result["metrics"])
    (video,) = result["videos"]
    path = run / "eval" / video["path"]
    assert path.is_file() and path.stat().st_size > 1000
    assert video["frames"] == int(video["metrics"]["length"]) + 1  # one frame per action, plus the last
