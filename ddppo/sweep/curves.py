"""Learning curves from runs' metrics.jsonl: put on one env-step grid, averaged over runs, drawn with matplotlib.
The sweep summary (summary.py: mean +- std per variant) and `ddppo plot RUN [RUN...]` (the runs as seeds of one
configuration: their mean and its 95% interval, Student's t over the runs, ddppo.eval.stats.t_quantile) both draw
from here.

A run's curve of a metric is its finite values against env_steps; curves of several runs are linearly
interpolated onto a grid spanning the steps every run has reached (short series keep their own logged steps).
"""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import Sequence

import numpy as np

from ddppo.errors import ConfigError
from ddppo.eval.stats import t_quantile
from ddppo.files import atomic_write
from ddppo.sweep import runs as disk

CURVE_POINTS = 200
# Rates live in [0, 1]: their bands are clipped there (a band below 0 success means nothing).
RATE_SUFFIXES = ("success", "spl", "soft_spl")
SHORT_SERIES = 12  # curves of at most this many logged points are drawn at those points, with markers
# `ddppo plot`'s panels: return, success, the loss terms, throughput (a metric no run logged is left out)
PLOT_METRICS = ("train/reward", "train/success", "loss/policy", "loss/value", "loss/entropy", "perf/fps")

Curve = tuple[np.ndarray, np.ndarray]  # (env steps, values)


def curve(records: list[dict], metric: str) -> Curve:
    """One run's finite values of `metric` against env_steps."""
    points = [(r["env_steps"], r[metric]) for r in records
              if isinstance(r.get(metric), (int, float)) and math.isfinite(r[metric])]
    return np.array([p[0] for p in points], dtype=float), np.array([p[1] for p in points], dtype=float)


def metric_range(metric: str) -> tuple[float, float]:
    return (0.0, 1.0) if metric.rpartition("/")[2] in RATE_SUFFIXES else (-math.inf, math.inf)


def curve_stats(curves: Sequence[Curve]) -> tuple[np.ndarray, ...] | None:
    """(x, mean, std) over runs on a common env-step grid, over the steps every run has reached (a run
    still in progress shortens its variant's curve; its table row still shows its latest values). Short
    series keep their own logged steps as the grid (see SHORT_SERIES)."""
    curves = [(x, y) for x, y in curves if len(x)]
    if not curves:
        return None
    lo, hi = max(x[0] for x, _ in curves), min(x[-1] for x, _ in curves)
    if hi < lo:
        return None
    if max(len(x) for x, _ in curves) <= SHORT_SERIES:
        grid = np.unique(np.concatenate([x[(x >= lo) & (x <= hi)] for x, _ in curves]))
    else:
        grid = np.linspace(lo, hi, CURVE_POINTS) if hi > lo else np.array([lo])
    ys = np.stack([np.interp(grid, x, y) for x, y in curves])
    std = ys.std(axis=0, ddof=1) if len(curves) > 1 else np.zeros(len(grid))
    return grid, ys.mean(axis=0), std


def interval95(std: np.ndarray, n: int) -> np.ndarray:
    """The half-width of the 95% interval of a mean over `n` runs (0 for one run: no interval)."""
    return t_quantile(0.975, n - 1) * std / math.sqrt(n) if n > 1 else np.zeros_like(std)


def save_png(fig, path: Path) -> None:
    buf = io.BytesIO()
    fig.savefig(buf, dpi=110, format="png")
    atomic_write(path, buf.getvalue())


def read_runs(run_dirs: Sequence[str | Path]) -> list[list[dict]]:
    """Each run's metrics.jsonl records; ConfigError naming a directory that holds none."""
    out = []
    for run_dir in run_dirs:
        records = disk.read_metrics(Path(run_dir))
        if not records:
            raise ConfigError(f"{run_dir} has no metrics.jsonl records: pass run directories that `ddppo train` "
                              f"has written (its run.dir)")
        out.append(records)
    return out


def plot_runs(run_dirs: Sequence[str | Path], out: Path, metrics: Sequence[str] = PLOT_METRICS) -> list[str]:
    """`ddppo plot`: one panel per metric some run logged, into the PNG `out`; several runs are seeds (their
    mean, the 95% interval of the mean, and each run as a thin line). The metrics drawn."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = read_runs(run_dirs)
    curves = {m: [curve(records, m) for records in runs] for m in metrics}
    drawn = [m for m in metrics if curve_stats(curves[m]) is not None]
    if not drawn:
        raise ConfigError(f"none of {', '.join(metrics)} is logged in {', '.join(map(str, run_dirs))}: name "
                          f"metrics the runs' metrics.jsonl holds (--metric TAG)")
    cols = min(3, len(drawn))
    fig, axes = plt.subplots(math.ceil(len(drawn) / cols), cols, figsize=(4.6 * cols, 3.4 * math.ceil(
        len(drawn) / cols) + 0.6), squeeze=False)
    n = len(runs)
    for ax, metric in zip(axes.flat, drawn):
        x, mean, std = curve_stats(curves[metric])
        lo, hi = metric_range(metric)
        if n > 1:
            for rx, ry in curves[metric]:
                ax.plot(rx, ry, color="0.6", lw=0.6, alpha=0.6)
            half = interval95(std, n)
            ax.fill_between(x, np.clip(mean - half, lo, hi), np.clip(mean + half, lo, hi), color="C0", alpha=0.25,
                            lw=0)
        ax.plot(x, mean, color="C0", lw=1.6, marker="o" if len(x) <= SHORT_SERIES else None, markersize=3)
        ax.set(title=metric, xlabel="env steps")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(drawn):]:
        ax.axis("off")
    names = ", ".join(Path(r).name for r in run_dirs)
    what = f"mean and 95% interval over {n} runs" if n > 1 else "one run"
    fig.suptitle(f"{names} ({what})" if len(names) < 80 else f"{n} runs ({what})", fontsize=10)
    fig.tight_layout()
    save_png(fig, out)
    plt.close(fig)
    return drawn
