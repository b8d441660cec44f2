"""habitat's episode_split=cost moves whole scenes during a run by the costs the trainer measured (issue 44):
every (rank, worker) group takes the same decision from the same costs, a move changes the group's episodes only
where it makes the slowest group measurably cheaper, and a saved state carries the placement its episodes were
played under. Four generated scenes over two groups; costs are given, never timed."""

from __future__ import annotations

import numpy as np
import pytest

from ddppo.envs.base import EnvSpec, place_by_cost
from ddppo.envs.habitat.env import HabitatPointNavEnv
from ddppo.envs.habitat.options import HabitatOptions
from ddppo.envs.scenes.dataset import scene_name, write_split
from ddppo.envs.scenes.episode_gen import EpisodeGenParams, generate_for_scene
from ddppo.envs.scenes.gridsim import GridSim
from ddppo.envs.scenes.interface import SimSettings
from ddppo.envs.scenes.layout import LayoutParams, generate_layout
from ddppo.envs.scenes.scene_gen import write_scene

# alike (nothing measured) the scenes go round: group 0 {gen_000, gen_002}, group 1 {gen_001, gen_003}, and group 1
# holds both slow scenes; by these costs each group gets one slow scene
MEASURED = {"gen_000": 0.001, "gen_001": 0.003, "gen_002": 0.001, "gen_003": 0.003}


@pytest.fixture(scope="module")
def four(tmp_path_factory):
    root = tmp_path_factory.mktemp("four")
    sim = GridSim(SimSettings(depth_sensor=False))
    episodes = []
    for k in range(4):
        files = write_scene(str(root / "scenes" / "gen"), f"gen_{k:03d}", generate_layout(
            np.random.default_rng(k), LayoutParams(size_min=5.0, size_max=6.0, max_rooms=2, max_furniture=0)))
        episodes += generate_for_scene(sim, files.glb, f"gen/gen_{k:03d}.glb", 4, seed=k,
                                       params=EpisodeGenParams(min_geodesic=1.0, max_geodesic=12.0, min_ratio=1.0))
    write_split(str(root / "train"), episodes)
    return HabitatOptions(dataset=str(root / "train"), scenes_dir=str(root / "scenes"), backend="grid",
                          depth_width=8, depth_height=8, max_episode_steps=20)


def _group(options: HabitatOptions, rank: int) -> HabitatPointNavEnv:
    return HabitatPointNavEnv(options, EnvSpec(num_envs=2, seed=rank, rank=rank, world_size=2))


def _scenes(env: HabitatPointNavEnv) -> list[str]:
    return sorted({scene_name(ep.scene_id) for eps in env.assigned_episodes() for ep in eps})


def test_groups_move_whole_scenes_by_measured_costs_together_and_only_for_a_real_gain(four):
    groups = [_group(four, 0), _group(four, 1)]
    try:
        assert [_scenes(g) for g in groups] == [["gen_000", "gen_002"], ["gen_001", "gen_003"]]
        assert [place_by_cost(g, MEASURED) for g in groups] == [True, True]
        assert [_scenes(g) for g in groups] == [["gen_000", "gen_001"], ["gen_002", "gen_003"]]
        assert [place_by_cost(g, MEASURED) for g in groups] == [False, False]  # already placed by these
        noisy = {**MEASURED, "gen_000": 0.00102, "gen_003": 0.00295}
        assert [place_by_cost(g, noisy) for g in groups] == [False, False]
        for g in groups:  # the moved envs play their new scenes from the next reset
            g.reset()
            assert set(g.env_scenes) <= set(_scenes(g))
            g.step(np.ones(2, np.int64))
    finally:
        for g in groups:
            g.close()


def test_only_the_cost_split_moves(four):
    env = HabitatPointNavEnv(HabitatOptions(**{**four.__dict__, "episode_split": "scenes"}),
                             EnvSpec(num_envs=2, seed=0, rank=0, world_size=2))
    try:
        before = _scenes(env)
        assert not place_by_cost(env, MEASURED) and _scenes(env) == before
    finally:
        env.close()


def test_a_saved_state_is_played_on_under_the_placement_it_was_saved_with(four):
    moved, fresh = _group(four, 1), _group(four, 1)
    try:
        assert place_by_cost(moved, MEASURED)
        moved.reset()
        for _ in range(3):
            moved.step(np.ones(2, np.int64))
        fresh.reset()
        fresh.load_state_dict(moved.state_dict())
        assert _scenes(fresh) == _scenes(moved) and fresh.env_scenes == moved.env_scenes
        assert [ep.episode_id for ep in fresh.current_episodes()] == [ep.episode_id for ep in moved.current_episodes()]
        a, b = moved.step(np.array([1, 2])), fresh.step(np.array([1, 2]))
        assert np.array_equal(a.obs["depth"], b.obs["depth"]) and np.array_equal(a.reward, b.reward)
    finally:
        moved.close()
        fresh.close()
