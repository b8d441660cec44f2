"""The adapter on the real habitat-lab (0.2.x or 0.3.x, whichever is installed: its version path is picked by
ddppo.envs.habitat_lab.compat, the shipped task config by its 0.3.x twin) and the real habitat-sim, on generated
scenes; skipped where either does not import."""

from __future__ import annotations

import collections
import json
import os
import shutil

import gymnasium
import numpy as np
import pytest

from hl_testutil import POINTNAV_TASK, gpu, real_habitat_lab

HABITAT, WHY = real_habitat_lab()
pytestmark = pytest.mark.skipif(HABITAT is None, reason=WHY)

from ddppo.envs.base import EnvError, EnvSpec  # noqa: E402
from ddppo.envs.habitat_lab.compat import Api  # noqa: E402
from ddppo.envs.habitat_lab.env import HabitatLabVecEnv  # noqa: E402
from ddppo.envs.habitat_lab.options import HabitatLabOptions  # noqa: E402

EPISODES_PER_SCENE = 5
API = Api(HABITAT) if HABITAT is not None else None
V2 = API is not None and API.v2
SOFT_SPL = "softspl" if V2 else "soft_spl"  # the SoftSPL measure's uuid (0.3.x renamed it)


def key(name: str) -> str:
    """The installed version's config key for a logical name (compat's table): overrides in the right keys."""
    return API.keys[name] if name in API.keys else name


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """Three generated scenes (habitat-sim navmeshes) and a PointNav-v1 split folder, habitat-lab's layout."""
    from ddppo.envs.scenes.episode_gen import EpisodeGenParams, generate_for_scene
    from ddppo.envs.scenes.dataset import write_split
    from ddppo.envs.scenes.interface import SimSettings
    from ddppo.envs.scenes.layout import LayoutParams
    from ddppo.envs.scenes.scene_gen import generate_scenes
    from ddppo.envs.scenes.sim import HabitatSim

    root = tmp_path_factory.mktemp("habitat_lab")
    params = LayoutParams(size_min=5.0, size_max=6.0, max_rooms=2, max_furniture=1)
    scenes, note = generate_scenes(str(root / "scenes" / "gen"), 3, seed=0, params=params, gpu_device_id=gpu())
    assert all(s.navmesh and os.path.isfile(s.navmesh) for s in scenes), note
    sim = HabitatSim(SimSettings(depth_sensor=False, gpu_device_id=gpu()))
    episodes = []
    try:
        for k, s in enumerate(scenes):
            episodes += generate_for_scene(sim, s.glb, f"gen/{os.path.basename(s.glb)}", EPISODES_PER_SCENE, seed=k,
                                           params=EpisodeGenParams(min_geodesic=1.0, max_geodesic=6.0))
    finally:
        sim.close()
    write_split(str(root / "pointnav" / "train"), episodes)
    return {"root": root, "scenes_dir": str(root / "scenes"),
            "data_path": str(root / "pointnav" / "{split}" / "{split}.json.gz"), "count": len(episodes)}


def options(data, **kw) -> HabitatLabOptions:
    base = dict(config=POINTNAV_TASK, dataset=data["data_path"], split="train", scenes_dir=data["scenes_dir"],
                gpu_device_id=gpu(), max_episode_steps=40)
    base.update(kw)
    return HabitatLabOptions(**base)


def test_pointnav_spaces_stop_and_measures(data):
    env = HabitatLabVecEnv(options(data), EnvSpec(num_envs=2, seed=0))
    try:
        assert set(env.observation_space.spaces) == {"depth", "pointgoal_with_gps_compass"}
        assert env.observation_space["depth"].shape == (64, 64, 1)
        assert env.action_space == gymnasium.spaces.Discrete(4)
        obs = env.reset()
        assert obs["depth"].shape == (2, 64, 64, 1) and obs["pointgoal_with_gps_compass"].shape == (2, 2)
        res = env.step(np.zeros(2, np.int64))  # STOP: habitat-lab's task ends the episode
        assert res.terminated.all() and not res.truncated.any() and len(res.episodes) == 2
        m = res.episodes[0].metrics
        for name in ("success", "spl", SOFT_SPL, "soft_spl", "distance_to_goal", "collisions", "return", "length"):
            assert name in m, name
        assert m["length"] == 1.0 and m["success"] in (0.0, 1.0)
        assert m["distance_to_goal"] > 0.2 and m["success"] == 0.0  # episodes start >= 1 m away
        # what a trainer aggregates: the task's measures (uuids), their dict measures' flattened parts, ddppo's
        # aliases, success, return, length; every scalar metric an episode reports is among them (train/ = eval/)
        measures = ("distance_to_goal", "success", "spl", SOFT_SPL, "collisions", "collisions_count",
                    "collisions_is_collision")  # the task config's, in order
        aliases = ("soft_spl",) if V2 else ()  # 0.3.x's SoftSPL is soft_spl already
        assert env.episode_metrics == measures + aliases + ("return", "length")
        assert set(m) <= set(env.episode_metrics)
    finally:
        env.close()


