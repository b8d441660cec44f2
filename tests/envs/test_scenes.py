"""Scenes (issue 44): placement by cost, the synthetic env's scenes, and what an episode reports."""

from __future__ import annotations

import numpy as np
import pytest

from ddppo.envs.base import EnvSpec, declared_scenes, env_scenes
from ddppo.envs.synthetic.options import SyntheticOptions
from ddppo.envs.placement import group_costs, place_scenes
from ddppo.envs.synthetic.env import SyntheticEnv


def test_contiguous_placement_deals_whole_scenes_in_order():
    assert place_scenes([4, 4], [1.0, 3.0], 2) == [[0, 0, 0, 0], [1, 1, 1, 1]]


def test_cost_placement_spreads_slow_scenes_so_ranks_cost_alike():
    costs = [1.0, 3.0]
    contiguous, by_cost = place_scenes([4, 4], costs, 2), place_scenes([4, 4], costs, 2, "cost")
    assert group_costs(contiguous, costs) == [4.0, 12.0]
    assert group_costs(by_cost, costs) == [8.0, 8.0]
    assert sorted(s for g in by_cost for s in g) == [0] * 4 + [1] * 4  # every scene keeps its slots


def test_cost_placement_of_uneven_scenes():
    costs = [5.0, 1.0, 1.0, 1.0]
    placed = place_scenes([2, 2, 2, 2], costs, 4, "cost")
    loads = group_costs(placed, costs)
    assert max(loads) - min(loads) <= 4.0  # each slow slot on its own group, the cheap ones beside them
    assert [len(g) for g in placed] == [2, 2, 2, 2]


def test_an_unknown_placement_is_refused():
    with pytest.raises(ValueError, match="placement='random'"):
        place_scenes([1], [1.0], 1, "random")


def _env(rank: int, placement: str = "contiguous", world: int = 2, **kw) -> SyntheticEnv:
    opts = SyntheticOptions(num_scenes=2, scene_step_factors=[1, 3], scene_placement=placement, **kw)
    return SyntheticEnv(opts, EnvSpec(num_envs=4, seed=rank, rank=rank, world_size=world))


def test_synthetic_scenes_are_placed_declared_and_reported():
    a, b = _env(0), _env(1)
    assert declared_scenes(a) == ("scene0", "scene1")
    assert env_scenes(a) == ["scene0"] * 4 and env_scenes(b) == ["scene1"] * 4
    assert env_scenes(_env(0, "cost")) == ["scene0", "scene0", "scene1", "scene1"]
    obs = a.reset()
    assert obs["obs"].shape == (4, 8 + 2) and (obs["obs"][:, -2:] == [1, 0]).all()  # the scene's one-hot last
    for _ in range(31):
        a.step(a.best_actions({"obs": a._obs}))
    res = a.step(a.best_actions({"obs": a._obs}))
    assert [e.scene for e in res.episodes] == ["scene0"] * 4
    assert all(e.metrics["success"] == 1.0 for e in res.episodes)  # the optimal policy earns every step


def test_scenes_have_their_own_mapping_the_same_on_every_rank():
    a, b = _env(0, "cost"), _env(1, "cost")
    x = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)
    one_hot = np.eye(2, dtype=np.float32)[[0, 0, 1, 1]]
    obs = {"obs": np.concatenate([x, one_hot], axis=1)}
    assert (a.best_actions(obs) == b.best_actions(obs)).all()  # rank-independent scenes
    # the same noise in both scenes: scene 0 (envs 0, 1) and scene 1 (envs 2, 3) reward different actions somewhere
    rewarded = [a.best_actions({"obs": np.concatenate([np.repeat(x[i:i + 1], 4, 0), one_hot], axis=1)})
                for i in range(4)]
    assert any(r[0] != r[2] for r in rewarded)


def test_without_scenes_the_env_is_unchanged():
    env = SyntheticEnv(SyntheticOptions(), EnvSpec(num_envs=2, seed=0))
    assert declared_scenes(env) == () and env_scenes(env) == [None, None]
    assert env.reset()["obs"].shape == (2, 8)


class _SceneEnv:
    """A gymnasium env of 2-step episodes that alternates its scene ("a", "b") at every reset."""

    def __new__(cls):
        import gymnasium

        class SceneEnv(gymnasium.Env):
            observation_space = gymnasium.spaces.Box(-1, 1, (2,), np.float32)
            action_space = gymnasium.spaces.Discrete(2)
            scenes = ["a", "b", "c"]

            def __init__(self):
                self.scene_id, self._resets, self._t = "a", 0, 0

            def reset(self, seed=None, options=None):
                super().reset(seed=seed)
                self.scene_id = "ab"[self._resets % 2]
                self._resets += 1
                self._t = 0
                return np.zeros(2, np.float32), {}

            def step(self, action):
                self._t += 1
                return np.zeros(2, np.float32), 1.0, self._t >= 2, False, {}

        return SceneEnv()


