"""The gymnasium adapter: dict observations, same-step auto-reset, episode stats, seeding."""

import numpy as np
import pytest

from ddppo.envs.base import EnvError, VecEnv, fresh_reset, restores_state
from ddppo.envs.registry import make_vec_env
from ddppo.envs.base import EnvSpec


def make(env_id, num_envs=4, seed=0, **options):
    return make_vec_env(f"gym:{env_id}", options, EnvSpec(num_envs=num_envs, seed=seed))


def test_cartpole_spaces_and_episodes_with_final_obs():
    env = make("CartPole-v1")
    assert isinstance(env, VecEnv)
    assert list(env.observation_space.spaces) == ["state"] and env.action_space.n == 2
    obs = env.reset()
    assert obs["state"].shape == (4, 4) and obs["state"].dtype == np.float32
    rng = np.random.default_rng(0)
    episodes, steps = [], np.zeros(4, int)
    for _ in range(300):
        res = env.step(rng.integers(0, 2, 4))
        steps += 1
        for ep in res.episodes:
            i = ep.env_index
            assert res.done[i] and ep.metrics["return"] == ep.metrics["length"] == steps[i]
            final, fresh = res.final_obs["state"][i], res.obs["state"][i]
            assert abs(final[0]) > 2.4 or abs(final[2]) > 0.2094  # the terminal state, past a limit
            assert np.all(np.abs(fresh) <= 0.05)  # a freshly reset state
            steps[i] = 0
        episodes += res.episodes
    assert len(episodes) > 10
    env.close()


def test_max_episode_steps_override_truncates():
    env = make("CartPole-v1", num_envs=2, max_episode_steps=3)
    env.reset()
    results = [env.step(np.array([0, 1])) for _ in range(3)]
    assert not results[1].done.any()
    assert results[2].truncated.all() and not results[2].terminated.any()
    assert [e.metrics["length"] for e in results[2].episodes] == [3.0, 3.0]


def test_pendulum_box_actions_are_clipped():
    env = make("Pendulum-v1", num_envs=3, max_episode_steps=10)
    assert env.action_space.shape == (1,)
    assert env.reset()["state"].shape == (3, 3)
    res = env.step(np.full((3, 1), 100.0))  # far outside [-2, 2]: clipped, not an error
    assert res.reward.shape == (3,) and res.reward.dtype == np.float32
    for _ in range(9):
        res = env.step(np.zeros((3, 1)))
    assert res.truncated.all() and len(res.episodes) == 3


def test_seeding_is_deterministic_and_distinct_per_sub_env():
    first = make("CartPole-v1", seed=5).reset()["state"]
    np.testing.assert_array_equal(first, make("CartPole-v1", seed=5).reset()["state"])
    assert len({row.tobytes() for row in first}) == 4
    assert not np.array_equal(first, make("CartPole-v1", seed=6).reset()["state"])


def test_state_round_trip_starts_new_episodes():
    env = make("CartPole-v1", num_envs=2)
    first = env.reset()["state"]
    for _ in range(50):
        env.step(np.zeros(2, int))
    state = env.state_dict()
    assert state["episodes"] > 0 and state["resets"] == 1
    resumed = make("CartPole-v1", num_envs=2)
    resumed.load_state_dict(state)
    again = resumed.reset()["state"]
    assert not np.array_equal(first, again)  # not a replay of the first episodes
    np.testing.assert_array_equal(again, env.reset()["state"])  # but what the original would do next


def test_gym_envs_say_they_cannot_restore_and_reset_from_a_given_seed():
    """What a resume relies on: gym state is counters only (the caller starts fresh episodes), and
    reset(seed=u) draws them from a stream of their own, deterministic and apart from the run start's."""
    env = make("CartPole-v1", seed=5)
    assert not restores_state(env)
    run_start = env.reset()["state"]
    resumed = make("CartPole-v1", seed=5).reset(seed=7)["state"]
    assert not np.isclose(run_start, resumed).all(axis=1).any()
    np.testing.assert_array_equal(resumed, make("CartPole-v1", seed=5).reset(seed=7)["state"])
    assert not np.array_equal(resumed, make("CartPole-v1", seed=5).reset(seed=8)["state"])
    np.testing.assert_array_equal(fresh_reset(make("CartPole-v1", seed=5), 7)["state"], resumed)


def test_unknown_id_names_it_and_how_to_list_ids():
    with pytest.raises(EnvError, match=r"NoSuchEnv-v0.*pprint_registry"):
        make("NoSuchEnv-v0")
    with pytest.raises(EnvError, match="vectorization_mode"):
        make("CartPole-v1", vectorization_mode="threads")


@pytest.mark.parametrize("env_id,steps", [("CartPole-v1", 400), ("Pendulum-v1", 450)])
def test_sync_envs_step_exactly_as_gymnasiums_sync_vector_env(env_id, steps):
    """SyncEnvs (vectorization_mode=sync) against gymnasium's own SyncVectorEnv in same-step autoreset mode,
    from the same seeds and actions: every observation, reward, flag and final observation equal (terminations
    and resets on CartPole, time-limit truncations on Pendulum)."""
    import gymnasium

    from ddppo.envs.gym import SyncEnvs

    ours = SyncEnvs([gymnasium.make(env_id) for _ in range(3)])
    theirs = gymnasium.make_vec(env_id, num_envs=3, vectorization_mode="sync",
                                vector_kwargs={"autoreset_mode": gymnasium.vector.AutoresetMode.SAME_STEP})
    np.testing.assert_array_equal(ours.reset(seed=[1, 2, 3])[0], theirs.reset(seed=[1, 2, 3])[0])
    space = theirs.action_space
    space.seed(0)
    finals = 0
    for _ in range(steps):
        actions = space.sample()
        a, b = ours.step(actions), theirs.step(actions)
        for x, y in zip(a[:4], b[:4]):
            np.testing.assert_array_equal(x, y)
        for i in np.flatnonzero(a[2] | a[3]):
            np.testing.assert_array_equal(a[4]["final_obs"][i], b[4]["final_obs"][i])
            finals += 1
    assert finals >= 3
    ours.close()
    theirs.close()
