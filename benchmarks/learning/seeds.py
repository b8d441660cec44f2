"""`ddppo bench seeds`: success of a shipped config's variants over seeds, at the same budget, side by side.

    ddppo bench seeds CONFIG [OVERRIDE ...] --variant NAME KEY=VALUE ... [--variant NAME KEY=VALUE ...] [--seeds 1 2 3]
                      [--steps N] [--episodes 200] [--out results/seeds.json]

e.g. fp32 vs bf16 on depth-camera PointNav (issue 55):

    ddppo bench seeds gridnav_depth --variant fp32 run.precision=fp32 --variant bf16 run.precision=bf16 \\
        --steps 600000

Each (seed, variant) trains CONFIG with the variant's overrides, then the common ones, `run.seed` and
`run.total_env_steps` (default: the config's own), as a `python -m ddppo train` subprocess with one torch thread,
seed by seed so the variants share the machine's conditions; then `ddppo eval` runs its final checkpoint (greedy,
fresh episodes). Reported per variant: evaluation success and SPL per seed, their mean, a 95% interval of the mean
(t-distribution over the seeds), and each run's median training fps. Written as JSON; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Sequence

from ddppo.benchmarks.common import report
from ddppo.eval.stats import t_quantile

NAME = "seeds"
HELP = ("success of a config's variants (KEY=VALUE overrides) over seeds at one budget, with 95% intervals: "
        "e.g. fp32 vs bf16 on gridnav_depth")


def run(config: str, variant: str, overrides: Sequence[str], seed: int, steps: int | None, episodes: int) -> dict:
    """Train `config` with `overrides` at `seed` (and `steps` env steps), evaluate the final checkpoint: a row."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    with tempfile.TemporaryDirectory(prefix="ddppo-bench-seeds-") as tmp:
        run_dir = Path(tmp) / "run"
        budget = [] if steps is None else [f"run.total_env_steps={steps}"]
        train = subprocess.run([sys.executable, "-m", "ddppo", "train", config, f"run.dir={run_dir}", *overrides,
                                f"run.seed={seed}", *budget, "log.tensorboard=false", "run.torch_threads=1"],
                               env=env, capture_output=True, text=True)
        if train.returncode != 0:
            raise SystemExit(f"ddppo bench seeds: {variant} seed {seed} failed to train:\n{train.stderr[-2000:]}")
        subprocess.run([sys.executable, "-m", "ddppo", "eval", str(run_dir), f"eval.num_episodes={episodes}"],
                       env=env, check=True, capture_output=True)
        rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
        (result,) = (run_dir / "eval").glob("ckpt-*.json")
        metrics = json.loads(result.read_text())["metrics"]
    return {"variant": variant, "seed": seed, "env_steps": rows[-1].get("env_steps"),
            "success": metrics["success"]["mean"], "spl": metrics.get("spl", {}).get("mean"),
            "train_success": rows[-1].get("train/success"), "fps": statistics.median(r["fps"] for r in rows),
            "wall_s": rows[-1].get("wall_time", 0) - rows[0].get("wall_time", 0)}


def interval(values: list[float]) -> tuple[float, float]:
    """The mean and the half-width of its 95% t-interval (0 for one value)."""
    mean = statistics.mean(values)
    if len(values) < 2:
        return mean, 0.0
    return mean, t_quantile(0.975, len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))


def table(title: str, variants: Sequence[str], runs: list[dict]) -> list[str]:
    lines = [title, f"{'variant':<14}{'success (mean +- 95%)':>24}{'spl':>8}{'fps':>8}  success per seed"]
    for name in variants:
        mine = [r for r in runs if r["variant"] == name]
        mean, half = interval([r["success"] for r in mine])
        spl = [r["spl"] for r in mine if r["spl"] is not None]
        lines.append(f"{name:<14}{mean:>16.3f} +- {half:.3f}{statistics.mean(spl) if spl else float('nan'):>8.3f}"
                     f"{statistics.median(r['fps'] for r in mine):>8.0f}  "
                     f"{', '.join(format(r['success'], '.3f') for r in mine)}")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="ddppo bench seeds", description=__doc__.splitlines()[0])
    ap.add_argument("config", help="a shipped config name or a YAML file")
    ap.add_argument("--variant", nargs="+", action="append", required=True, metavar=("NAME", "KEY=VALUE"),
                    help="a variant: its name, then its overrides (repeat for each variant)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--steps", type=int, default=None, help="env steps per run (default: the config's own)")
    ap.add_argument("--episodes", type=int, default=200, help="evaluation episodes per run")
    ap.add_argument("--out", default="results/seeds.json")
    ap.add_argument("overrides", nargs="*", help="key=value overrides for every run, after the variant's")
    args = ap.parse_args(argv)
    variants = {v[0]: v[1:] for v in args.variant}
    runs = [run(args.config, name, [*extra, *args.overrides], seed, args.steps, args.episodes)
            for seed in args.seeds for name, extra in variants.items()]
    budget = f"{args.steps:,} env steps" if args.steps else "the config's budget"
    lines = table(f"{args.config}, {budget} per run, seeds {args.seeds}, eval {args.episodes} episodes",
                  list(variants), runs)
    return report(lines, {"args": vars(args), "runs": runs}, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
