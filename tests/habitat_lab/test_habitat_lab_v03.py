"""The adapter against habitat-lab 0.3.x's own code: its Hydra task config, Env, Nav task, sensors, measures
and PointNav-v1 dataset, with the simulator stood in (tests/habitat_lab/v03_standin.py; habitat-sim 0.3.x is not
installable here). Runs where habitat-lab 0.3.x is installed (CI: .ci/run; DDPPO_REQUIRE_HABITAT_LAB=1 makes a
missing one a failure), skipped elsewhere."""

from __future__ import annotations

import collections
import os

import gymnasium
import numpy as np
import pytest

from hl_testutil import REPO, habitat_lab_v03

HABITAT, WHY = habitat_lab_v03()
if HABITAT is None and os.environ.get("DDPPO_REQUIRE_HABITAT_LAB") == "1":
    raise RuntimeError(f"DDPPO_REQUIRE_HABITAT_LAB=1 but {WHY}")
pytestmark = pytest.mark.skipif(HABITAT is None, reason=WHY)

from ddppo.envs.base import EnvError, EnvSpec  # noqa: E402
from ddppo.envs.scenes.dataset import Episode, Goal, write_split  # noqa: E402
from ddppo.envs.habitat_lab.compat import Api  # noqa: E402
from ddppo.envs.habitat_lab.env import HabitatLabVecEnv  # noqa: E402
from ddppo.envs.habitat_lab.options import HabitatLabOptions  # noqa: E402

TASK = "benchmark/nav/pointnav/pointnav_habitat_test.yaml"  # shipped inside habitat-lab 0.3.x
SCENES, PER_SCENE = 3, 5


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """A PointNav-v1 split folder over 3 (empty) scene files: goals 2-3 m straight ahead of the start."""
    root = tmp_path_factory.mktemp("habitat_lab_v03")
    episodes = []
    for s in range(SCENES):
        scene = root / "scenes" / "gen" / f"gen_{s:03d}.glb"
        scene.parent.mkdir(parents=True, exist_ok=True)
        scene.write_bytes(b"")
        for k in range(PER_SCENE):
            d = 2.0 + 0.25 * k
            episodes.append(Episode(f"{s}-{k}", f"gen/gen_{s:03d}.glb", [0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0],
                                    [Goal([0.0, 0.0, -d], 0.2)], {"geodesic_distance": d}))
    write_split(str(root / "pointnav" / "train"), episodes)
    return {"scenes_dir": str(root / "scenes"), "data_path": str(root / "pointnav" / "{split}" / "{split}.json.gz"),
            "count": len(episodes)}


def options(data, *extra: str, **kw) -> HabitatLabOptions:
    from v03_standin import register

    overrides = [f"habitat.simulator.type={register(HABITAT)}", "habitat.environment.max_episode_steps=20",
                 "habitat.simulator.agents.main_agent.sim_sensors.depth_sensor.width=8",
                 "habitat.simulator.agents.main_agent.sim_sensors.depth_sensor.height=6",
                 "habitat.simulator.agents.main_agent.sim_sensors.rgb_sensor.width=8",
                 "habitat.simulator.agents.main_agent.sim_sensors.rgb_sensor.height=6", *extra]
    base = dict(config=TASK, overrides=overrides, dataset=data["data_path"], split="train",
                scenes_dir=data["scenes_dir"], gpu_device_id=-1, success_measure="success")
    base.update(kw)
    return HabitatLabOptions(**base)


def make(data, spec=None, *extra, **kw) -> HabitatLabVecEnv:
    return HabitatLabVecEnv(options(data, *extra, **kw), spec or EnvSpec(num_envs=2, seed=0), api=Api(HABITAT))


def test_v03_path_is_chosen_and_configs_set_through_hydra(data):
    api = Api(HABITAT)
    assert not api.v2 and api.version >= (0, 3)
    env = make(data, EnvSpec(num_envs=1, seed=0, gpu_device_id=3), gpu_device_id=-2)
    try:
        cfg = env.habitat_envs[0]._config
        assert cfg.simulator.habitat_sim_v0.gpu_device_id == 3  # the rank's device, set in 0.3.x's keys
        assert cfg.dataset.data_path == data["data_path"] and cfg.environment.max_episode_steps == 20
        assert env.actions.names == ["stop", "move_forward", "turn_left", "turn_right"]
    finally:
        env.close()


