"""The real `python -m ddppo sweep` with the local launcher: a 2 variants x 2 seeds sweep of tiny gridnav runs,
its summary against the runs' own metrics.jsonl, re-runs that skip / resume, and refusals before launch."""

from __future__ import annotations

import csv
import math

import numpy as np
import pytest

from ddppo.sweep.launch import sweep
from ddppo.errors import SweepError
from ddppo.sweep.summary import format_stat
from sweep_helpers import read_updates

STEPS_PER_UPDATE = 4 * 32
METRICS = ["train/reward", "train/episode_length", "train/success"]
VARIANTS = [{"name": "short", "env.gridnav.max_episode_steps": 6},
            {"name": "long", "env.gridnav.max_episode_steps": 24}]


def final(records, metric):
    return next(r[metric] for r in reversed(records) if r.get(metric) is not None)


def snapshot(sweep_dir):
    """Contents of every metrics.jsonl and run log, to see that nothing ran."""
    files = sorted(sweep_dir.glob("runs/*/metrics.jsonl")) + sorted(sweep_dir.glob("logs/*.log"))
    return {f.relative_to(sweep_dir): f.read_bytes() for f in files}


def rerun(spec, sweep_dir, *items):
    """`ddppo sweep SPEC ITEMS --sweep-dir DIR` in this process: (exit code, stdout text)."""
    out = []
    rc = sweep(spec, items, sweep_dir=sweep_dir, out=out.append)
    return rc, "".join(out)


@pytest.mark.slow
def test_local_sweep_summary_rerun_skips_and_resumes(cli, spec_file, tmp_path):
    sweep_dir = tmp_path / "sweep"
    spec = spec_file(list=VARIANTS, seeds=[0, 1],
                     overrides={"run.total_env_steps": 3 * STEPS_PER_UPDATE})
    r = cli("sweep", str(spec), "--sweep-dir", str(sweep_dir), "--max-parallel", "4", timeout=400)
    assert r.returncode == 0, r
    assert "runs: 4 done" in r.stdout, r
    names = ["short,seed=0", "short,seed=1", "long,seed=0", "long,seed=1"]
    assert sorted(p.name for p in (sweep_dir / "runs").iterdir()) == sorted(names)
    records = {}
    for name in names:
        run_dir = sweep_dir / "runs" / name
        records[name] = read_updates(run_dir)
        assert [u["update"] for u in records[name]] == [1, 2, 3], name
        cfg = (run_dir / "config.yaml").read_text()
        assert f"seed: {name[-1]}" in cfg and f"max_episode_steps: {6 if 'short' in name else 24}" in cfg
        assert (sweep_dir / "logs" / f"{name}.log").read_text().count("finished: 384 env steps") == 1

    # summary: every number recomputed here from the runs' metrics.jsonl
    r = cli("sweep", "summary", str(sweep_dir), "--metrics", ",".join(METRICS), "--sort", "train/episode_length")
    assert r.returncode == 0, r
    with open(sweep_dir / "summary" / "summary.csv") as f:
        rows = {row["variant"]: row for row in csv.DictReader(f)}
    assert set(rows) == {"short", "long"}
    for variant in rows:
        runs = [records[f"{variant},seed={s}"] for s in (0, 1)]
        assert (rows[variant]["runs"], rows[variant]["done"]) == ("2", "2")
        cells = []
        for metric in METRICS:
            values = [final(recs, metric) for recs in runs]
            mean, std = float(np.mean(values)), float(np.std(values, ddof=1))
            assert float(rows[variant][f"{metric}_mean"]) == mean, (variant, metric)
            assert math.isclose(float(rows[variant][f"{metric}_std"]), std, abs_tol=1e-12), (variant, metric)
            cells.append(format_stat(mean, std))
        assert f"| {variant} | 2 | 2 done | 384 | {' | '.join(cells)} |" in r.stdout, r
    # sorted by the --sort metric's mean, largest first
    by_length = {v: float(rows[v]["train/episode_length_mean"]) for v in rows}
    table = [line.split(" | ")[0][2:] for line in r.stdout.splitlines() if line.startswith("| ")][1:]
    assert table == sorted(by_length, key=lambda v: -by_length[v]), r
    assert (sweep_dir / "summary" / "curves.png").stat().st_size > 10_000
    assert (sweep_dir / "summary" / "train_episode_length.png").exists()

    # re-run: every run is done, nothing is launched or written to the runs
    before = snapshot(sweep_dir)
    rc, text = rerun(spec, sweep_dir)
    assert rc == 0 and text.count("skip (done)") == 4 and "nothing to launch" in text, text
    assert snapshot(sweep_dir) == before

    # an interrupted run (last checkpoint and metrics line lost) is resumed; the others are skipped
    victim = sweep_dir / "runs" / "long,seed=1"
    (victim / "checkpoints" / "ckpt-3.pt").unlink()
    lines = (victim / "metrics.jsonl").read_text().splitlines(keepends=True)
    (victim / "metrics.jsonl").write_text("".join(lines[:2]))
    rc, text = rerun(spec, sweep_dir)
    assert rc == 0 and text.count("skip (done)") == 3 and text.count("resume") == 1, text
    assert [u["update"] for u in read_updates(victim)] == [1, 2, 3]
    assert "resumed from" in (sweep_dir / "logs" / "long,seed=1.log").read_text()
    after = snapshot(sweep_dir)
    assert {k: v for k, v in after.items() if "long,seed=1" not in str(k)} == \
        {k: v for k, v in before.items() if "long,seed=1" not in str(k)}

    # a spec change that changes existing runs' configs is refused, naming them; nothing runs
    with pytest.raises(SweepError) as err:
        rerun(spec, sweep_dir, "ppo.epochs=2")
    assert "run 'short,seed=0' already exists" in str(err.value) and "ppo.epochs: 1 -> 2" in str(err.value)
    assert snapshot(sweep_dir) == after


