"""Fixtures of the eval tests: a gridnav run trained for a few updates, and a small habitat dataset."""

from __future__ import annotations

import pytest

from eval_testutil import finish, make_habitat_dataset, overrides, start_cli
from testutil import TINY

# an open 6x6 room: 10 updates already give a policy that sometimes succeeds, so success varies
GRIDNAV_RUN = {"env.gridnav.map_size": 6, "env.gridnav.max_room_splits": 0, "env.gridnav.obstacle_density": 0,
               "env.gridnav.min_geodesic": 1, "ppo.lr": 3e-3, "run.total_env_steps": 1280,
               "checkpoint.interval_updates": 4, "log.tensorboard": "false"}


@pytest.fixture(scope="session")
def gridnav_run(tmp_path_factory):
    """A tiny gridnav run trained by the real CLI: checkpoints ckpt-4, ckpt-8, ckpt-10 (finished)."""
    run_dir = tmp_path_factory.mktemp("gridnav_run")
    rc, out, err = finish(start_cli("train", "configs/gridnav.yaml",
                                    *overrides({**TINY, **GRIDNAV_RUN, "run.dir": run_dir})))
    assert rc == 0, err[-3000:]
    return run_dir


@pytest.fixture(scope="session")
def habitat_data(tmp_path_factory):
    """2 generated scenes x 12 PointNav episodes (grid backend: no habitat-sim needed)."""
    return make_habitat_dataset(tmp_path_factory.mktemp("habitat_eval"))
