"""The habitat PointNav VecEnv on the grid double: protocol, partitioning, resume, errors, expert."""

import dataclasses
import json

import numpy as np
import pytest

from ddppo.envs.base import EnvError, VecEnv, env_scenes
from ddppo.field_metadata import section_problems
from ddppo.envs.scenes.dataset import scene_name, write_episodes
from ddppo.envs.habitat.env import HabitatPointNavEnv, make_habitat_pointnav
from ddppo.envs.habitat.follower import ShortestPathFollower
from ddppo.envs.habitat.options import HabitatOptions
from ddppo.envs.scenes.sim import habitat_sim_available
from ddppo.envs.registry import make_vec_env
from ddppo.envs.base import EnvSpec

METRICS = {"return", "length", "success", "spl", "soft_spl", "distance_to_goal", "collisions"}


def test_protocol_spaces_and_auto_reset(make_options):
    env = make_habitat_pointnav(make_options(max_episode_steps=5), EnvSpec(num_envs=3, seed=1))
    try:
        assert isinstance(env, VecEnv)
        obs = env.reset()
        assert set(obs) == {"depth", "pointgoal_with_gps_compass"}
        for key, space in env.observation_space.spaces.items():
            assert obs[key].shape == (3, *space.shape) and obs[key].dtype == space.dtype
            assert all(space.contains(row) for row in obs[key])
        rng = np.random.default_rng(0)
        finished = []
        for t in range(12):
            before = env.current_episodes()
            res = env.step(rng.integers(1, 4, size=3))  # never STOP: every episode is truncated at 5 steps
            assert res.reward.dtype == np.float32 and res.reward.shape == (3,)
            assert not res.terminated.any()
            assert res.truncated.all() == ((t + 1) % 5 == 0)
            for ep in res.episodes:
                assert set(ep.metrics) == METRICS and ep.metrics["length"] == 5 and ep.metrics["success"] == 0
                i = ep.env_index
                assert env.current_episodes()[i] is not before[i] or len(env.assigned_episodes()[i]) == 1
                assert not np.array_equal(res.final_obs["pointgoal_with_gps_compass"][i],
                                          res.obs["pointgoal_with_gps_compass"][i])
            finished += res.episodes
        assert len(finished) == 6
    finally:
        env.close()


def test_registry_builds_it(make_options):
    env = make_vec_env("habitat_pointnav", dataclasses.asdict(make_options()), EnvSpec(num_envs=1, seed=0))
    assert isinstance(env, HabitatPointNavEnv)
    env.close()


@pytest.mark.parametrize("world_size,workers,envs", [(2, 2, 2), (3, 1, 2), (1, 1, 5)])
def test_no_episode_is_collected_twice_in_a_pass(make_options, generated, world_size, workers, envs):
    seen = []
    for rank in range(world_size):
        for w in range(workers):
            spec = EnvSpec(num_envs=envs, seed=rank, rank=rank, world_size=world_size,
                           worker_index=w, worker_count=workers)
            env = HabitatPointNavEnv(make_options(), spec)
            seen += [(ep.scene_id, ep.episode_id) for part in env.assigned_episodes() for ep in part]
            env.close()
    assert sorted(seen) == sorted((ep.scene_id, ep.episode_id) for ep in generated["episodes"])


def test_state_dict_resumes_bit_identically(make_options):
    opt = make_options(max_episode_steps=7)
    spec = EnvSpec(num_envs=2, seed=4)
    rng = np.random.default_rng(1)
    acts = rng.integers(0, 4, size=(40, 2))
    a = HabitatPointNavEnv(opt, spec)
    a.reset()
    for t in range(13):
        a.step(acts[t])
    state = json.loads(json.dumps(a.state_dict()))  # plain values only
    saved_scenes = env_scenes(a)
    rest_a = [a.step(acts[t]) for t in range(13, 40)]
    b = HabitatPointNavEnv(opt, spec)
    b.reset()
    b.step(acts[0])  # diverge first, then restore
    b.load_state_dict(state)
    assert env_scenes(b) == [scene_name(ep.scene_id) for ep in b.current_episodes()] == saved_scenes
    rest_b = [b.step(acts[t]) for t in range(13, 40)]
    for ra, rb in zip(rest_a, rest_b):
        for key in ra.obs:
            assert np.array_equal(ra.obs[key], rb.obs[key])
        assert np.array_equal(ra.reward, rb.reward) and np.array_equal(ra.truncated, rb.truncated)
        assert [e.metrics for e in ra.episodes] == [e.metrics for e in rb.episodes]
    with pytest.raises(EnvError, match="does not match"):
        HabitatPointNavEnv(opt, EnvSpec(num_envs=3, seed=4)).load_state_dict(state)


