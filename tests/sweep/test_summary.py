"""`sweep summary` on a hand-made sweep dir (fast): numbers, statuses, sorting, CSV, curves and PNGs."""

from __future__ import annotations

import contextlib
import csv
import json
import math
import os
import socket
import time

import numpy as np
import psutil
import pytest

from ddppo.files import write_json
from ddppo.sweep.curves import curve_stats
from ddppo.sweep.summary import format_stat, summarize

# matplotlib's first import in a fresh environment runs fc-list to build its font cache: done here, at import,
# not inside a test, where the fast tier's guard takes it for a process the test started
with contextlib.suppress(ImportError):
    import matplotlib.pyplot  # noqa: F401

TARGET = 300


def make_run(sweep_dir, name, variant, seed, rewards, state=None, target=TARGET):
    run_dir = sweep_dir / "runs" / name
    run_dir.mkdir(parents=True)
    (run_dir / "config.yaml").write_text(f"run:\n  total_env_steps: {target}\n")
    lines = [json.dumps({"update": i + 1, "env_steps": 100 * (i + 1), "train/reward": r,
                         "train/success": None if r is None else r / 10}) for i, r in enumerate(rewards)]
    (run_dir / "metrics.jsonl").write_text("".join(line + "\n" for line in lines) + ('{"update": 9, "env' if
                                                                                       name == "torn" else ""))
    if state:
        write_json(sweep_dir / "state" / f"{name}.json", state)
    return {"name": name, "variant": variant, "seed": seed, "run_dir": f"runs/{name}"}


@pytest.fixture
def sweep_dir(tmp_path):
    d = tmp_path / "sw"
    me = psutil.Process()
    alive = {"launcher": "local", "host": socket.gethostname(), "pid": os.getpid(), "create_time": me.create_time(),
             "started": time.time(), "rc": None}
    dead = dict(alive, pid=999_999_999, create_time=1.0)
    entries = [
        make_run(d, "a0", "a", 0, [1.0, 2.0, 3.0]),                      # done
        make_run(d, "a1", "a", 1, [1.0, 4.0, 5.0, None]),               # done; last non-null reward is 5
        make_run(d, "b0", "b", 0, [0.5, 1.5], state=alive),             # running
        make_run(d, "b1", "b", 1, [0.5], state=dict(dead, rc=1)),       # failed
        make_run(d, "c0", "c", 0, [], state=None),                      # pending: never launched
        make_run(d, "torn", "c", 1, [2.0], state=dict(dead, rc=0)),     # stopped (exit 0 before the budget)
    ]
    write_json(d / "sweep.json", {"name": "fake", "runs": entries})
    return d


def read_csv(path):
    with open(path) as f:
        return {row[next(iter(row))]: row for row in csv.DictReader(f)}


def test_numbers_statuses_and_sorting(sweep_dir):
    text, files = summarize(sweep_dir, ["train/reward", "train/success"], sort="train/reward")
    variants = read_csv(sweep_dir / "summary" / "summary.csv")
    runs = read_csv(sweep_dir / "summary" / "runs.csv")
    assert {r: runs[r]["status"] for r in runs} == {"a0": "done", "a1": "done", "b0": "running", "b1": "failed",
                                                    "c0": "pending", "torn": "stopped"}
    assert float(runs["a1"]["train/reward"]) == 5.0 and float(runs["a1"]["train/success"]) == 0.5
    a = variants["a"]
    assert float(a["train/reward_mean"]) == 4.0 and float(a["train/reward_std"]) == pytest.approx(math.sqrt(2))
    assert (a["runs"], a["done"], a["train/reward_n"], a["env_steps_mean"]) == ("2", "2", "2", "350.0")
    b = variants["b"]
    assert (b["running"], b["failed"], float(b["train/reward_mean"])) == ("1", "1", 1.0)
    c = variants["c"]
    assert (c["pending"], c["stopped"], c["train/reward_n"], c["train/reward_std"]) == ("1", "1", "1", "")
    # Markdown on stdout: sorted by the mean reward, best first
    rows = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| variant")]
    assert [r.split(" | ")[0][2:] for r in rows] == ["a", "c", "b"]
    assert f"| a | 2 | 2 done | 350 | {format_stat(4.0, math.sqrt(2))} |" in text
    assert "| b | 2 | 1 running, 1 failed |" in text and "| c | 2 | 1 pending, 1 stopped |" in text
    assert "6 runs in 3 variants" in text
    names = {f.name for f in files}
    assert {"summary.md", "summary.csv", "runs.csv", "curves.png", "train_reward.png"} <= names
    for f in files:
        assert f.stat().st_size > 0
    assert (sweep_dir / "summary" / "curves.png").read_bytes()[:4] == b"\x89PNG"


