"""ObjectNav on generated scenes with the real habitat-lab (0.2.x or 0.3.x) and habitat-sim: habitat-lab's own ObjectNav-v1
loader and task read ddppo.envs.scenes.objectnav_gen's episodes, its ShortestPathFollower reaches the goals, and the
adapter maps the task's spaces; skipped where either does not import."""

from __future__ import annotations

import os
from pathlib import Path

import gymnasium
import numpy as np
import pytest

from hl_testutil import REPO, gpu, real_habitat_lab

HABITAT, WHY = real_habitat_lab()
pytestmark = pytest.mark.skipif(HABITAT is None, reason=WHY)

from ddppo.envs.base import EnvSpec  # noqa: E402
from ddppo.envs.habitat_lab.compat import Api  # noqa: E402
from ddppo.envs.habitat_lab.env import HabitatLabVecEnv  # noqa: E402
from ddppo.envs.habitat_lab.options import HabitatLabOptions  # noqa: E402

OBJECTNAV_TASK = str(REPO / "configs" / "habitat_lab" / "objectnav_gen_task.yaml")
CATEGORIES = ("cabinet", "sofa", "plant", "bed", "table")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """Two generated scenes with semantic annotations; ObjectNav-v1 train (scene 0) and val (scene 1) splits."""
    from ddppo.envs.scenes.interface import SimSettings
    from ddppo.envs.scenes.layout import LayoutParams
    from ddppo.envs.scenes.objectnav_gen import ObjectNavGenParams, generate_for_scene, write_objectnav_split
    from ddppo.envs.scenes.scene_gen import generate_scenes
    from ddppo.envs.scenes.sim import HabitatSim

    root = tmp_path_factory.mktemp("objectnav_lab")
    params = LayoutParams(size_min=6.0, size_max=7.0, max_rooms=2, max_furniture=3)
    scenes, note = generate_scenes(str(root / "scenes" / "gen"), 2, seed=0, params=params, gpu_device_id=gpu())
    assert all(s.navmesh and s.semantic for s in scenes), note
    gen = ObjectNavGenParams(categories=CATEGORIES, min_geodesic=1.0, max_geodesic=4.0)
    sim = HabitatSim(SimSettings(depth_sensor=False, gpu_device_id=gpu()))
    try:
        for split, scene in zip(("train", "val"), scenes):
            scene_id = f"gen/{os.path.basename(scene.glb)}"
            write_objectnav_split(str(root / "objectnav" / split),
                                  {scene_id: generate_for_scene(sim, scene.glb, scene_id, 4, seed=1, params=gen)},
                                  CATEGORIES)
    finally:
        sim.close()
    return {"scenes_dir": str(root / "scenes"), "data_path": str(root / "objectnav" / "{split}" / "{split}.json.gz")}


def _lab_config(data, split: str):
    """habitat-lab's own HM3D ObjectNav task config, depth 32x32 (0.3.x: RGB too, 32x32), on the generated data."""
    api = Api(HABITAT)
    if not api.v2:  # the data paths set on the loaded config ({split} is not Hydra override syntax)
        sensors = "habitat.simulator.agents.main_agent.sim_sensors"
        cfg = api.load_config("benchmark/nav/objectnav/objectnav_hm3d.yaml", [
            f"habitat.simulator.habitat_sim_v0.gpu_device_id={gpu()}", "habitat.simulator.agents.main_agent.radius=0.1",
            *(f"{sensors}.{s}_sensor.{d}=32" for s in ("rgb", "depth") for d in ("width", "height")),
            "habitat.task.measurements.success.success_distance=0.2"])  # the generator's view points: a 0.25 m grid
        return api.replace(cfg, data_path=data["data_path"], scenes_dir=data["scenes_dir"], split=split)
    task = Path(HABITAT.__file__).resolve().parents[1] / "configs" / "tasks" / "objectnav_hm3d.yaml"
    if not task.is_file():
        pytest.skip(f"habitat-lab's own task configs are not in this install ({task} is missing)")
    return HABITAT.get_config(str(task), [
        "SIMULATOR.HABITAT_SIM_V0.GPU_DEVICE_ID", gpu(), "SIMULATOR.AGENT_0.SENSORS", ["DEPTH_SENSOR"],
        "SIMULATOR.AGENT_0.RADIUS", 0.1, "SIMULATOR.DEPTH_SENSOR.WIDTH", 32, "SIMULATOR.DEPTH_SENSOR.HEIGHT", 32,
        "TASK.SUCCESS.SUCCESS_DISTANCE", 0.2,  # the generator's view points are a 0.25 m grid
        "DATASET.DATA_PATH", data["data_path"], "DATASET.SCENES_DIR", data["scenes_dir"], "DATASET.SPLIT", split,
    ])


@pytest.mark.parametrize("split", ["train", "val"])
def test_habitat_labs_objectnav_task_loads_the_episodes_and_the_follower_succeeds(data, split):
    from habitat.tasks.nav.shortest_path_follower import ShortestPathFollower

    env = HABITAT.Env(config=_lab_config(data, split))
    try:
        ids = env._dataset.category_to_task_category_id
        assert ids == {c: k for k, c in enumerate(CATEGORIES)}
        assert {o.category.name() for o in env.sim.semantic_scene.objects} >= {"Unknown", "wall", "floor"}
        results = []
        for _ in range(3):
            obs = env.reset()
            ep = env.current_episode
            assert obs["objectgoal"].tolist() == [ids[ep.object_category]]
            assert ep.goals and all(g.object_category == ep.object_category for g in ep.goals)
            points = [v.agent_state.position for g in ep.goals for v in g.view_points]
            dists = [env.sim.geodesic_distance(ep.start_position, p) for p in points]
            assert min(dists) == pytest.approx(ep.info["geodesic_distance"], abs=1e-3)
            follower = ShortestPathFollower(env.sim, goal_radius=0.15, return_one_hot=False)
            goal = points[int(np.argmin(dists))]
            while not env.episode_over:
                action = follower.get_next_action(goal)
                env.step(0 if action is None else action)
            results.append((env.get_metrics()["success"], env.get_metrics()["spl"]))
        assert [s for s, _ in results] == [1.0, 1.0, 1.0]
        assert min(spl for _, spl in results) > 0.8
    finally:
        env.close()


def test_adapter_maps_objectnav_spaces_and_measures(data):
    opts = HabitatLabOptions(config=OBJECTNAV_TASK, dataset=data["data_path"], split="train",
                             scenes_dir=data["scenes_dir"], gpu_device_id=gpu(),
                             max_episode_steps=20)
    env = HabitatLabVecEnv(opts, EnvSpec(num_envs=2, seed=0))
    try:
        space = env.observation_space
        assert set(space.spaces) == {"rgb", "depth", "objectgoal", "gps", "compass"}
        assert space["objectgoal"] == gymnasium.spaces.Discrete(len(CATEGORIES))
        assert space["rgb"].shape == (64, 64, 3) and env.action_space == gymnasium.spaces.Discrete(4)
        obs = env.reset()
        assert obs["objectgoal"].shape == (2,) and set(obs["objectgoal"].tolist()) <= set(range(len(CATEGORIES)))
        res = env.step(np.zeros(2, np.int64))  # STOP
        assert res.terminated.all()
        m = res.episodes[0].metrics
        assert m["success"] == 0.0 and m["distance_to_goal"] > 0.2 and "spl" in m and "soft_spl" in m
    finally:
        env.close()
