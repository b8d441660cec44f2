"""The stats table reduction: NaN-ignoring mean over ranks (min / max for ratio extremes), NaN where no rank has
a finite value; phase timings as mean/min/max over ranks."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np

from ddppo.train.stats import PHASES, _HEAD, loss_keys, unpack
from ddppo.rollout.collector import DIAG_KEYS, EPISODE_KEYS
from ddppo.rollout.scenes import SCENE_COLUMNS


def test_unpack_reduces_each_column_as_the_per_key_reference():
    rng = np.random.default_rng(0)
    keys = loss_keys(3)
    world = 3
    named = {"steps": 8.0, "update_time": 1.0, "rss_gb": 0.1, "memory_fraction": 0.2, "env_steps": 32.0}
    head = np.tile([named.get(k, 1.0 if k in DIAG_KEYS else 0.0) for k in _HEAD], (world, 1))
    episodes = rng.random((world, 2 * len(EPISODE_KEYS)))
    losses = rng.standard_normal((world, len(keys)))
    losses[0, 0] = np.nan  # one rank without the term
    policy, value, entropy = (keys.index(k) for k in ("policy", "value", "entropy"))
    losses[:, policy] = np.nan  # no rank has it
    losses[1, value] = np.inf  # a non-finite value among finite ones is kept, as nanmean keeps it
    losses[:, entropy] = [np.nan, np.inf, np.nan]  # no finite value: NaN
    phases = rng.random((world, len(PHASES)))
    table = np.concatenate([head, episodes, losses, phases], axis=1)
    assert table.shape[1] == len(_HEAD) + 2 * len(EPISODE_KEYS) + len(keys) + len(PHASES)
    out = unpack(table, keys, num_envs=4, num_steps=8)
    for i, k in enumerate(keys):
        vals = losses[:, i]
        reduce = np.nanmin if k.endswith("ratio_min") else np.nanmax if k.endswith("ratio_max") else np.nanmean
        want = float(reduce(vals)) if np.isfinite(vals).any() else float("nan")
        got = out.losses[k]
        assert (math.isnan(got) and math.isnan(want)) or got == want, (k, got, want)
    assert math.isnan(out.losses["policy"]) and out.losses["value"] == math.inf and math.isnan(out.losses["entropy"])
    assert (out.perf["perf/update_s"], out.perf["perf/rss_gb_max"], out.env_steps_this_update) == (1.0, 0.1, 96)
    for j, p in enumerate(PHASES):
        assert out.perf[f"perf/{p}_s"] == float(phases[:, j].mean())
        assert (out.perf[f"perf/{p}_s_min"], out.perf[f"perf/{p}_s_max"]) == (phases[:, j].min(), phases[:, j].max())


def test_every_term_of_the_loss_and_the_update_reaches_the_stats():
    """LOSS_KEYS follows LossOutput: a loss term added there is carried by the all-gather, not dropped."""
    import dataclasses

    from ddppo.ppo.loss import LossOutput
    from ddppo.ppo.update import UPDATE_KEYS
    from ddppo.train.stats import LOSS_KEYS

    assert set(LOSS_KEYS) == {f.name for f in dataclasses.fields(LossOutput)} | set(UPDATE_KEYS)
    assert len(set(LOSS_KEYS)) == len(LOSS_KEYS)


def test_the_scene_window_is_saved_and_restored_under_its_scene_names(caplog):
    """The per-scene window round-trips through its state; a checkpoint of other scene names, or one from before
    the window was saved (no state), gives an empty window, the first with one line saying why."""
    import logging

    from ddppo.train.stats import SceneWindow

    window = SceneWindow(("a", "b"), 3)
    for k in range(4):
        window.scalars(SimpleNamespace(scenes=np.full((2, len(SCENE_COLUMNS)), float(k))))
    restored = SceneWindow(("a", "b"), 3)
    restored.load_state_dict(window.state_dict())
    assert [t[0, 0] for t in restored.tables] == [1.0, 2.0, 3.0]
    assert restored.scalars(SimpleNamespace(scenes=np.ones((2, len(SCENE_COLUMNS))))) == window.scalars(
        SimpleNamespace(scenes=np.ones((2, len(SCENE_COLUMNS)))))
    other = SceneWindow(("a", "c"), 3)
    with caplog.at_level(logging.INFO, logger="ddppo.train.stats"):
        other.load_state_dict(window.state_dict())
    assert not other.tables
    assert [r.getMessage() for r in caplog.records] == [
        "train/scene/* starts with an empty window: the checkpoint's scenes ['a', 'b'] are not this run's ['a', 'c']"]
    restored.load_state_dict(None)
    assert not restored.tables