def test_shortest_path_follower_succeeds_with_spl_near_one(make_options, generated):
    env = HabitatPointNavEnv(make_options(max_episode_steps=500), EnvSpec(num_envs=2, seed=0))
    env.reset()
    experts = [ShortestPathFollower(sim) for sim in env.simulators]
    done = []
    for _ in range(3000):
        goals = [np.array(ep.goals[0].position) for ep in env.current_episodes()]
        done += env.step(np.array([f.act(g) for f, g in zip(experts, goals)])).episodes
        if len(done) >= 8:
            break
    assert len(done) >= 8
    assert all(e.metrics["success"] == 1.0 for e in done)
    assert np.mean([e.metrics["spl"] for e in done]) > 0.9
    env.close()


def test_missing_scene_names_file_and_episode(make_options, generated, tmp_path):
    ep = dataclasses.replace(generated["episodes"][0], episode_id="lost-1", scene_id="gen/nowhere.glb")
    path = tmp_path / "eps.json.gz"
    write_episodes(str(path), [ep])
    with pytest.raises(EnvError, match=r"nowhere\.layout\.json.*episode 'lost-1'"):
        HabitatPointNavEnv(make_options(dataset=str(path)), EnvSpec(num_envs=1, seed=0))
    with pytest.raises(EnvError, match="does not exist"):
        HabitatPointNavEnv(make_options(dataset=str(tmp_path / "nope.json.gz")), EnvSpec(num_envs=1, seed=0))


@pytest.mark.skipif(habitat_sim_available(), reason="checks the message shown without habitat-sim")
def test_missing_habitat_sim_says_how_to_install(make_options):
    with pytest.raises(EnvError, match=r"Python 3.9, `conda install habitat-sim withbullet headless -c conda-forge "
                                       r"-c aihabitat`.*aihabitat-nightly.*python -m ddppo.envs.habitat.check"):
        HabitatPointNavEnv(make_options(backend="habitat"), EnvSpec(num_envs=1, seed=0))


@pytest.mark.skipif(habitat_sim_available(), reason="checks the message shown without habitat-sim")
def test_install_check_without_habitat_sim_exits_2_with_the_hint(capsys):
    from ddppo.envs.habitat.check import main

    assert main([]) == 2
    assert "aihabitat" in capsys.readouterr().out


def test_options_problems_are_reported():
    assert section_problems(HabitatOptions(dataset="x")) == []
    found = section_problems(HabitatOptions(dataset="", backend="unity", depth_width=0, hfov=200.0,
                                              max_depth=-1.0))
    text = "\n".join(found)
    for key in ("backend=", "dataset=", "depth_width=0", "hfov=200.0", "max_depth=-1.0"):
        assert key in text
    with pytest.raises(EnvError, match="backend"):
        HabitatPointNavEnv(HabitatOptions(dataset="x", backend="unity"), EnvSpec(num_envs=1, seed=0))


def test_subprocess_workers(make_options):
    env = make_vec_env("habitat_pointnav", dataclasses.asdict(make_options(max_episode_steps=3)),
                       EnvSpec(num_envs=2, seed=0, num_workers=2))
    try:
        obs = env.reset()
        assert obs["depth"].shape == (2, 12, 16, 1)
        assert all(s is not None and s.startswith("gen_") for s in env_scenes(env))  # the reset's episodes' scenes
        n = 0
        for _ in range(6):
            episodes = env.step(np.array([1, 2])).episodes
            n += len(episodes)
            assert all(e.scene is not None and e.next_scene == env_scenes(env)[e.env_index] for e in episodes)
        assert n == 4
    finally:
        env.close()


def test_expert_actions_are_the_followers(make_options, generated):
    """`ddppo record`'s expert (ddppo.envs.base.expert_actions): the shortest-path follower of each env."""
    from ddppo.envs.base import expert_actions

    env = HabitatPointNavEnv(make_options(max_episode_steps=500), EnvSpec(num_envs=2, seed=0))
    env.reset()
    experts = [ShortestPathFollower(sim, env.opt.success_distance, env.opt.turn_angle) for sim in env.simulators]
    done = []
    for _ in range(3000):
        goals = [np.array(ep.goals[0].position) for ep in env.current_episodes()]
        actions = expert_actions(env)
        assert actions.tolist() == [f.act(g) for f, g in zip(experts, goals)]
        done += env.step(actions).episodes
        if len(done) >= 4:
            break
    assert len(done) >= 4 and all(e.metrics["success"] == 1.0 for e in done)
    env.close()
