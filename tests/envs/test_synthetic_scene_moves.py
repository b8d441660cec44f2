"""Scenes moved during a run by their measured costs (issue 44): the decision (envs/placement.py `replacement`), the
synthetic env's `scene_placement=measured` (whole scenes in order until offered costs, then spread by them), its
measured step times, and the placement a saved state carries. Costs are given, never timed, except where a test
checks that the env times its steps at all."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from ddppo.envs.base import EnvSpec, place_by_cost
from ddppo.envs.synthetic.options import SyntheticOptions
from ddppo.envs.placement import REPLACE_GAIN, group_costs, place_scenes, replacement
from ddppo.envs.registry import make_vec_env
from ddppo.envs.synthetic.env import SyntheticEnv

SLOW = {"scene0": 0.001, "scene1": 0.003}  # seconds per env step: scene1 3x slower


def test_a_new_placement_is_taken_only_when_it_makes_the_slowest_group_measurably_cheaper():
    whole = place_scenes([4, 4], [1.0, 1.0], 2)  # rank 0 all scene 0, rank 1 all scene 1
    proposed = replacement(whole, [4, 4], [1.0, 3.0], 2)
    assert proposed == [[0, 0, 1, 1], [0, 0, 1, 1]]
    assert max(group_costs(proposed, [1.0, 3.0])) == 8.0 < max(group_costs(whole, [1.0, 3.0])) == 12.0
    assert replacement(proposed, [4, 4], [1.0, 3.0], 2) is None  # already there
    assert replacement(whole, [4, 4], [1.0, 1.0], 2) is None  # alike: nothing to gain
    # a gain just inside the margin is not worth a move (measured costs are noisy; a move restarts episodes)
    near = [1.0, 1.0 + REPLACE_GAIN]  # whole: max 4.2; spread: 4.1, 2.4% cheaper
    assert replacement(whole, [4, 4], near, 2) is None
    assert replacement(whole, [4, 4], [1.0, 1.2], 2) is not None  # 4.8 -> 4.4: 8% cheaper


def _synthetic(rank: int, placement: str = "measured", **kw) -> SyntheticEnv:
    options = SyntheticOptions(num_scenes=2, episode_length=4, scene_step_factors=[1, 3], scene_placement=placement,
                               **kw)
    return SyntheticEnv(options, EnvSpec(num_envs=4, seed=rank, rank=rank, world_size=2))


def test_measured_placement_starts_whole_and_moves_once_offered_costs():
    envs = [_synthetic(0), _synthetic(1)]
    assert [e.env_scenes for e in envs] == [["scene0"] * 4, ["scene1"] * 4]  # nothing measured: whole, in order
    assert [place_by_cost(e, {}) for e in envs] == [False, False]
    assert [place_by_cost(e, SLOW) for e in envs] == [True, True]  # the same decision on every rank
    assert [e.env_scenes for e in envs] == [["scene0", "scene0", "scene1", "scene1"]] * 2
    assert [place_by_cost(e, SLOW) for e in envs] == [False, False]  # already placed by these
    assert [place_by_cost(e, {"scene0": 0.001, "scene1": 0.00101}) for e in envs] == [False, False]  # noise
    obs = envs[0].reset()["obs"]
    assert obs[:, -2:].tolist() == [[1, 0], [1, 0], [0, 1], [0, 1]]  # the one-hot follows the new scenes


@pytest.mark.parametrize("placement", ["contiguous", "cost"])
def test_placements_that_do_not_follow_measurements_never_move(placement):
    env = _synthetic(0, placement)
    before = list(env.env_scenes)
    assert not place_by_cost(env, SLOW) and not place_by_cost(env, {"scene0": 1.0, "scene1": 0.001})
    assert env.env_scenes == before


def test_the_synthetic_env_times_each_env_step_per_episode():
    env = _synthetic(0, step_sleep_s=0.002)
    env.reset()
    episodes = []
    for _ in range(4):
        episodes += env.step(np.zeros(4, np.int64)).episodes
    assert len(episodes) == 4 and all(ep.step_s is not None and ep.step_s > 0 for ep in episodes)


def test_a_saved_state_puts_the_envs_back_on_the_scenes_it_was_played_on():
    moved, fresh = _synthetic(1), _synthetic(1)
    assert place_by_cost(moved, SLOW)
    moved.reset(seed=5)
    moved.step(np.zeros(4, np.int64))
    state = moved.state_dict()
    fresh.reset()
    fresh.load_state_dict(state)
    assert fresh.env_scenes == moved.env_scenes != ["scene1"] * 4
    actions = np.array([0, 1, 2, 3])
    a, b = moved.step(actions), fresh.step(actions)
    assert np.array_equal(a.obs["obs"], b.obs["obs"]) and np.array_equal(a.reward, b.reward)
    older = {k: v for k, v in state.items() if k != "placed_by"}  # saved before placements were: kept as is
    other = _synthetic(1)
    other.load_state_dict(older)
    assert other.env_scenes == ["scene1"] * 4


def test_subprocess_workers_move_their_scenes_together():
    options = dataclasses.asdict(SyntheticOptions(num_scenes=2, episode_length=4, scene_step_factors=[1, 3]))
    envs = make_vec_env("synthetic", options, EnvSpec(num_envs=4, seed=0, num_workers=2, rank=0, world_size=2))
    try:
        envs.reset()
        assert envs.env_scenes == ["scene0"] * 4
        assert place_by_cost(envs, SLOW)
        envs.reset(seed=1)
        assert envs.env_scenes == ["scene0", "scene0", "scene1", "scene1"]
        assert not place_by_cost(envs, SLOW)
    finally:
        envs.close()
