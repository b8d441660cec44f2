"""The stats table reduction: NaN-ignoring mean over ranks (min / max for ratio extremes), NaN where no rank has
a finite value; phase timings as mean/min/max over ranks."""

from __future__ import annotations

import math

import numpy as np

from ddppo.train.stats import PHASES, _HEAD, loss_keys, unpack
from ddppo.rollout.collector import EPISODE_KEYS


def test_unpack_reduces_each_column_as_the_per_key_reference():
    rng = np.random.default_rng(0)
    keys = loss_keys(3)
    world = 3
    # steps, preempted, stop_flags, skipped, update_time, rss_gb, memory_fraction, env_steps, then the
    # per-rollout diagnostics (DIAG_KEYS)
    head = np.tile([8.0, 0.0, 0.0, 0.0, 1.0, 0.1, 0.2, 32.0] + [1.0] * (len(_HEAD) - 8), (world, 1))
    episodes = rng.random((world, 2 * len(EPISODE_KEYS)))
    losses = rng.standard_normal((world, len(keys)))
    losses[0, 0] = np.nan  # one rank without the term
    losses[:, 1] = np.nan  # no rank has it
    losses[1, 2] = np.inf  # a non-finite value among finite ones is kept, as nanmean keeps it
    losses[:, 3] = [np.nan, np.inf, np.nan]  # no finite value: NaN
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
    assert math.isnan(out.losses[keys[1]]) and out.losses[keys[2]] == math.inf and math.isnan(out.losses[keys[3]])
    for j, p in enumerate(PHASES):
        assert out.perf[f"perf/{p}_s"] == float(phases[:, j].mean())
        assert (out.perf[f"perf/{p}_s_min"], out.perf[f"perf/{p}_s_max"]) == (phases[:, j].min(), phases[:, j].max())
