"""Statistics of evaluation episodes (95% confidence intervals) and how episodes are shared out.

Confidence intervals: Wilson score for the success rate (a proportion; sound
near 0 and 1 and for few episodes), Student t for the other metrics (SPL,
reward, episode length, ...), clipped to the metric's range (SPL in [0, 1],
lengths, distances and collision counts >= 0); computed without scipy.
"""

from __future__ import annotations

import logging
import math
import statistics
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

# env metric -> (reported name (as the train/ tags), lowest and highest possible value)
METRICS = {"success": ("success", 0.0, 1.0), "spl": ("spl", 0.0, 1.0), "soft_spl": ("soft_spl", 0.0, 1.0),
           "return": ("reward", -math.inf, math.inf), "length": ("episode_length", 0.0, math.inf),
           "distance_to_goal": ("distance_to_goal", 0.0, math.inf), "collisions": ("collisions", 0.0, math.inf)}


def t_quantile(p: float, df: int) -> float:
    """Student-t quantile (exact for df 1, 2; Cornish-Fisher expansion otherwise, within 0.15% for df >= 3)."""
    if df == 1:
        return math.tan(math.pi * (p - 0.5))
    if df == 2:
        return (2 * p - 1) / math.sqrt(2 * p * (1 - p))
    z = statistics.NormalDist().inv_cdf(p)
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160
    return z + g1 / df + g2 / df**2 + g3 / df**3 + g4 / df**4


def summarize(values: list[float], binary: bool = False, bounds: tuple[float, float] = (-math.inf, math.inf)
              ) -> dict[str, Any]:
    """Mean, sample std, count and a 95% CI: Wilson score for a success rate, Student t (clipped to
    `bounds`) otherwise."""
    x = np.asarray(values, dtype=np.float64)
    n = len(x)
    mean = float(x.mean())
    std = float(x.std(ddof=1)) if n > 1 else 0.0
    if binary:
        z = statistics.NormalDist().inv_cdf(0.975)
        centre = (mean + z * z / (2 * n)) / (1 + z * z / n)
        half = z / (1 + z * z / n) * math.sqrt(mean * (1 - mean) / n + z * z / (4 * n * n))
        lo, hi, method = max(0.0, centre - half), min(1.0, centre + half), "wilson"
    elif n > 1:
        half = t_quantile(0.975, n - 1) * std / math.sqrt(n)
        lo, hi, method = max(bounds[0], mean - half), min(bounds[1], mean + half), "student-t"
    else:
        lo, hi, method = None, None, "student-t"
    return {"mean": mean, "std": std, "count": n, "ci95": [lo, hi], "ci_method": method}


# bounds of other envs' metrics known by name (habitat-lab's measures); any other metric is unbounded
OTHER_BOUNDS = {"softspl": (0.0, 1.0), "collisions_count": (0.0, math.inf)}


def summarize_episodes(episodes: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per reported metric, its summary over the episodes that report it (soft SPL only where defined): METRICS
    first, under their reported names, then every other scalar metric an episode reports, under its own name
    (sorted). A value that is not a finite number (NaN, inf, or null in a stored result) is left out of its
    metric's statistics and counted in its `non_finite` (0 where every value is finite); a metric no episode
    reports finitely has no summary (see `non_finite_counts`)."""
    out = {}
    for key, name, bounds, binary in _metric_keys(episodes):
        vals, bad = _values(episodes, key)
        if bad:
            log.debug("eval metric %r: %d value(s) that are not finite numbers left out", key, bad)
        if vals:
            out[name] = {**summarize(vals, binary=binary, bounds=bounds), "non_finite": bad}
    return out


def summarize_scenes(episodes: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """Per scene (the `scene` an episode reports, rollout/scenes.py), `summarize_episodes` of its episodes plus
    its share of them; empty where no episode reports a scene."""
    by_scene: dict[str, list[dict[str, Any]]] = {}
    for ep in episodes:
        if ep.get("scene") is not None:
            by_scene.setdefault(str(ep["scene"]), []).append(ep)
    total = sum(len(v) for v in by_scene.values())
    return {name: {**summarize_episodes(eps), "episode_share": {"mean": len(eps) / total, "std": 0.0,
                                                                 "count": len(eps), "ci95": [None, None],
                                                                 "ci_method": "none"}}
            for name, eps in sorted(by_scene.items())}


def non_finite_counts(episodes: list[dict[str, Any]]) -> dict[str, int]:
    """Per reported metric with any, how many episodes report it with a value that is not a finite number."""
    counts = {name: _values(episodes, key)[1] for key, name, _, _ in _metric_keys(episodes)}
    return {name: n for name, n in counts.items() if n}


def finite_or_none(metrics: dict[str, float]) -> dict[str, float | None]:
    """An episode's metrics as strict JSON can hold them: a value that is not a finite number becomes None."""
    return {k: (v if math.isfinite(v) else None) for k, v in metrics.items()}


def _metric_keys(episodes: list[dict[str, Any]]) -> list[tuple[str, str, tuple[float, float], bool]]:
    """(env key, reported name, bounds, binary) of every metric the episodes report, METRICS first."""
    reported = {k for ep in episodes for k in ep["metrics"]}
    out = [(key, name, (lo, hi), key == "success") for key, (name, lo, hi) in METRICS.items() if key in reported]
    others = sorted(reported - set(METRICS) - {n for n, _, _ in METRICS.values()})
    return out + [(key, key, OTHER_BOUNDS.get(key, (-math.inf, math.inf)), False) for key in others]


def _values(episodes: list[dict[str, Any]], key: str) -> tuple[list[float], int]:
    """The finite values of metric `key` and how many episodes report it otherwise."""
    vals, bad = [], 0
    for ep in episodes:
        v = ep["metrics"].get(key)
        if isinstance(v, (bool, int, float, np.bool_, np.integer, np.floating)) and math.isfinite(float(v)):
            vals.append(float(v))
        elif key in ep["metrics"]:
            bad += 1
    return vals, bad


def split(total: int, parts: int) -> list[int]:
    """`total` as `parts` near-equal non-negative integers, the larger ones first."""
    return [total * (k + 1) // parts - total * k // parts for k in range(parts)]


def dataset_quotas(assignments: list[list[list[str]]]) -> tuple[list[list[int]], int]:
    """Per rank, per env: how many episodes to count, given every env's episode keys (one pass).

    An env whose episodes were already claimed by a lower (rank, env) counts none;
    returns (quotas, number of distinct episodes).
    """
    claimed: set[str] = set()
    quotas = []
    for rank, envs in enumerate(assignments):
        row = []
        for env, keys in enumerate(envs):
            mine = set(keys)
            if mine & claimed:
                if not mine <= claimed:
                    log.warning("rank %d env %d shares some but not all of its episodes with another env; it "
                                "counts none of them (%d episodes not evaluated)", rank, env, len(mine - claimed))
                row.append(0)
            else:
                claimed |= mine
                row.append(len(keys))
        quotas.append(row)
    return quotas, len(claimed)
