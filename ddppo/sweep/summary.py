"""`ddppo sweep summary SWEEP_DIR`: final metrics per variant (mean +- std over seeds), status, learning curves.

Definitions (what the numbers are):
- a run's final value of a metric is its value in the last metrics.jsonl record where it is not null
  (train/* are already averaged over log.window updates by the trainer); `env_steps` is the last record's;
- mean and std are over the runs of a variant that have a value; std is the sample std (ddof=1), empty for
  one run; runs still in progress count with their latest values (the status column says so);
- learning curves: each run's metric against env_steps, linearly interpolated onto a common grid that spans
  the steps every run of the variant has reached (sweep/curves.py); the line is the mean over the runs, the band
  mean +- std.

Per-scene columns are added when the runs report scenes (train/scene/*, ddppo/rollout/scenes.py): the
spread over scenes (train/scene_success_min, train/scene_weight_share_min / _max), and each scene's success and
gradient weight share where there are at most SCENE_COLUMN_LIMIT scenes.

Writes SWEEP_DIR/summary/: summary.md (the table printed on stdout), summary.csv (per variant), runs.csv (per
run), curves.png (every metric, one panel each) and one PNG per metric (train_reward.png, ...).
"""

from __future__ import annotations

import csv
import io
import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from ddppo.files import atomic_write
from ddppo.sweep import runs as disk
from ddppo.sweep.curves import SHORT_SERIES, curve, curve_stats, metric_range, save_png
from ddppo.errors import SweepError

DEFAULT_METRICS = ("train/reward", "train/success", "train/spl")
SCENE_SPREAD = ("train/scene_success_min", "train/scene_success_max", "train/scene_weight_share_min",
                "train/scene_weight_share_max")
SCENE_COLUMN_LIMIT = 4


@dataclass
class RunResult:
    name: str
    variant: str
    seed: int | None
    status: str
    env_steps: int | None
    final: dict[str, float | None]
    curves: dict[str, tuple[np.ndarray, np.ndarray]]


@dataclass
class VariantRow:
    variant: str
    runs: list[RunResult]
    stats: dict[str, tuple[float, float, int]] = field(default_factory=dict)  # metric -> (mean, std, n)

    @property
    def status(self) -> str:
        counts = Counter(r.status for r in self.runs)
        return ", ".join(f"{counts[s]} {s}" for s in disk.STATUSES if counts[s])

    @property
    def env_steps(self) -> float:
        steps = [r.env_steps for r in self.runs if r.env_steps is not None]
        return float(np.mean(steps)) if steps else math.nan


def final_value(records: list[dict], metric: str) -> float | None:
    for record in reversed(records):
        value = record.get(metric)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            return float(value)
    return None


def collect(sweep_dir: Path, metrics: Sequence[str]) -> tuple[dict, list[RunResult], list[str]]:
    """(manifest, every run's result, the metrics reported: `metrics`, then the per-scene columns the runs
    report, scene_columns) from the sweep dir, each run's metrics.jsonl read once."""
    manifest = disk.read_manifest(sweep_dir)
    if not manifest or not manifest.get("runs"):
        raise SweepError(f"{sweep_dir} is not a sweep dir (no {disk.MANIFEST}); pass the sweep dir that "
                         f"`ddppo sweep SPEC` printed (default runs/sweeps/<name>)")
    runs = [(entry, Path(sweep_dir) / entry["run_dir"]) for entry in manifest["runs"]]
    read = [disk.read_metrics(run_dir) for _, run_dir in runs]
    metrics = list(metrics) + [m for m in scene_columns(read) if m not in metrics]
    queue = disk.SlurmQueue()
    results = []
    for (entry, run_dir), records in zip(runs, read):
        results.append(RunResult(
            name=entry["name"], variant=entry["variant"], seed=entry.get("seed"),
            status=disk.run_status(sweep_dir, entry["name"], run_dir, queue, records),
            env_steps=records[-1]["env_steps"] if records else None,
            final={m: final_value(records, m) for m in metrics},
            curves={m: curve(records, m) for m in metrics}))
    return manifest, results, metrics


