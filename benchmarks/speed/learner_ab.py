"""Learner time per update, this checkout vs another one (e.g. the main branch), interleaved in one run.

    ddppo bench learner-ab --baseline /path/to/other/checkout [--baseline-python PYTHON] [--rounds 3]
                           [--steps 20480] [--out benchmarks/results/learner_ab.json] [CONFIG OVERRIDE...]

Each round trains the same config (default configs/cartpole.yaml, 1 rank, 1 thread) once with each checkout,
alternating, as `python -m ddppo train` subprocesses; per update, from metrics.jsonl (first update left out):
learner seconds (forward/backward + all-reduce + optimiser phases), rollout seconds (policy forward, env step,
transfer, storage) and update wall time. Medians over rounds; ratios this/baseline.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

from ddppo.config.loading import shipped_config
from ddppo.files import atomic_write

NAME = "learner-ab"
HELP = "learner time per update, this checkout vs another one, interleaved"

LEARN = ("learn_forward_backward", "allreduce", "optimizer")
ROLLOUT = ("policy_forward", "env_step", "obs_transfer", "storage")


def run(checkout: Path, config: str, overrides: list[str], steps: int, python: str = sys.executable
        ) -> dict[str, float]:
    """One run of `checkout`, with `python` (default: this one, the checkout first on its path; give a baseline's
    own environment where its packages differ, e.g. a checkout whose `envs/` moved on)."""
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "PYTHONPATH": str(checkout), "OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"}
        args = [python, "-m", "ddppo", "train", config, f"run.dir={tmp}/run", f"run.total_env_steps={steps}",
                "run.torch_threads=1", "log.tensorboard=false", "checkpoint.interval_updates=100000", *overrides]
        subprocess.run(args, cwd=checkout, env=env, check=True, capture_output=True, timeout=1800)
        first, *rows = [json.loads(x) for x in (Path(tmp) / "run" / "metrics.jsonl").read_text().splitlines()]
    n = len(rows)
    return {"learner_s": sum(r.get(f"perf/{p}_s", 0.0) for r in rows for p in LEARN) / n,
            "rollout_s": sum(r.get(f"perf/{p}_s", 0.0) for r in rows for p in ROLLOUT) / n,
            "update_s": sum(r["perf/update_s"] for r in rows) / n,
            "steps_per_s": (rows[-1]["env_steps"] - first["env_steps"]) / sum(r["perf/update_s"] for r in rows)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="ddppo bench learner-ab", description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", required=True, help="another checkout of ddppo (its root folder)")
    ap.add_argument("--baseline-python", default=sys.executable,
                    help="the Python that runs the baseline (default: this one, the baseline first on its path)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=20480)
    ap.add_argument("--out", default="results/learner_ab.json")
    ap.add_argument("case", nargs="*", default=[str(shipped_config("cartpole"))])
    args = ap.parse_args(argv)
    config, overrides = args.case[0], args.case[1:]
    sides = {"this": REPO, "baseline": Path(args.baseline).resolve()}
    rows = []
    python = {"this": sys.executable, "baseline": args.baseline_python}
    for r in range(args.rounds):
        order = list(sides.items())
        for name, checkout in order if r % 2 == 0 else order[::-1]:  # alternate who goes first
            rows.append({"round": r, "side": name, **run(checkout, config, overrides, args.steps, python[name])})
    med = {name: {k: statistics.median(x[k] for x in rows if x["side"] == name)
                  for k in ("learner_s", "rollout_s", "update_s", "steps_per_s")} for name in sides}
    ratios = {k: med["this"][k] / med["baseline"][k] for k in med["this"]}
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"per update, medians of {args.rounds} interleaved rounds, {config} {' '.join(overrides)} "
          f"(load {load:.1f}):")  # noqa: T201
    for k in ("learner_s", "rollout_s", "update_s"):
        print(f"  {k:>10}: this {1e3 * med['this'][k]:8.1f} ms  baseline {1e3 * med['baseline'][k]:8.1f} ms  "
              f"this/baseline {ratios[k]:.3f}x")  # noqa: T201
    print(f"  {'steps/s':>10}: this {med['this']['steps_per_s']:8.0f}     baseline "
          f"{med['baseline']['steps_per_s']:8.0f}     this/baseline {ratios['steps_per_s']:.3f}x")  # noqa: T201
    atomic_write(args.out, json.dumps({"rows": rows, "median": med, "ratios": ratios, "load": load,
                                          "baseline": str(sides["baseline"]), "time": time.time()}, indent=2))
    print(f"wrote {args.out}")  # noqa: T201
    return 0


