"""Episode generator: constraints, determinism, output format (grid backend)."""

import math

import numpy as np
import pytest

from ddppo.envs.base import EnvError
from ddppo.envs.scenes import episode_gen
from ddppo.envs.scenes.dataset import read_episodes
from ddppo.envs.scenes.episode_gen import EpisodeGenParams, generate_for_scene
from ddppo.envs.scenes.geometry import yaw_from_quat
from ddppo.envs.scenes.gridsim import GridSim
from ddppo.envs.scenes.interface import SimSettings


def test_episodes_meet_the_bounds(generated):
    scene = generated["scenes_dir"] + "/gen/gen_000.glb"
    params = EpisodeGenParams(min_geodesic=2.0, max_geodesic=8.0, min_ratio=1.1)
    sim = GridSim(SimSettings(depth_sensor=False))
    eps = generate_for_scene(sim, scene, "gen/gen_000.glb", 8, seed=5, params=params)
    assert len(eps) == 8 and len({e.episode_id for e in eps}) == 8
    for e in eps:
        start, goal = np.array(e.start_position), np.array(e.goals[0].position)
        geo = sim.geodesic_distance(start, goal)
        assert e.geodesic_distance == pytest.approx(geo)
        assert 2.0 <= geo <= 8.0 and geo >= 1.1 * np.linalg.norm(goal - start)
        assert sim.is_navigable(start) and sim.is_navigable(goal)
        assert abs(start[1] - goal[1]) <= 0.5
        assert np.linalg.norm(e.start_rotation) == pytest.approx(1.0)
        assert e.start_rotation[0] == e.start_rotation[2] == 0.0  # a yaw
        assert e.goals[0].radius == 0.2
    again = generate_for_scene(GridSim(SimSettings(depth_sensor=False)), scene, "gen/gen_000.glb", 8, seed=5,
                               params=params)
    assert again == eps
    yaws = [yaw_from_quat(e.start_rotation) for e in eps]
    assert max(yaws) - min(yaws) > 1.0  # random headings


def test_impossible_bounds_fail_clearly(generated):
    scene = generated["scenes_dir"] + "/gen/gen_000.glb"
    with pytest.raises(EnvError, match="no start/goal pair"):
        generate_for_scene(GridSim(SimSettings(depth_sensor=False)), scene, "s", 1, seed=0,
                           params=EpisodeGenParams(min_geodesic=50.0, max_geodesic=60.0, max_tries=50))


def test_cli_writes_standard_files(generated, tmp_path, capsys):
    out = tmp_path / "eps.json.gz"
    rc = episode_gen.main(["--scenes-dir", generated["scenes_dir"], "--out", str(out), "--episodes-per-scene", "3",
                           "--backend", "grid", "--min-ratio", "1.0"])
    assert rc == 0, capsys.readouterr().out
    eps = read_episodes(str(out))
    assert len(eps) == 6 and {e.scene_id for e in eps} == {"gen/gen_000.glb", "gen/gen_001.glb"}
    assert all(math.isfinite(e.geodesic_distance) for e in eps)
    split = tmp_path / "val"
    assert episode_gen.main(["--scenes-dir", generated["scenes_dir"], "--scenes", "gen/gen_001.glb", "--out",
                             str(split), "--episodes-per-scene", "2", "--backend", "grid", "--min-ratio", "1"]) == 0
    assert (split / "val.json.gz").is_file() and (split / "content" / "gen_001.json.gz").is_file()
    assert episode_gen.main(["--scenes-dir", str(tmp_path), "--out", str(tmp_path / "x.json.gz"),
                             "--backend", "grid"]) == 2
    assert "no scenes" in capsys.readouterr().out