def test_v03_spaces_reward_stop_and_measures(data):
    env = make(data)
    try:
        space = env.observation_space
        assert space["depth"] == gymnasium.spaces.Box(0.0, 1.0, (6, 8, 1), np.float32)
        assert space["rgb"].dtype == np.uint8 and space["pointgoal_with_gps_compass"].shape == (2,)
        assert env.action_space == gymnasium.spaces.Discrete(4)
        obs = env.reset()
        start = obs["pointgoal_with_gps_compass"][:, 0].copy()  # polar goal: distance, angle
        res = env.step(np.array([1, 1]))  # MOVE_FORWARD, toward the goal
        assert np.allclose(res.obs["pointgoal_with_gps_compass"][:, 0], start - 0.25, atol=1e-4)
        assert np.allclose(res.reward, -0.01 + 0.25, atol=1e-4)  # slack + decrease of distance_to_goal
        res = env.step(np.array([0, 2]))  # env 0 STOPs far from the goal; env 1 turns
        assert res.terminated.tolist() == [True, False] and len(res.episodes) == 1
        m = res.episodes[0].metrics
        assert m["success"] == 0.0 and m["spl"] == 0.0 and m["length"] == 2.0
        assert m["distance_to_goal"] == pytest.approx(start[0] - 0.25, abs=1e-4)
        assert "distance_to_goal_reward" in m  # any scalar measure of the task is a metric
    finally:
        env.close()


def test_v03_success_and_step_limit(data):
    env = make(data, EnvSpec(num_envs=1, seed=0), "habitat.task.end_on_success=False")
    try:
        goal = float(env.reset()["pointgoal_with_gps_compass"][0, 0])
        for _ in range(int(round(goal / 0.25))):
            res = env.step(np.array([1]))
        res = env.step(np.array([0]))
        assert res.terminated.all()
        m = res.episodes[0].metrics
        assert m["success"] == 1.0 and m["spl"] == pytest.approx(1.0, abs=1e-3)
        assert res.reward[0] == pytest.approx(-0.01 + 2.5, abs=1e-4)
        env.reset()
        for k in range(20):
            res = env.step(np.array([2]))
        assert res.truncated.all() and not res.terminated.any() and res.episodes[0].metrics["length"] == 20
    finally:
        env.close()


def test_v03_episodes_exactly_once_over_ranks_workers_envs(data):
    seen = collections.Counter()
    for rank in range(2):
        for worker in range(2):
            env = make(data, EnvSpec(num_envs=2, seed=rank, rank=rank, world_size=2, worker_index=worker,
                                     worker_count=2))
            try:
                for eps in env.assigned_episodes():
                    seen.update(f"{ep.scene_id}/{ep.episode_id}" for ep in eps)
            finally:
                env.close()
    assert len(seen) == data["count"] and set(seen.values()) == {1}


def test_v03_scene_change_keeps_the_renderer_and_state_replays_the_order(data):
    env = make(data, EnvSpec(num_envs=1, seed=0), shuffle=False)  # one env: all 3 scenes
    try:
        snapshot = env.state_dict()
        played = []
        env.reset()
        for _ in range(data["count"]):
            played.append(env.current_episodes()[0].episode_id)
            env.step(np.array([0]))
        assert sorted(played) == sorted(f"{s}-{k}" for s in range(SCENES) for k in range(PER_SCENE))
        loads = env.habitat_envs[0].sim.scene_loads
        assert len(loads) >= SCENES and not any(close for _, close in loads[1:])
        env.load_state_dict(snapshot)
        env.reset()
        assert env.current_episodes()[0].episode_id == played[0]
    finally:
        env.close()
    assert env.habitat_envs == []


def test_v03_bad_inputs_are_one_clear_error(data, tmp_path):
    with pytest.raises(EnvError, match="no such habitat-lab task config"):
        make(data, config="benchmark/nav/pointnav/no_such_task.yaml")
    with pytest.raises(EnvError, match="could not load"):
        make(data, None, "habitat.simulator.not_a_key=1")
    with pytest.raises(EnvError, match="dataset file .*does not exist"):
        make(data, split="val")
    with pytest.raises(EnvError, match="scene file .*does not exist"):
        make(data, scenes_dir=str(tmp_path))


def test_v03_state_of_other_episodes_is_refused(data):
    """Ranks 2 and 3 of 4 play as many episodes, of different scenes: one's state does not fit the other."""
    first = make(data, EnvSpec(num_envs=1, seed=0, rank=2, world_size=4))
    state = first.state_dict()
    first.close()
    other = make(data, EnvSpec(num_envs=1, seed=0, rank=3, world_size=4))
    try:
        assert len(other.assigned_episodes()[0]) == len(state["assigned"][0])
        with pytest.raises(EnvError, match="other episodes per env"):
            other.load_state_dict(state)
    finally:
        other.close()


