"""Which episode metrics training aggregates (ddppo/rollout/episode_metrics.py; pure, no processes)."""

from __future__ import annotations

import numpy as np

from ddppo.rollout.episode_metrics import EPISODE_KEYS, EpisodeTally, env_metric_names, metric_names
from ddppo.envs.base import EpisodeInfo


class Declares:
    episode_metrics = ("softspl", "distance_to_goal", "custom")


def test_names_keep_ddppos_columns_first_then_the_envs_own_sorted():
    assert metric_names([]) == EPISODE_KEYS
    assert metric_names(["zeta", "success", "alpha", "zeta"]) == EPISODE_KEYS + ("alpha", "zeta")
    assert env_metric_names(Declares()) == EPISODE_KEYS + ("custom", "softspl")
    assert env_metric_names(object()) == EPISODE_KEYS  # an env that declares nothing


def test_tally_adds_declared_scalars_and_skips_the_rest_with_one_debug_line_each(caplog):
    tally = EpisodeTally(EPISODE_KEYS + ("custom",))
    sums, counts = tally.zeros()
    episodes = [EpisodeInfo(0, {"return": 1.0, "length": 4.0, "custom": 2.0, "undeclared": 1.0, "map": [[0, 1]]}),
                EpisodeInfo(1, {"return": 3.0, "length": 6.0, "custom": np.float32(4.0), "undeclared": 2.0,
                                "success": True, "spl": float("inf")})]
    with caplog.at_level("DEBUG", logger="ddppo.rollout.episode_metrics"):
        tally.add(episodes, sums, counts)
        tally.add(episodes, sums, counts)  # the same names again: no second line
    col = {n: i for i, n in enumerate(tally.names)}
    assert sums[col["custom"]] == 12.0 and counts[col["custom"]] == 4
    assert sums[col["success"]] == 2.0 and counts[col["success"]] == 2 and counts[col["spl"]] == 0
    assert sorted(r.getMessage().split("'")[1] for r in caplog.records) == ["map", "spl", "undeclared"]