def scene_columns(runs: Sequence[list[dict]]) -> list[str]:
    """The per-scene columns the runs (each one's metrics records) report (see the module docstring), [] where
    none has scenes."""
    keys: set[str] = set()
    for records in runs:
        if records:
            keys.update(k for k in records[-1] if k.startswith("train/scene"))
    scenes = sorted({k.split("/")[2] for k in keys if k.startswith("train/scene/")})
    per_scene = [f"train/scene/{n}/{m}" for n in scenes for m in ("success", "weight_share")
                 if f"train/scene/{n}/{m}" in keys] if len(scenes) <= SCENE_COLUMN_LIMIT else []
    return [m for m in SCENE_SPREAD if m in keys] + per_scene


def aggregate(results: Sequence[RunResult], metrics: Sequence[str]) -> list[VariantRow]:
    rows: dict[str, VariantRow] = {}
    for result in results:
        rows.setdefault(result.variant, VariantRow(result.variant, [])).runs.append(result)
    for row in rows.values():
        for metric in metrics:
            values = [r.final[metric] for r in row.runs if r.final[metric] is not None]
            mean = float(np.mean(values)) if values else math.nan
            std = float(np.std(values, ddof=1)) if len(values) > 1 else math.nan
            row.stats[metric] = (mean, std, len(values))
    return list(rows.values())


def sort_rows(rows: list[VariantRow], metric: str, ascending: bool = False) -> list[VariantRow]:
    """By the metric's mean; variants without a value last."""
    def key(row: VariantRow):
        mean = row.stats[metric][0]
        missing = math.isnan(mean)
        return missing, 0.0 if missing else mean if ascending else -mean
    return sorted(rows, key=key)


def format_stat(mean: float, std: float) -> str:
    """A table cell: `0.1234 ± 0.012` (mean to 4 significant digits, std to 2), `-` when there is no value."""
    if math.isnan(mean):
        return "-"
    return f"{mean:.4g}" if math.isnan(std) else f"{mean:.4g} ± {std:.2g}"