def test_ascending_sort(sweep_dir):
    text, _ = summarize(sweep_dir, ["train/reward"], ascending=True, plots=False)
    rows = [line.split(" | ")[0][2:] for line in text.splitlines() if line.startswith("| ")][1:]
    assert rows == ["b", "c", "a"]


def test_not_a_sweep_dir(tmp_path):
    from ddppo.errors import SweepError

    with pytest.raises(SweepError, match="not a sweep dir"):
        summarize(tmp_path)


def test_curve_stats_mean_and_std_over_the_steps_every_run_reached():
    x = np.array([0.0, 10.0])
    grid, mean, std = curve_stats([(x, np.array([0.0, 10.0])), (x, np.array([2.0, 12.0])),
                                   (np.array([1.0, 5.0]), np.array([5.0, 9.0]))])
    assert grid[0] == 1 and grid[-1] == 5
    assert mean[0] == pytest.approx(3.0) and std[0] == pytest.approx(2.0)  # 1, 3, 5
    assert mean[-1] == pytest.approx(7.0) and std[-1] == pytest.approx(2.0)  # 5, 7, 9
    grid, mean, std = curve_stats([(x, np.array([1.0, 3.0]))])
    assert mean[-1] == 3.0 and not std.any()
    assert curve_stats([(np.array([]), np.array([]))]) is None


def _row(variant: str, metric: str, curves: list):
    from ddppo.sweep import summary

    runs = [summary.RunResult(f"{variant}-{i}", variant, i, "done", int(x[-1]), {metric: float(y[-1])},
                              {metric: (np.asarray(x, float), np.asarray(y, float))})
            for i, (x, y) in enumerate(curves)]
    return summary.VariantRow(variant, runs)


def test_single_logged_point_is_drawn_and_rate_bands_stay_in_range(tmp_path):
    """A variant with one logged point shows (a marker; a line of one point draws nothing), and the std band
    of a rate (success) is clipped to [0, 1] while reward's is not."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ddppo.sweep.summary import _draw, plot

    one = _row("one", "train/success", [([100], [0.5])])
    low = _row("low", "train/success", [([0, 50, 100], [0.0, 0.02, 0.05]), ([0, 50, 100], [0.4, 0.5, 0.6])])
    rows = [one, low]
    colors = {"one": (1.0, 0.0, 0.0), "low": (0.0, 0.0, 1.0)}
    fig, ax = plt.subplots()

    _draw(ax, rows, "train/success", colors)
    single = next(line for line in ax.lines if line.get_label().startswith("one"))
    assert single.get_marker() == "o" and list(single.get_xdata()) == [100]
    bands = [c.get_paths()[0].vertices[:, 1] for c in ax.collections]
    assert all(v.min() >= 0.0 and v.max() <= 1.0 for v in bands)
    raw_low = 0.5 * (0.02 + 0.5) - np.std([0.02, 0.5], ddof=1)
    assert raw_low < 0  # the unclipped band would go below 0
    plt.close(fig)
    fig, ax = plt.subplots()
    _draw(ax, [_row("r", "train/reward", [([0, 10], [0.0, 0.0]), ([0, 10], [1.0, -3.0])])], "train/reward",
          {"r": (0, 0, 1.0)})
    assert min(c.get_paths()[0].vertices[:, 1].min() for c in ax.collections) < 0  # rewards are not clipped
    plt.close(fig)
    assert all(p.stat().st_size > 0 for p in plot(rows, ["train/success"], tmp_path, "t"))


def test_runs_with_scenes_get_per_scene_columns(tmp_path):
    d = tmp_path / "scenes"
    entries = []
    for seed, slow in ((0, 0.5), (1, 0.7)):
        run_dir = d / "runs" / f"s{seed}"
        run_dir.mkdir(parents=True)
        (run_dir / "config.yaml").write_text(f"run:\n  total_env_steps: {TARGET}\n")
        record = {"update": 1, "env_steps": TARGET, "train/reward": 1.0, "train/scene_success_min": slow,
                  "train/scene_weight_share_min": 0.3, "train/scene/fast/success": 0.9,
                  "train/scene/slow/success": slow, "train/scene/fast/weight_share": 0.7,
                  "train/scene/slow/weight_share": 0.3}
        (run_dir / "metrics.jsonl").write_text(json.dumps(record) + "\n")
        entries.append({"name": f"s{seed}", "variant": "v", "seed": seed, "run_dir": f"runs/s{seed}"})
    write_json(d / "sweep.json", {"name": "scenes", "runs": entries})
    text, _ = summarize(d, plots=False)
    header = [line for line in text.splitlines() if line.startswith("| variant")][0]
    assert "train/scene_success_min" in header and "train/scene/slow/weight_share" in header
    assert "0.6 ± 0.14" in text  # the slow scene's success over the two seeds