def test_step_limit_is_a_truncation_and_reward_follows_distance(data):
    env = HabitatLabVecEnv(options(data, max_episode_steps=6), EnvSpec(num_envs=1, seed=1))
    try:
        env.reset()
        rewards = []
        for _ in range(5):
            res = env.step(np.array([1]))  # MOVE_FORWARD
            assert not res.done.any()
            rewards.append(float(res.reward[0]))
        res = env.step(np.array([2]))
        assert res.truncated.all() and not res.terminated.any()
        m = res.episodes[0].metrics
        assert m["length"] == 6.0 and m["success"] == 0.0
        assert m["return"] == pytest.approx(sum(rewards) + float(res.reward[0]), abs=1e-5)
    finally:
        env.close()


def test_failed_stop_reward_only_where_the_agent_stops_short(data):
    """failed_stop_reward is added where STOP ends an episode without success, not at the step limit."""
    env = HabitatLabVecEnv(options(data, failed_stop_reward=-1.0, max_episode_steps=2),
                           EnvSpec(num_envs=2, seed=0))
    try:
        env.reset()
        res = env.step(np.array([0, 2]))  # env 0 STOPs (>= 1 m away: no success), env 1 turns
        assert res.terminated[0] and not res.done[1]
        assert res.reward[0] == pytest.approx(-1.01) and res.reward[1] == pytest.approx(-0.01, abs=1e-5)
        res = env.step(np.array([2, 2]))  # env 1 reaches the step limit: truncated, no penalty
        assert res.truncated[1] and res.reward[1] == pytest.approx(-0.01, abs=1e-5)
    finally:
        env.close()


def test_episodes_split_across_ranks_workers_and_envs_exactly_once(data):
    """2 ranks x 2 workers x 2 envs over 3 scenes: every episode of the split in exactly one env, counted."""
    seen = collections.Counter()
    for rank in range(2):
        for worker in range(2):
            spec = EnvSpec(num_envs=2, seed=rank, rank=rank, world_size=2, worker_index=worker, worker_count=2)
            env = HabitatLabVecEnv(options(data), spec)
            try:
                for eps in env.assigned_episodes():
                    seen.update(f"{ep.scene_id}/{ep.episode_id}" for ep in eps)
                env.reset()
                played = {f"{ep.scene_id}/{ep.episode_id}" for ep in env.current_episodes()}
                assert played <= {f"{ep.scene_id}/{ep.episode_id}" for eps in env.assigned_episodes() for ep in eps}
            finally:
                env.close()
    assert len(seen) == data["count"] and set(seen.values()) == {1}


def test_one_pass_plays_each_assigned_episode_once_then_state_restores_the_order(data):
    env = HabitatLabVecEnv(options(data), EnvSpec(num_envs=2, seed=3))
    try:
        snapshot = env.state_dict()
        counts = [len(eps) for eps in env.assigned_episodes()]

        def one_pass():
            played = [[], []]
            env.reset()
            for i in range(2):
                played[i].append(env.current_episodes()[i].episode_id)
            while min(len(p) for p in played) < max(counts) + 1:
                res = env.step(np.zeros(2, np.int64))
                for ep in res.episodes:
                    played[ep.env_index].append(env.current_episodes()[ep.env_index].episode_id)
            return [p[:c] for p, c in zip(played, counts)]

        first = one_pass()
        assert [sorted(p) for p in first] == [sorted(ep.episode_id for ep in eps) for eps in env.assigned_episodes()]
        env.load_state_dict(snapshot)
        assert one_pass() == first  # the same order again: what eval replays for every checkpoint
    finally:
        env.close()


