"""gridnav as gymnasium ids (envs/gridnav/gym_ids.py): registered by importing ddppo.envs, each variant with its shipped
config's options, one env playing exactly the batched env's episodes, the ended episode's metrics in info."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest

import ddppo.envs  # noqa: F401  (registers the ids)
from ddppo.envs.base import EnvSpec
from ddppo.envs.gridnav.env import GridNav
from ddppo.envs.gridnav.gym_ids import VARIANTS, GridNavEnv, shipped_options
from ddppo.envs.gridnav.options import GridNavOptions


def test_every_variant_is_made_by_its_id_with_its_shipped_options():
    shapes = {}
    for env_id in VARIANTS:
        env = gymnasium.make(env_id)
        obs, _ = env.reset(seed=0)
        assert env.observation_space.contains(obs) and env.action_space == gymnasium.spaces.Discrete(4)
        shapes[env_id] = obs["depth"].shape
        env.close()
    assert shapes["GridNav-v0"] == (16,) and shapes["GridNavDepth-v0"] == (16, 32, 1)
    assert gymnasium.make("GridNavMemory-v0").unwrapped.env.options.goal_visible_steps == 1
    assert shipped_options("gridnav_memory")["goal_visible_steps"] == 1
    assert set(gymnasium.make("GridNav-v0", camera="rgb").reset()[0]) == {"pointgoal", "rgb"}
    with pytest.raises(TypeError, match=r"\['no_such'\] are not gridnav options"):
        gymnasium.make("GridNav-v0", no_such=1)


def test_one_env_plays_the_batched_env_s_episode_and_ends_it_with_its_metrics():
    env = GridNavEnv(seed=3, max_episode_steps=40)
    batched = GridNav(GridNavOptions(max_episode_steps=40), EnvSpec(num_envs=1, seed=3))
    obs, _ = env.reset(seed=5)
    want = batched.reset(5)
    rng = np.random.default_rng(0)
    for _ in range(200):
        assert all(np.array_equal(obs[k], want[k][0]) for k in want)
        action = int(rng.integers(4))
        obs, reward, terminated, truncated, info = env.step(action)
        res = batched.step(np.array([action]))
        assert reward == pytest.approx(float(res.reward[0]))
        if terminated or truncated:
            assert info["metrics"] == res.episodes[0].metrics and info["metrics"]["length"] <= 40
            assert all(np.array_equal(obs[k], res.final_obs[k][0]) for k in obs)  # the ended episode's last
            return
        want = res.obs
    pytest.fail("no episode ended in 200 steps of a 40-step limit")