def markdown(rows: Sequence[VariantRow], metrics: Sequence[str], title: str) -> str:
    head = ["variant", "runs", "status", "env steps", *metrics]
    lines = [title, "", "| " + " | ".join(head) + " |", "|---|---:|---|---:|" + "---:|" * len(metrics)]
    for row in rows:
        steps = "-" if math.isnan(row.env_steps) else f"{row.env_steps:.0f}"
        cells = [row.variant, str(len(row.runs)), row.status, steps,
                 *(format_stat(*row.stats[m][:2]) for m in metrics)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _num(x: float | None) -> str:
    return "" if x is None or (isinstance(x, float) and math.isnan(x)) else repr(float(x))


def write_csv(rows: Sequence[VariantRow], results: Sequence[RunResult], metrics: Sequence[str],
              out_dir: Path) -> list[Path]:
    variants, per_run = out_dir / "summary.csv", out_dir / "runs.csv"
    counts = list(disk.STATUSES)
    f = io.StringIO(newline="")
    w = csv.writer(f)
    w.writerow(["variant", "runs", *counts, "env_steps_mean",
                *(f"{m}_{s}" for m in metrics for s in ("mean", "std", "n"))])
    for row in rows:
        c = Counter(r.status for r in row.runs)
        w.writerow([row.variant, len(row.runs), *(c[s] for s in counts), _num(row.env_steps),
                    *(v for m in metrics for v in (_num(row.stats[m][0]), _num(row.stats[m][1]),
                                                    row.stats[m][2]))])
    atomic_write(variants, f.getvalue())  # a reader (or a second summary) sees a whole file, never half of one
    f = io.StringIO(newline="")
    w = csv.writer(f)
    w.writerow(["run", "variant", "seed", "status", "env_steps", *metrics])
    for r in results:
        w.writerow([r.name, r.variant, "" if r.seed is None else r.seed, r.status,
                    "" if r.env_steps is None else r.env_steps, *(_num(r.final[m]) for m in metrics)])
    atomic_write(per_run, f.getvalue())
    return [variants, per_run]


def _draw(ax, rows: Sequence[VariantRow], metric: str, colors: dict[str, str]) -> None:
    for row in rows:
        stats = curve_stats([r.curves[metric] for r in row.runs])
        if stats is None:
            continue
        x, mean, std = stats
        short = len(x) <= SHORT_SERIES  # a single point is invisible as a line alone
        ax.plot(x, mean, color=colors[row.variant], lw=1.6, label=f"{row.variant} (n={len(row.runs)})",
                marker="o" if short else None, markersize=4)
        lo, hi = metric_range(metric)
        ax.fill_between(x, np.clip(mean - std, lo, hi), np.clip(mean + std, lo, hi), color=colors[row.variant],
                        alpha=0.18, lw=0)
    ax.set_xlabel("env steps")
    ax.set_ylabel(metric)
    ax.set_title(metric)
    ax.grid(alpha=0.3)


def plot(rows: Sequence[VariantRow], metrics: Sequence[str], out_dir: Path, title: str) -> list[Path]:
    """One PNG per metric and curves.png with all of them; colours are the same variant everywhere."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    palette = plt.get_cmap("tab10" if len(rows) <= 10 else "tab20").colors
    colors = {row.variant: palette[i % len(palette)] for i, row in enumerate(rows)}
    files = []
    for metric in metrics:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        _draw(ax, rows, metric, colors)
        ax.set_title(f"{title}: {metric} (mean ± std over seeds)", fontsize=10)
        if ax.get_legend_handles_labels()[1]:  # a metric no run logged has no line (matplotlib would warn)
            ax.legend(fontsize=7, loc="best")
        else:
            ax.text(0.5, 0.5, "no run logged this metric", ha="center", va="center", transform=ax.transAxes)
        path = out_dir / f"{metric.replace('/', '_')}.png"
        fig.tight_layout()
        save_png(fig, path)
        plt.close(fig)
        files.append(path)
    cols = min(3, len(metrics))
    nrows = math.ceil(len(metrics) / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(5 * cols, 3.8 * nrows + 0.4 * len(rows) / 2 + 0.8),
                             squeeze=False)
    for ax, metric in zip(axes.flat, metrics):
        _draw(ax, rows, metric, colors)
    for ax in list(axes.flat)[len(metrics):]:
        ax.axis("off")
    handles, labels = max((ax.get_legend_handles_labels() for ax in axes.flat), key=lambda hl: len(hl[1]))
    if labels:
        fig.legend(handles, labels, loc="lower center", ncol=min(2, max(1, len(labels))), fontsize=8)
    fig.suptitle(f"{title} (mean ± std over seeds)")
    fig.tight_layout(rect=(0, 0.06 + 0.035 * math.ceil(len(labels) / 2), 1, 0.96))
    path = out_dir / "curves.png"
    save_png(fig, path)
    plt.close(fig)
    return [path, *files]


def summarize(sweep_dir: str | Path, metrics: Sequence[str] = DEFAULT_METRICS, sort: str | None = None,
              ascending: bool = False, plots: bool = True) -> tuple[str, list[Path]]:
    """(the Markdown table, the files written under SWEEP_DIR/summary/)."""
    sweep_dir = Path(sweep_dir).resolve()
    metrics = list(dict.fromkeys(metrics))
    sort = sort or metrics[0]
    if sort not in metrics:
        metrics.append(sort)
    manifest, results, metrics = collect(sweep_dir, metrics)
    rows = sort_rows(aggregate(results, metrics), sort, ascending)
    counts = Counter(r.status for r in results)
    status = ", ".join(f"{counts[s]} {s}" for s in disk.STATUSES if counts[s])
    order = "ascending" if ascending else "descending"
    title = (f"## sweep {manifest['name']}: {len(results)} runs in {len(rows)} variants ({status}); "
             f"final values, mean ± std over seeds, sorted by {sort} ({order})")
    text = markdown(rows, metrics, title)
    out_dir = sweep_dir / "summary"
    out_dir.mkdir(exist_ok=True)
    atomic_write(out_dir / "summary.md", text)
    files = [out_dir / "summary.md", *write_csv(rows, results, metrics, out_dir)]
    if plots:
        files += plot(rows, metrics, out_dir, f"sweep {manifest['name']}")
    return text, files