def test_continuous_velocity_control_is_a_box(data):
    """habitat-lab's VELOCITY_CONTROL (the one action, with linear and angular velocity arguments) -> a Box."""
    if V2:
        only_velocity = ["TASK.POSSIBLE_ACTIONS=['VELOCITY_CONTROL']"]
    else:  # the 0.3.x twin lists each action as a defaults entry: drop the four, add velocity_control
        group = "habitat/task/actions@habitat.task.actions"
        only_velocity = [f"~{group}.{a}" for a in ("stop", "move_forward", "turn_left", "turn_right")]
        only_velocity.append(f"+{group}.velocity_control=velocity_control")
    env = HabitatLabVecEnv(options(data, overrides=only_velocity, max_episode_steps=3), EnvSpec(num_envs=1, seed=0))
    try:
        assert isinstance(env.action_space, gymnasium.spaces.Box) and env.action_space.shape == (2,)
        assert env.actions.names == ["VELOCITY_CONTROL" if V2 else "velocity_control"]
        before = env.reset()["pointgoal_with_gps_compass"][0].copy()
        res = env.step(np.array([[env.action_space.high[0], env.action_space.high[1]]]))  # turn and drive
        assert not np.allclose(res.obs["pointgoal_with_gps_compass"][0], before)  # the agent moved
        for _ in range(2):
            res = env.step(np.array([[0.0, env.action_space.high[1]]]))
        assert res.truncated.all() and res.episodes[0].metrics["length"] == 3.0
    finally:
        env.close()


def test_imagenav_goal_image_through_the_shipped_config(data):
    """configs/habitat_lab_imagenav.yaml as shipped (its task config, or that one's 0.3.x twin where 0.3.x is
    installed: the 32x32 sensors are in the task configs, no version's keys in the ddppo config) on the data."""
    from ddppo.config.loading import load_config

    cfg = load_config("configs/habitat_lab_imagenav.yaml", [f"env.habitat_lab.dataset={data['data_path']}",
                                                           f"env.habitat_lab.scenes_dir={data['scenes_dir']}",
                                                           f"env.habitat_lab.gpu_device_id={gpu()}"])
    assert cfg.env.habitat_lab.config == "configs/habitat_lab/imagenav_gen_task.yaml"
    env = HabitatLabVecEnv(HabitatLabOptions(**cfg.env_options), EnvSpec(num_envs=1, seed=0))
    try:
        space = env.observation_space
        assert space["imagegoal"].dtype == np.uint8 and space["imagegoal"].shape == (32, 32, 3)
        assert space["rgb"].shape == (32, 32, 3) and space["depth"].shape == (32, 32, 1)
        goal = env.reset()["imagegoal"][0]
        for _ in range(3):
            res = env.step(np.array([2]))
        assert np.array_equal(res.obs["imagegoal"][0], goal)  # the goal view stays; the agent's view turns
        assert not np.array_equal(res.obs["rgb"][0], goal)
    finally:
        env.close()


def test_bad_inputs_are_one_clear_error(data, tmp_path):
    with pytest.raises(EnvError, match="no such habitat-lab task config"):
        HabitatLabVecEnv(options(data, config=str(tmp_path / "nope.yaml")), EnvSpec(num_envs=1, seed=0))
    with pytest.raises(EnvError, match="dataset file .*does not exist"):
        HabitatLabVecEnv(options(data, split="val"), EnvSpec(num_envs=1, seed=0))
    bad_key = "SIMULATOR.NOT_A_KEY" if V2 else "habitat.simulator.not_a_key"
    with pytest.raises(EnvError, match=f"could not load .*{bad_key}"):
        HabitatLabVecEnv(options(data, overrides=[f"{bad_key}=1"]), EnvSpec(num_envs=1, seed=0))
    broken = tmp_path / "scenes"
    shutil.copytree(data["scenes_dir"], broken)
    os.remove(broken / "gen" / "gen_001.glb")
    with pytest.raises(EnvError, match="scene file .*gen_001.glb' does not exist; needed by episode"):
        HabitatLabVecEnv(options(data, scenes_dir=str(broken)), EnvSpec(num_envs=3, seed=0))


