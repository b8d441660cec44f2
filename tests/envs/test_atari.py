"""env.gym.atari: ALE ids through ale-py's AtariVectorEnv (envs/gym/atari.py), seen by the learner with clipped rewards
and a termination at each lost life while episodes (returns, ddppo eval) are whole games. Skips without ale-py."""

from __future__ import annotations

import numpy as np
import pytest

from ddppo.envs.base import EnvError, EnvSpec
from ddppo.envs.registry import make_vec_env

pytest.importorskip("ale_py")


def make(num_envs=2, **options):
    return make_vec_env("gym:ale_py:ALE/Breakout-v5", {"atari": True, **options}, EnvSpec(num_envs=num_envs, seed=3))


class ScriptedALE:
    """Stands in for the AtariVectorEnv: 2 games, rewards of 4 (unclipped), env 0 loses a life at step 2 and its
    game ends at step 3 (autoreset, same step)."""

    def __init__(self):
        self.t = 0

    def step(self, actions):
        self.t += 1
        lives = np.array([5 - (self.t >= 2), 5])
        terminated = np.array([self.t == 3, False])
        if self.t == 3:
            lives[0] = 5  # the next game's lives
        frames = np.full((2, 4, 84, 84), self.t, np.uint8)
        info = {"lives": lives, "final_obs": np.full((2, 4, 84, 84), 99, np.uint8)}
        return frames, np.array([4.0, 0.0]), terminated, np.zeros(2, bool), info


def test_the_learner_sees_signs_and_lost_lives_while_episodes_are_whole_games():
    env = make()
    obs = env.reset()
    assert obs["state"].shape == (2, 84, 84, 4) and obs["state"].dtype == np.uint8
    env._env.env, env._env.lives = ScriptedALE(), np.array([5, 5])
    first = env.step(np.zeros(2, np.int64))
    assert first.reward.tolist() == [1.0, 0.0] and not first.done.any()
    lost = env.step(np.zeros(2, np.int64))
    assert lost.terminated.tolist() == [True, False] and not lost.episode_start.any() and lost.episodes == []
    assert (lost.obs["state"][0] == 2).all()  # the game goes on: no reset
    over = env.step(np.zeros(2, np.int64))
    assert over.terminated.tolist() == [True, False] and over.episode_start.tolist() == [True, False]
    (episode,) = over.episodes
    assert episode.env_index == 0 and episode.metrics == {"return": 12.0, "length": 3.0}  # the score, unclipped
    assert (over.final_obs["state"][0] == 99).all()


def test_real_games_step_and_refuse_what_is_not_ale():
    env = make(num_envs=2)
    env.reset()
    results = [env.step(np.random.default_rng(0).integers(0, 4, 2)) for _ in range(5)]
    assert all(set(np.unique(r.reward)) <= {-1.0, 0.0, 1.0} for r in results)
    assert env.action_space.n == 4
    env.close()
    with pytest.raises(EnvError, match=r"env.gym.atari=true: 'CartPole-v1' is not an ALE id"):
        make_vec_env("gym:CartPole-v1", {"atari": True}, EnvSpec(num_envs=1, seed=0))
