"""Memory cores on the memory task: success of each `policy.rnn_type` on gridnav_memory, seeds side by side.

    ddppo bench memory-task [--cores gru lstm transformer none] [--seeds 1 2 3] [--steps 800000]
                            [--episodes 200] [--out results/memory_task.json] [OVERRIDE ...]

Each (seed, core) trains the shipped gridnav_memory config (the goal shown at the first step only: only a policy
with memory can finish) with the same budget, as `python -m ddppo train` subprocesses run one after another, seed by
seed so the cores share the machine's conditions; then `ddppo eval` runs the final checkpoint (greedy, fresh
episodes). Reported: evaluation success and SPL per run, their mean per core, and each run's training fps.
Expectation (issue 54): the transformer at least the GRU within noise, both >= 0.9, none far below.
Budget: at 800k steps a run takes ~10-20 minutes of one CPU core here; 3 seeds x 4 cores is hours.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from ddppo.benchmarks import report

REPO = Path(__file__).resolve().parents[1]


def _run(core: str, seed: int, steps: int, episodes: int, overrides: list[str]) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    with tempfile.TemporaryDirectory(prefix="ddppo-memory-task-") as tmp:
        run = Path(tmp) / "run"
        subprocess.run([sys.executable, "-m", "ddppo", "train", "gridnav_memory", f"run.dir={run}",
                        f"policy.rnn_type={core}", f"run.seed={seed}", f"run.total_env_steps={steps}",
                        "log.tensorboard=false", *overrides], env=env, check=True, capture_output=True)
        subprocess.run([sys.executable, "-m", "ddppo", "eval", str(run), f"eval.num_episodes={episodes}"],
                       env=env, check=True, capture_output=True)
        rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
        (result,) = (run / "eval").glob("ckpt-*.json")
        metrics = json.loads(result.read_text())["metrics"]
    return {"core": core, "seed": seed, "steps": steps, "success": metrics["success"]["mean"],
            "spl": metrics["spl"]["mean"], "train_success": rows[-1].get("train/success"),
            "fps": statistics.median(r["fps"] for r in rows)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="ddppo bench memory-task", description=__doc__.splitlines()[0])
    ap.add_argument("--cores", nargs="+", default=["gru", "lstm", "transformer", "none"],
                    choices=["gru", "lstm", "transformer", "none"])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--steps", type=int, default=800_000, help="env steps per run (gridnav_memory's own budget)")
    ap.add_argument("--episodes", type=int, default=200, help="evaluation episodes per run")
    ap.add_argument("--out", default="results/memory_task.json")
    ap.add_argument("overrides", nargs="*", help="key=value overrides for every run")
    args = ap.parse_args(argv)
    runs = [_run(core, seed, args.steps, args.episodes, args.overrides) for seed in args.seeds for core in args.cores]
    lines = [f"gridnav_memory, {args.steps:,} env steps per run, seeds {args.seeds}, eval {args.episodes} episodes",
             f"{'core':<13}{'success (mean)':>16}{'spl (mean)':>12}{'fps':>8}  success per seed"]
    for core in args.cores:
        mine = [r for r in runs if r["core"] == core]
        lines.append(f"{core:<13}{statistics.mean(r['success'] for r in mine):>16.3f}"
                     f"{statistics.mean(r['spl'] for r in mine):>12.3f}{statistics.median(r['fps'] for r in mine):>8.0f}"
                     f"  {', '.join(format(r['success'], '.3f') for r in mine)}")
    return report(lines, {"args": vars(args), "runs": runs}, args.out)