def test_train_then_eval_every_episode_once_through_the_cli(data, tmp_path, cli):
    run = tmp_path / "run"
    common = [f"env.habitat_lab.config={POINTNAV_TASK}", f"env.habitat_lab.dataset={data['data_path']}",
              f"env.habitat_lab.scenes_dir={data['scenes_dir']}", f"env.habitat_lab.gpu_device_id={gpu()}",
              "env.habitat_lab.max_episode_steps=0",  # 0: the limit comes from the override (the option would win)
              f"env.habitat_lab.overrides=[{key('max_steps')}=30]"]  # an override, in the installed version's keys
    train = cli("train", "configs/habitat_lab_pointnav.yaml", f"run.dir={run}", "run.total_env_steps=256",
                "env.num_envs=4", "env.num_workers=2", "rollout.num_steps=32", "checkpoint.interval_updates=1",
                "policy.hidden_size=32", *common)
    assert train.returncode == 0, train
    assert "Gym has been unmaintained" not in train.stderr  # quiet logs
    evaluated = cli("eval", str(run), "env.num_envs=4", timeout=600)
    assert evaluated.returncode == 0, evaluated
    result = json.loads(next((run / "eval").glob("ckpt-*.json")).read_text())
    keys = [f"{e['episode']['scene_id']}/{e['episode']['episode_id']}" for e in result["episodes"]]
    assert result["mode"] == "dataset" and len(keys) == len(set(keys)) == data["count"]
    assert {"success", "spl"} <= set(result["metrics"])
    # every scalar habitat-lab measure reaches train/<name> (declared by the env in each of its 2 workers) and the
    # eval summary, under habitat-lab's own name, with a confidence interval
    trained = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert all(0.0 <= r[f"train/{SOFT_SPL}"] <= 1.0 and r[f"train/{SOFT_SPL}"] == r["train/soft_spl"] for r in trained)
    softspl = result["metrics"][SOFT_SPL]
    assert softspl["count"] == data["count"] and softspl["ci_method"] == "student-t"
    assert 0.0 <= softspl["ci95"][0] <= softspl["mean"] <= softspl["ci95"][1] <= 1.0
    resumed = cli("train", "configs/habitat_lab_pointnav.yaml", f"run.dir={run}", "run.total_env_steps=512",
                  "env.num_envs=4", "env.num_workers=2", "rollout.num_steps=32", "checkpoint.interval_updates=1",
                  "policy.hidden_size=32", *common)
    out = resumed.stdout + resumed.stderr
    assert resumed.returncode == 0, resumed
    assert "resumed from" in out and "fresh episodes start" in out  # habitat-lab cannot restore an episode
    assert "not restored" not in out and "does not fit" not in out  # but each env's episode order is restored


def test_missing_dataset_exits_2_with_one_line(data, tmp_path, cli):
    res = cli("train", "configs/habitat_lab_pointnav.yaml", f"run.dir={tmp_path / 'run'}",
              f"env.habitat_lab.config={POINTNAV_TASK}", f"env.habitat_lab.dataset={tmp_path}/{{split}}.json.gz",
              f"env.habitat_lab.scenes_dir={data['scenes_dir']}", "env.num_workers=0")
    assert res.returncode == 2, res
    assert "dataset file" in res.stderr and "Traceback" not in res.stderr


def test_objectgoal_sensor_of_habitat_lab_is_a_discrete_category():
    """habitat-lab's own ObjectGoalSensor (ObjectNav's goal) -> a Discrete observation the policy embeds. Its
    space and value need only the dataset's category map, not a simulator (the generated scenes have no
    semantic annotations, so ObjectNav itself cannot run on them)."""
    import types

    from habitat.tasks.nav.object_nav_task import ObjectGoal, ObjectGoalSensor

    from ddppo.envs.habitat_lab.spaces import convert_observation_space

    if V2:
        config = HABITAT.get_config().TASK.OBJECTGOAL_SENSOR
    else:
        from habitat.config.default_structured_configs import ObjectGoalSensorConfig
        from omegaconf import OmegaConf

        config = OmegaConf.structured(ObjectGoalSensorConfig)
    dataset = types.SimpleNamespace(category_to_task_category_id={"chair": 0, "table": 1, "bed": 2})
    sensor = ObjectGoalSensor(sim=None, config=config, dataset=dataset)
    space, convert = convert_observation_space(types.SimpleNamespace(spaces={"objectgoal": sensor.observation_space}))
    assert space["objectgoal"] == gymnasium.spaces.Discrete(3)
    goal = ObjectGoal(position=[0.0, 0.0, 0.0], object_id="1")
    episode = types.SimpleNamespace(object_category="table", goals=[goal], episode_id="0")
    value = convert({"objectgoal": sensor.get_observation(None, episode=episode)})["objectgoal"]
    assert int(value) == 1 and value.dtype == np.int64
