"""The synthetic env: episodes, reward, cost knobs, determinism, state."""

import time

import numpy as np
import pytest

from ddppo.envs.base import EnvError, VecEnv
from ddppo.envs.synthetic.options import SyntheticOptions
from ddppo.envs.registry import make_vec_env
from ddppo.envs.base import EnvSpec
from ddppo.envs.synthetic.env import SyntheticEnv, SyntheticFailure


def make(num_envs=4, seed=0, rank=0, **overrides):
    return make_vec_env("synthetic", overrides, EnvSpec(num_envs=num_envs, seed=seed, rank=rank))


def test_spaces_and_fixed_length_truncated_episodes():
    env = make(num_envs=3, episode_length=5, obs_dim=6, num_actions=3)
    assert isinstance(env, VecEnv) and isinstance(env, SyntheticEnv)
    obs = env.reset()
    assert obs["obs"].shape == (3, 6) and obs["obs"].dtype == np.float32
    assert env.action_space.n == 3
    for step in range(1, 11):
        res = env.step(np.zeros(3, int))
        assert not res.terminated.any()
        assert res.truncated.all() == (step % 5 == 0) and res.truncated.any() == (step % 5 == 0)
        if step % 5 == 0:
            assert [e.env_index for e in res.episodes] == [0, 1, 2]
            assert all(e.metrics["length"] == 5 for e in res.episodes)
            assert not np.array_equal(res.final_obs["obs"], res.obs["obs"])


def test_best_actions_earn_one_per_step_and_others_less():
    env = make(num_envs=8, episode_length=10)
    obs = env.reset()
    returns = []
    for _ in range(10):
        res = env.step(env.best_actions(obs))
        assert np.all(res.reward == 1.0)
        obs = res.obs
        returns += [e.metrics["return"] for e in res.episodes]
    assert returns == [10.0] * 8
    res = env.step((env.best_actions(obs) + 1) % 4)
    assert np.all(res.reward == 0.0)


def test_deterministic_from_seed_and_state_round_trip():
    actions = np.random.default_rng(0).integers(0, 4, (60, 4))
    a, b = make(seed=3), make(seed=3)
    a.reset(), b.reset()
    for act in actions[:20]:
        np.testing.assert_array_equal(a.step(act).obs["obs"], b.step(act).obs["obs"])
    state = a.state_dict()
    c = make(seed=99)
    c.load_state_dict(state)
    for act in actions[20:]:
        ra, rc = a.step(act), c.step(act)
        np.testing.assert_array_equal(ra.obs["obs"], rc.obs["obs"])
        np.testing.assert_array_equal(ra.reward, rc.reward)
        assert [e.metrics for e in ra.episodes] == [e.metrics for e in rc.episodes]
    assert not np.array_equal(make(seed=4).reset()["obs"], make(seed=3).reset()["obs"])


def test_step_sleeps_longer_on_slow_ranks():
    fast = make(rank=0, step_sleep_s=0.02, slow_ranks=[1], slow_factor=4.0)
    slow = make(rank=1, step_sleep_s=0.02, slow_ranks=[1], slow_factor=4.0)
    for env, least in ((fast, 0.02), (slow, 0.08)):
        env.reset()
        start = time.perf_counter()
        env.step(np.zeros(4, int))
        assert time.perf_counter() - start >= least


def test_step_compute_and_fail_at_step():
    env = make(step_compute=32, fail_at_step=3)
    env.reset()
    env.step(np.zeros(4, int))
    env.step(np.zeros(4, int))
    with pytest.raises(SyntheticFailure, match="step 3"):
        env.step(np.zeros(4, int))


def test_bad_options_are_reported():
    with pytest.raises(EnvError, match="obs_dim"):
        SyntheticEnv(SyntheticOptions(obs_dim=0), EnvSpec(num_envs=1, seed=0))