def test_dry_run_lists_runs_and_overrides_without_launching(cli, spec_file, tmp_path):
    sweep_dir = tmp_path / "sweep"
    spec = spec_file(grid={"ppo.lr": [1e-3, 2.5e-4], "preemption.sync_frac": [0.5]}, seeds=2, ranks=2)
    r = cli("sweep", str(spec), "ppo.epochs=2", "--sweep-dir", str(sweep_dir), "--dry-run")
    assert r.returncode == 0, r
    assert "4 runs (2 variants x 2 seeds), 2 rank(s) each" in r.stdout, r
    assert "ppo.epochs=2" in r.stdout.split("fixed overrides:")[1].splitlines()[0]
    for i, (lr, seed) in enumerate([("0.001", 0), ("0.001", 1), ("0.00025", 0), ("0.00025", 1)]):
        line = next(line for line in r.stdout.splitlines() if line.strip().startswith(f"{i}  "))
        assert f"lr={lr},sync_frac=0.5,seed={seed}" in line and "new" in line, line
        assert f"ppo.lr={lr} preemption.sync_frac=0.5 run.seed={seed}" in line, line
    assert "dry run: nothing launched or written" in r.stdout
    assert not sweep_dir.exists()


def test_bad_value_refused_before_launch_naming_run_and_key(cli, spec_file, tmp_path):
    sweep_dir = tmp_path / "sweep"
    spec = spec_file(list=[{"name": "ok", "ppo.num_mini_batch": 2}, {"name": "bad", "ppo.num_mini_batch": 3}],
                     seeds=1)
    r = cli("sweep", str(spec), "--sweep-dir", str(sweep_dir))
    assert r.returncode == 2, r
    assert "run 'bad,seed=0'" in r.stderr and "ppo.num_mini_batch=3 must divide env.num_envs=4" in r.stderr, r
    assert "'ok,seed=0'" not in r.stderr and "Traceback" not in r.stderr, r
    assert not sweep_dir.exists()
    with pytest.raises(SweepError, match="ppo.lrr"):
        rerun(spec, sweep_dir, "ppo.lrr=1e-3")
    assert not sweep_dir.exists()
