"""Learning parity of rollout.mode=fixed vs variable: env steps to a success/SPL threshold, per seed.

    ddppo bench rollout-parity [--seeds 1 2 3] [--out benchmarks/results/rollout_parity.json] [OVERRIDE...]

Each (seed, mode) runs `ddppo train configs/gridnav.yaml env.num_workers=8 run.total_env_steps=800000
rollout.mode=MODE run.seed=SEED OVERRIDE...` in its own process (fixed and variable of one seed side by side);
a run is stopped with SIGTERM (it saves and exits) at the first update whose windowed train/success >= 0.95
and train/spl >= 0.85, and that update's env_steps is its figure. Prints per-seed figures, medians and the
variable/fixed ratio, and writes them as JSON.
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ddppo.config.loading import shipped_config

NAME = "rollout-parity"
HELP = "rollout.mode fixed vs variable: env steps to a gridnav threshold"

BASE = ["env.num_workers=8", "run.total_env_steps=800000", "log.interval_s=30", "log.tensorboard=false"]
SUCCESS, SPL = 0.95, 0.85


def _hit(run_dir: Path) -> int | None:
    try:
        rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    except (OSError, ValueError):
        return None
    return next((int(r["env_steps"]) for r in rows
                 if r.get("train/success", 0) >= SUCCESS and r.get("train/spl", 0) >= SPL), None)


def run_pair(seed: int, overrides: list[str], tmp: Path) -> dict[str, int | None]:
    procs, dirs = {}, {}
    for mode in ("fixed", "variable"):
        dirs[mode] = tmp / f"{mode}_s{seed}"
        cmd = [sys.executable, "-m", "ddppo", "train", str(shipped_config("gridnav")),
               f"run.dir={dirs[mode]}", *BASE, f"rollout.mode={mode}", f"run.seed={seed}", *overrides]
        procs[mode] = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    found: dict[str, int | None] = {m: None for m in procs}
    while any(p.poll() is None for p in procs.values()):
        time.sleep(5)
        for mode, p in procs.items():
            if p.poll() is None and found[mode] is None:
                found[mode] = _hit(dirs[mode])
                if found[mode] is not None:
                    p.send_signal(signal.SIGTERM)
    for mode in procs:
        found[mode] = found[mode] if found[mode] is not None else _hit(dirs[mode])
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ddppo bench rollout-parity", description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--out", default="results/rollout_parity.json")
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ddppo-parity-") as tmp:
        runs = {seed: run_pair(seed, args.overrides, Path(tmp)) for seed in args.seeds}
    result: dict = {"threshold": {"success": SUCCESS, "spl": SPL}, "base": BASE, "overrides": args.overrides,
                    "steps_to_threshold": {str(s): r for s, r in runs.items()}}
    for mode in ("fixed", "variable"):
        hits = [r[mode] for r in runs.values() if r[mode] is not None]
        result[f"{mode}_median"] = statistics.median(hits) if hits else None
    if result["fixed_median"] and result["variable_median"]:
        result["variable_over_fixed"] = result["variable_median"] / result["fixed_median"]
    for seed, r in runs.items():
        print(f"seed {seed}: fixed {r['fixed']}, variable {r['variable']}")  # noqa: T201
    print(json.dumps({k: v for k, v in result.items() if k.endswith(("median", "fixed"))}))  # noqa: T201
    Path(args.out).write_text(json.dumps(result, indent=2))
    return 0