def test_v03_cost_split_moves_whole_scenes_by_measured_costs_and_a_state_keeps_the_move(data):
    """episode_split=cost during a run (issue 44): alike (nothing measured) rank 0 holds gen_000 and gen_002, rank 1
    gen_001; by these costs rank 0 would carry both slow scenes, so both ranks move (the same decision from the same
    costs), the moved envs play their new scenes from the next reset, and a saved state puts a fresh env on the
    moved scenes."""
    from ddppo.envs.scenes.dataset import scene_name

    measured = {"gen_000": 0.003, "gen_001": 0.001, "gen_002": 0.003}

    def scenes(env):
        return sorted({scene_name(ep.scene_id) for eps in env.assigned_episodes() for ep in eps})

    ranks = [make(data, EnvSpec(num_envs=2, seed=r, rank=r, world_size=2), episode_split="cost") for r in range(2)]
    try:
        assert [scenes(env) for env in ranks] == [["gen_000", "gen_002"], ["gen_001"]]
        assert [env.place_by_cost(measured) for env in ranks] == [True, True]
        assert [scenes(env) for env in ranks] == [["gen_000", "gen_001"], ["gen_002"]]
        assert [env.place_by_cost(measured) for env in ranks] == [False, False]  # placed by these already
        ranks[1].reset()
        assert ranks[1].env_scenes == ["gen_002", "gen_002"]
        ranks[1].step(np.array([1, 1]))
        fresh = make(data, EnvSpec(num_envs=2, seed=1, rank=1, world_size=2), episode_split="cost")
        try:
            fresh.load_state_dict(ranks[1].state_dict())
            assert scenes(fresh) == ["gen_002"]
        finally:
            fresh.close()
    finally:
        for env in ranks:
            env.close()


def test_v03_objectgoal_sensor_is_a_discrete_category():
    """habitat-lab 0.3.x's own ObjectGoalSensor (ObjectNav's goal) -> a Discrete observation the policy embeds."""
    import types

    from habitat.config.default_structured_configs import ObjectGoalSensorConfig
    from habitat.tasks.nav.object_nav_task import ObjectGoal, ObjectGoalSensor
    from omegaconf import OmegaConf

    from ddppo.envs.habitat_lab.spaces import convert_observation_space

    dataset = types.SimpleNamespace(category_to_task_category_id={"chair": 0, "table": 1, "bed": 2, "sofa": 3})
    sensor = ObjectGoalSensor(sim=None, config=OmegaConf.structured(ObjectGoalSensorConfig), dataset=dataset)
    space, convert = convert_observation_space(types.SimpleNamespace(spaces={"objectgoal": sensor.observation_space}))
    assert space["objectgoal"] == gymnasium.spaces.Discrete(4)
    episode = types.SimpleNamespace(object_category="sofa", goals=[ObjectGoal(position=[0.0, 0.0, 0.0], object_id="1")],
                                    episode_id="0")
    assert int(convert({"objectgoal": sensor.get_observation(None, episode=episode)})["objectgoal"]) == 3


@pytest.mark.parametrize("task", ["pointnav", "imagenav", "objectnav"])
def test_v03_shipped_task_config_is_its_hydra_twin(task):
    """configs/habitat_lab/<task>_gen_task.yaml (0.2.x keys) loads as its twin <task>_gen_task_v03.yaml on 0.3.x,
    with the same task, sensors and measures; a path naming the twin itself loads it too."""
    shipped = REPO / "configs" / "habitat_lab" / f"{task}_gen_task.yaml"
    api = Api(HABITAT)
    assert api.task_config_for_version(str(shipped)) == str(shipped.with_name(f"{task}_gen_task_v03.yaml"))
    for path in (str(shipped), f"configs/habitat_lab/{task}_gen_task.yaml", str(shipped.with_name(
            f"{task}_gen_task_v03.yaml"))):
        cfg = api.load_config(path, ["habitat.environment.max_episode_steps=7"]).habitat
        assert list(cfg.task.actions) == ["stop", "move_forward", "turn_left", "turn_right"]
        assert list(cfg.task.measurements)[:4] == ["distance_to_goal", "success", "spl", "soft_spl"]
        assert cfg.environment.max_episode_steps == 7 and cfg.simulator.habitat_sim_v0.gpu_device_id == -1
    sensors = cfg.simulator.agents.main_agent.sim_sensors
    expected = {"pointnav": (["depth_sensor"], ["pointgoal_with_gps_compass_sensor"], "PointNav-v1"),
                "imagenav": (["rgb_sensor", "depth_sensor"], ["imagegoal_sensor"], "PointNav-v1"),
                "objectnav": (["rgb_sensor", "depth_sensor"], ["objectgoal_sensor", "compass_sensor", "gps_sensor"],
                              "ObjectNav-v1")}[task]
    assert (list(sensors), list(cfg.task.lab_sensors), cfg.dataset.type) == expected
    size = 32 if task == "imagenav" else 64  # ImageNav: 32x32 in its task configs (a CPU-sized learner)
    assert all(s.width == size and s.height == size for s in sensors.values())


def test_v03_max_episode_steps_option_sets_the_limit(data):
    """env.habitat_lab.max_episode_steps sets the limit in the installed version's key; 0 keeps the task's."""
    env = make(data, EnvSpec(num_envs=1, seed=0), max_episode_steps=3)
    try:
        assert env.habitat_envs[0]._config.environment.max_episode_steps == 3
        env.reset()
        res = [env.step(np.array([2])) for _ in range(3)][-1]
        assert res.truncated.all() and res.episodes[0].metrics["length"] == 3
    finally:
        env.close()
    env = make(data, EnvSpec(num_envs=1, seed=0))
    try:
        assert env.habitat_envs[0]._config.environment.max_episode_steps == 20  # options()'s override
    finally:
        env.close()