def test_a_gym_env_names_its_scenes_with_scene_id():
    import gymnasium

    from ddppo.envs.gym.env import make_gym
    from ddppo.envs.gym.options import GymOptions

    gymnasium.register("DdppoSceneTest-v0", entry_point=_SceneEnv)
    env = make_gym("DdppoSceneTest-v0", GymOptions(), EnvSpec(num_envs=2, seed=0))
    assert declared_scenes(env) == ("a", "b", "c")
    env.reset()
    assert env_scenes(env) == ["a", "a"]  # read at construction
    env.step(np.zeros(2, np.int64))
    res = env.step(np.zeros(2, np.int64))
    assert [e.scene for e in res.episodes] == ["a", "a"]  # the finished episodes' scene, not the next one's
    assert [e.next_scene for e in res.episodes] == ["b", "b"] and env_scenes(env) == ["b", "b"]  # autoreset's
    env.step(np.zeros(2, np.int64))
    res = env.step(np.zeros(2, np.int64))
    assert [e.scene for e in res.episodes] == ["b", "b"]
    env.reset()
    assert env_scenes(env) == ["b", "b"]  # the scenes of a reset (the fourth of each env)
    env.close()


def test_gridnav_scenes_are_its_layouts_by_number_of_rooms():
    """A generated map's scene is its number of rooms: a few layouts, the same names on every rank, not one per map
    (walls, hence more than one room, exactly where a map has blocked interior cells without furniture)."""
    from ddppo.envs.gridnav.env import GridNav
    from ddppo.envs.gridnav.options import GridNavOptions

    env = GridNav(GridNavOptions(num_maps=64, obstacle_density=0.0), EnvSpec(num_envs=8, seed=0))
    assert declared_scenes(env) == ("rooms2", "rooms3", "rooms4")  # max_room_splits=3: 1 to 3 walls
    walls = env.tables.occupancy[:, 1:-1, 1:-1].any(axis=(1, 2))
    rooms = np.array([int(env.scenes[s][len("rooms"):]) for s in env._map_scene])
    assert (walls == (rooms > 1)).all()
    assert declared_scenes(GridNav(GridNavOptions(num_maps=8, max_room_splits=0), EnvSpec(num_envs=1, seed=1))) \
        == ("rooms1",)
    assert declared_scenes(GridNav(GridNavOptions(num_maps=64), EnvSpec(num_envs=1, seed=5))) == env.scenes


def test_gridnav_episodes_report_their_scene_and_the_next():
    _check_scenes_followed(0)


def test_subprocess_workers_pass_on_each_episodes_next_scene_and_keep_env_scenes():
    _check_scenes_followed(2)


def _check_scenes_followed(workers: int) -> None:
    """After a reset, `env_scenes` are the new episodes' scenes; each finished episode reports its scene and the
    next one's, which `env_scenes` then holds (through subprocess workers too)."""
    from ddppo.envs.registry import make_vec_env

    env = make_vec_env("gridnav", {"num_maps": 16, "max_episode_steps": 3}, EnvSpec(num_envs=4, seed=0,
                                                                                     num_workers=workers))
    try:
        env.reset(seed=3)
        before = env_scenes(env)
        assert set(before) <= set(declared_scenes(env)) and None not in before
        seen = 0
        for _ in range(9):
            res = env.step(np.ones(4, np.int64))  # forward only: every episode is cut at 3 steps
            after = env_scenes(env)
            for e in res.episodes:
                assert e.scene == before[e.env_index] and e.next_scene == after[e.env_index]
            seen += len(res.episodes)
            before = after
        assert seen == 12
    finally:
        env.close()


def test_hand_made_gridnav_maps_are_scenes_of_their_own():
    from ddppo.envs.gridnav.maps import parse_ascii
    from ddppo.envs.gridnav.env import GridNav
    from ddppo.envs.gridnav.options import GridNavOptions

    room = parse_ascii("#####\n#...#\n#...#\n#####")
    env = GridNav(GridNavOptions(min_geodesic=1.0), EnvSpec(num_envs=2, seed=0), maps=[room, room.copy()])
    assert declared_scenes(env) == ("map0", "map1")
