"""The gymnasium adapter: dict observations, same-step auto-reset, episode stats, seeding."""

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces

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


def test_unknown_id_suggests_the_registering_module():
    # ids no package registers (another test may have imported minigrid or ale_py, which register the real ones)
    with pytest.raises(EnvError, match=r"'MiniGrid-NoSuch-5x5-v0'.*env.name=gym:minigrid:MiniGrid-NoSuch-5x5-v0"):
        make("MiniGrid-NoSuch-5x5-v0")
    with pytest.raises(EnvError, match=r"env.name=gym:ale_py:ALE/NoSuchGame-v5 .*pip install ale-py"):
        make("ALE/NoSuchGame-v5")
    with pytest.raises(EnvError, match=r"'NoSuchEnv-v0'.*env.name=gym:MODULE:ID"):
        make("NoSuchEnv-v0")
    with pytest.raises(EnvError, match=r"did you mean CartPole-v1\?"):
        make("CartPole-v2")
    with pytest.raises(EnvError, match="vectorization_mode"):
        make("CartPole-v1", vectorization_mode="threads")


@pytest.mark.parametrize("env_id,steps", [("CartPole-v1", 400), ("Pendulum-v1", 450)])
def test_sync_envs_step_exactly_as_gymnasiums_sync_vector_env(env_id, steps):
    """SyncEnvs (vectorization_mode=sync) against gymnasium's own SyncVectorEnv in same-step autoreset mode,
    from the same seeds and actions: every observation, reward, flag and final observation equal (terminations
    and resets on CartPole, time-limit truncations on Pendulum)."""
    import gymnasium

    from ddppo.envs.gym.env import SyncEnvs

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


class DictObsEnv(gymnasium.Env):
    """Every tensor-like space a package ships, in one Dict observation (values from the step count), and a
    MultiDiscrete action space with a start: what the adapter converts."""

    observation_space = spaces.Dict({
        "box": spaces.Box(-1.0, 1.0, (2,), np.float32),
        "dir": spaces.Discrete(4, start=1),
        "cells": spaces.MultiDiscrete([3, 5], start=[10, 20]),
        "bits": spaces.MultiBinary(3),
        "text": spaces.Text(4, min_length=0, charset="ab"),
    })
    action_space = spaces.MultiDiscrete([2, 3], start=[5, 7])

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.actions = 0, []
        return self._obs(), {}

    def step(self, action):
        self.actions.append(np.asarray(action).tolist())
        self.t += 1
        return self._obs(), 1.0, self.t >= 3, False, {}

    def _obs(self):
        return {"box": np.full(2, 0.5, np.float32), "dir": 1 + self.t % 4, "cells": np.array([10 + self.t % 3, 24]),
                "bits": np.array([1, 0, self.t % 2], np.int8), "text": "ba"[: self.t % 3]}


class StringObsEnv(DictObsEnv):
    observation_space = spaces.Dict({"box": spaces.Box(-1.0, 1.0, (2,), np.float32),
                                     "mission": spaces.Sequence(spaces.Discrete(3))})

    def _obs(self):
        return {"box": np.zeros(2, np.float32), "mission": (1, 2)}


for _id, _cls in (("DdppoTestDictObs-v0", DictObsEnv), ("DdppoTestStringObs-v0", StringObsEnv)):
    if _id not in gymnasium.registry:
        gymnasium.register(_id, entry_point=_cls, disable_env_checker=True)


def test_dict_keys_as_packages_ship_them_become_tensors():
    env = make("DdppoTestDictObs-v0", num_envs=2)
    space = env.observation_space
    assert space["dir"] == spaces.Discrete(4) and space["cells"] == spaces.MultiDiscrete([3, 5])
    assert space["bits"] == spaces.Box(0.0, 1.0, (3,), np.float32)
    assert space["text"] == spaces.MultiDiscrete([3, 3, 3, 3])  # 'a', 'b' -> 1, 2; 0 pads
    obs = env.reset()
    assert obs["dir"].tolist() == [0, 0] and obs["cells"].tolist() == [[0, 4], [0, 4]]
    assert obs["text"].tolist() == [[0, 0, 0, 0]] * 2 and obs["bits"].dtype == np.float32
    obs = env.step(np.array([[0, 0], [1, 2]])).obs
    assert obs["dir"].tolist() == [1, 1] and obs["cells"][:, 0].tolist() == [1, 1]
    assert obs["text"].tolist() == [[2, 0, 0, 0]] * 2 and obs["bits"][:, 2].tolist() == [1.0, 1.0]
    res = env.step(np.zeros((2, 2), np.int64))
    res = env.step(np.zeros((2, 2), np.int64))
    assert res.done.all() and res.final_obs["text"].tolist() == [[0, 0, 0, 0]] * 2  # t = 3: ""
    assert res.final_obs["dir"].tolist() == [3, 3] and res.obs["dir"].tolist() == [0, 0]
    for key, value in obs.items():
        assert space[key].contains(value[0].astype(space[key].dtype)), key
    env.close()


def test_multidiscrete_actions_reach_the_env_with_its_start():
    env = make("DdppoTestDictObs-v0", num_envs=2)
    env.reset()
    env.step(np.array([[0, 0], [1, 2]]))
    assert [e.unwrapped.actions for e in env._env.envs] == [[[5, 7]], [[6, 9]]]


def test_a_key_without_a_tensor_is_refused_naming_it_and_both_fixes_then_dropped():
    with pytest.raises(EnvError, match=r"observation key 'mission' is a Sequence .*env.gym.drop_keys=\[mission\].*"
                                       r"env.name=gym:MODULE:ID"):
        make("DdppoTestStringObs-v0")
    env = make("DdppoTestStringObs-v0", drop_keys=["mission"])
    assert list(env.observation_space.spaces) == ["box"] and env.reset()["box"].shape == (4, 2)
    with pytest.raises(EnvError, match=r"drop_keys=\['nope'\].* no observation key 'nope'; its keys are box, mission"):
        make("DdppoTestStringObs-v0", drop_keys=["nope"])
    with pytest.raises(EnvError, match=r"drop_keys=\['x'\].*a Box observation"):
        make("CartPole-v1", drop_keys=["x"])


def test_minigrid_raw_observation_with_the_mission_dropped():
    pytest.importorskip("minigrid")
    with pytest.raises(EnvError, match=r"'mission' is a MissionSpace .*drop_keys=\[mission\]"):
        make("minigrid:MiniGrid-DoorKey-5x5-v0")
    env = make("minigrid:MiniGrid-DoorKey-5x5-v0", num_envs=2, drop_keys=["mission"])
    assert env.observation_space == spaces.Dict({"direction": spaces.Discrete(4),
                                                 "image": spaces.Box(0, 255, (7, 7, 3), np.uint8)})
    obs = env.reset()
    assert obs["image"].shape == (2, 7, 7, 3) and obs["direction"].shape == (2,)
    env.close()


def test_async_vector_env_drops_keys_and_survives_asking_for_scenes():
    """gymnasium's AsyncVectorEnv shuts a worker down on get_attr of a missing attribute: the adapter asks whether
    the envs have `scene_id` before reading it (an env without one used to leave dead workers behind)."""
    env = make("DdppoTestStringObs-v0", num_envs=2, drop_keys=["mission"], vectorization_mode="async")
    assert list(env.observation_space.spaces) == ["box"]
    assert env.reset()["box"].shape == (2, 2) and env.step(np.zeros((2, 2), np.int64)).reward.tolist() == [1.0, 1.0]
    env.close()
