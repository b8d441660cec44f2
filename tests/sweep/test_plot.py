"""`ddppo plot RUN [RUN...]` (ddppo/sweep/curves.py): a real run's curves as a PNG, several runs as seeds with the
95% interval of their mean (Student's t), a directory without metrics named in one line (exit 2)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from ddppo.cli import main
from ddppo.eval.stats import t_quantile
from ddppo.sweep.curves import curve, curve_stats, interval95
from testutil import REPO, TINY, as_overrides


def write_run(run_dir: Path, rewards: list[float]) -> Path:
    run_dir.mkdir(parents=True)
    lines = [json.dumps({"update": i + 1, "env_steps": 100 * (i + 1), "train/reward": r, "perf/fps": 50.0})
             for i, r in enumerate(rewards)]
    (run_dir / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    return run_dir


def is_png(path: Path) -> bool:
    return path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_real_run_is_plotted_with_the_curves_it_logged(tmp_path, capsys, cli):
    run = tmp_path / "run"
    res = cli("train", str(REPO / "configs" / "gridnav.yaml"),
              *as_overrides({**TINY, "run.dir": run, "run.total_env_steps": 384, "log.tensorboard": False}))
    assert res.returncode == 0, res
    out = tmp_path / "curves.png"
    assert main(["plot", str(run), "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert is_png(out) and said.startswith(f"wrote {out} (")
    for tag in ("train/reward", "loss/policy", "loss/value", "loss/entropy", "perf/fps"):
        assert tag in said, said


def test_several_runs_are_seeds_their_mean_and_95_percent_interval(tmp_path, capsys):
    runs = [write_run(tmp_path / f"seed{s}", [s, s + 1.0, s + 2.0]) for s in range(3)]
    curves = [curve(json.loads(f"[{(r / 'metrics.jsonl').read_text().strip().replace(chr(10), ',')}]"),
                    "train/reward") for r in runs]
    x, mean, std = curve_stats(curves)
    assert list(x) == [100, 200, 300] and list(mean) == [1.0, 2.0, 3.0] and list(std) == [1.0, 1.0, 1.0]
    half = interval95(std, 3)
    assert half[0] == pytest.approx(t_quantile(0.975, 2) / math.sqrt(3)) and half[0] == pytest.approx(2.484, abs=1e-3)
    assert np.all(interval95(std[:1], 1) == 0)  # one run: no interval
    out = tmp_path / "seeds.png"
    assert main(["plot", *map(str, runs), "--out", str(out)]) == 0
    assert is_png(out)
    assert capsys.readouterr().out == f"wrote {out} (train/reward, perf/fps)\n"  # what no run logged is left out


def test_a_directory_without_metrics_is_one_line_and_exit_2(tmp_path, cli):
    (tmp_path / "empty").mkdir()
    res = cli("plot", str(tmp_path / "empty"))
    assert res.returncode == 2
    assert "has no metrics.jsonl records: pass run directories" in res.stderr.strip().splitlines()[-1]
    assert "Traceback" not in res.stderr
