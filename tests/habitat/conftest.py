"""Shared fixtures: small generated scenes and episodes (grid backend; no habitat-sim needed)."""

from __future__ import annotations

import numpy as np
import pytest

from ddppo.envs.scenes.dataset import write_split
from ddppo.envs.scenes.episode_gen import EpisodeGenParams, generate_for_scene
from ddppo.envs.scenes.gridsim import GridSim
from ddppo.envs.scenes.interface import SimSettings
from ddppo.envs.scenes.layout import Box, Layout, LayoutParams, generate_layout
from ddppo.envs.habitat.options import HabitatOptions
from ddppo.envs.scenes.scene_gen import write_scene
from habitat_testutil import habitat_gpu


@pytest.fixture(scope="session")
def gpu() -> int:
    return habitat_gpu()


SMALL = LayoutParams(size_min=5.0, size_max=6.0, max_rooms=3, max_furniture=1)


@pytest.fixture(scope="session")
def generated(tmp_path_factory):
    """Two generated scenes under <root>/scenes/gen and 12 episodes per scene in a split folder."""
    root = tmp_path_factory.mktemp("habitat")
    scenes_dir = root / "scenes"
    sim = GridSim(SimSettings(depth_sensor=False))
    episodes = []
    for k in range(2):
        files = write_scene(str(scenes_dir / "gen"), f"gen_{k:03d}", generate_layout(np.random.default_rng(k), SMALL))
        episodes += generate_for_scene(sim, files.glb, f"gen/gen_{k:03d}.glb", 12, seed=k,
                                       params=EpisodeGenParams(min_geodesic=1.0, max_geodesic=12.0, min_ratio=1.0))
    dataset = root / "pointnav" / "train"
    write_split(str(dataset), episodes)
    return {"root": root, "scenes_dir": str(scenes_dir), "dataset": str(dataset), "episodes": episodes}


@pytest.fixture()
def make_options(generated):
    """HabitatOptions for the generated dataset on the grid backend, small images."""

    def make(**kw) -> HabitatOptions:
        base = dict(dataset=generated["dataset"], scenes_dir=generated["scenes_dir"], backend="grid",
                    depth_width=16, depth_height=12, max_episode_steps=60)
        base.update(kw)
        return HabitatOptions(**base)

    return make


@pytest.fixture()
def room(tmp_path):
    """One empty 4 x 4 m room (walls only): geodesic == euclidean everywhere inside."""
    t = 0.1
    walls = [Box("wall", (-2, 0, -2), (2, 2.6, -2 + t)), Box("wall", (-2, 0, 2 - t), (2, 2.6, 2)),
             Box("wall", (-2, 0, -2), (-2 + t, 2.6, 2)), Box("wall", (2 - t, 0, -2), (2, 2.6, 2))]
    files = write_scene(str(tmp_path), "room", Layout((-2.0, -2.0, 2.0, 2.0), 0.0, 2.6, walls))
    return files.glb
