"""gridnav's memory task (env.gridnav.goal_visible_steps): the goal vector for an episode's first K steps only,
so that no memoryless policy can tell goals apart afterwards; and its step counter survives save/restore."""

from __future__ import annotations

import numpy as np

from ddppo.envs.base import EnvSpec
from ddppo.envs.gridnav.maps import parse_ascii
from ddppo.envs.gridnav.env import MOVE_FORWARD, STOP, TURN_LEFT, TURN_RIGHT, GridNav
from ddppo.envs.gridnav.options import GridNavOptions

F, L, R = MOVE_FORWARD, TURN_LEFT, TURN_RIGHT
EAST = 0

ROOM = parse_ascii("""
########
#......#
#......#
#......#
#......#
########
""")


def memory_env(k, num_envs=2, **overrides):
    env = GridNav(GridNavOptions(min_geodesic=1.0, goal_visible_steps=k, **overrides),
                  EnvSpec(num_envs=num_envs, seed=0), maps=[ROOM])
    env.reset()
    return env


def test_the_goal_vector_is_shown_for_the_first_k_observations_then_zero():
    env = memory_env(3, num_envs=1)
    env.set_episode(0, start=(2, 1), goal=(3, 5), heading=EAST)
    seen = [env.observe()["pointgoal"][0]]
    seen += [env.step(np.array([a])).obs["pointgoal"][0] for a in (L, R, F, F, F)]
    assert all(np.linalg.norm(p) > 0 for p in seen[:3])  # steps 0, 1, 2
    assert all(not p.any() for p in seen[3:])
    always = memory_env(0, num_envs=1)
    always.set_episode(0, start=(2, 1), goal=(3, 5), heading=EAST)
    assert all(always.step(np.array([a])).obs["pointgoal"][0].any() for a in (L, R, F, F, F))


def test_after_k_steps_episodes_with_different_goals_look_identical():
    """The same start and actions, different goals: the observation streams differ while the goal is shown
    and are identical afterwards, so no policy without memory can act differently on the two."""
    env = memory_env(2)
    env.set_episode(0, start=(2, 1), goal=(1, 6), heading=EAST)
    env.set_episode(1, start=(2, 1), goal=(4, 2), heading=EAST)
    streams = [env.observe()]
    for a in (F, L, F, R, F, F, L, R, F):
        res = env.step(np.array([a, a]))
        assert not res.done.any()
        streams.append(res.obs)
    for t, obs in enumerate(streams):
        same = all(np.array_equal(v[0], v[1]) for v in obs.values())
        assert same == (t >= 2), t
    # ... while the rewards (what the policy learns from, not what it acts on) still tell them apart
    assert env.geodesic_distance()[0] != env.geodesic_distance()[1]


def test_a_new_episode_shows_its_goal_again():
    env = memory_env(1, num_envs=1, max_episode_steps=3)
    env.set_episode(0, start=(2, 1), goal=(3, 5), heading=EAST)
    env.step(np.array([F]))
    assert not env.observe()["pointgoal"].any()
    res = env.step(np.array([STOP]))  # ends the episode; the fresh one's first observation shows the goal
    assert res.done[0] and res.obs["pointgoal"][0].any() and not res.final_obs["pointgoal"][0].any()


def test_the_visibility_counter_survives_save_and_restore():
    env = memory_env(4, num_envs=3)
    twin = memory_env(4, num_envs=3)
    actions = np.random.default_rng(3).integers(1, 4, (12, 3))  # no STOP: the counter only grows
    for a in actions[:2]:
        env.step(a)
    twin.load_state_dict(env.state_dict())
    for a in actions[2:]:
        mine, theirs = env.step(a), twin.step(a)
        for k in mine.obs:
            np.testing.assert_array_equal(mine.obs[k], theirs.obs[k])
    assert not env.observe()["pointgoal"].any()  # past step 4 in every env: hidden in both alike
