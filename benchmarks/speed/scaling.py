"""Distributed scaling of the real trainer, in one run:

  (a) gridnav, 1 rank vs 2 ranks (torchrun), the same per-rank config: fps and ratio (goal >= 1.8x on 2 cores);
  (b) 8 ranks on the sleep-based synthetic env with rank 7 3x slower: preemption.sync_frac=0.6 vs 1.0
      (1.0 = wait for every rank; goal >= 2x).

    ddppo bench scaling [--out benchmarks/results/scaling.json] [--updates 30] [--repeats 1]
                                 [--parts gridnav,slow8]

fps comes from metrics.jsonl: env steps / wall time between the end of the first
update and the end of the last one (start-up and the first update excluded).
Prints a table and writes JSON; performance is never asserted in tests. On a
machine shared with other jobs the ratios are noisy (and 2 ranks get a larger
share of an oversubscribed CPU than 1): note the load average it prints, and use
--repeats to report medians.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ddppo.benchmarks.common import child_env
from ddppo.config.loading import shipped_config
from ddppo.files import atomic_write
from ddppo.rundir import RunDir

NAME = "scaling"
HELP = "1 vs 2 ranks (torchrun) and preemption with a slow rank, on the real trainer"

# (a): the per-rank config of configs/gridnav.yaml, shortened; one intra-op thread per rank (1 rank per core)
GRIDNAV = ["env.num_envs=16", "rollout.num_steps=64", "run.torch_threads=1", "log.tensorboard=false",
           "log.interval_s=5", "checkpoint.interval_updates=100000"]
GRIDNAV_STEPS_PER_RANK_UPDATE = 16 * 64

# (b): a sleep-bound env, so 8 ranks fit on 2 cores; rank 7 sleeps 3x longer per step
SLOW_ENV = ["env.name=synthetic", "env.num_envs=4", "rollout.num_steps=32", "env.synthetic.step_sleep_s=0.03",
            "env.synthetic.slow_ranks=[7]", "env.synthetic.slow_factor=3", "preemption.min_rollout_fraction=0.25",
            "ppo.epochs=2", "ppo.num_mini_batch=2", "policy.hidden_size=32", "run.torch_threads=1",
            "log.tensorboard=false", "log.interval_s=5", "checkpoint.interval_updates=100000", "dist.timeout_s=120"]
SLOW_ENV_STEPS_PER_RANK_UPDATE = 4 * 32


def train(nproc: int, config: Path, run_dir: Path, overrides: list[str], timeout_s: float) -> dict:
    """One real training run; returns fps and per-update figures read from its metrics.jsonl."""
    # CPU figures (1 rank per core): on a GPU machine auto would put the ranks on (shared) GPUs
    args = ["-m", "ddppo", "train", str(config), f"run.dir={run_dir}", "dist.device=cpu", *overrides]
    if nproc == 1:
        cmd = [sys.executable, *args]
    else:
        torchrun = Path(sys.executable).parent / "torchrun"
        head = [str(torchrun)] if torchrun.exists() else [sys.executable, "-m", "torch.distributed.run"]
        cmd = [*head, "--standalone", f"--nproc_per_node={nproc}", *args[1:]]
    start = time.monotonic()
    log = run_dir.with_name(run_dir.name + ".log")
    with open(log, "w") as f:
        proc = subprocess.run(cmd, env=child_env(), stdout=f, stderr=subprocess.STDOUT, timeout=timeout_s)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed (rc={proc.returncode}); full log: {log}")
    rows = RunDir(run_dir).metrics()
    if len(rows) < 3:
        raise RuntimeError(f"{run_dir}: only {len(rows)} updates; raise --updates")
    first, last = rows[0], rows[-1]
    fps = (last["env_steps"] - first["env_steps"]) / (last["wall_time"] - first["wall_time"])
    later = rows[1:]
    return {
        "ranks": nproc, "updates": len(rows), "fps": fps, "run_s": time.monotonic() - start,
        "update_s_mean": statistics.mean(r["perf/update_s"] for r in later),
        "steps_fraction_min_mean": statistics.mean(r["preempt/steps_fraction_min"] for r in later),
        "num_preempted_mean": statistics.mean(r["preempt/num_preempted"] for r in later),
        "straggler_wait_s_max_mean": statistics.mean(r["preempt/straggler_wait_s_max"] for r in later),
    }


def median_run(runs: list[dict]) -> dict:
    """The run with the median fps (other jobs on the machine make single runs noisy), plus every fps."""
    ordered = sorted(runs, key=lambda r: r["fps"])
    out = dict(ordered[len(ordered) // 2])
    out["fps_all"] = [r["fps"] for r in runs]
    return out


def load_average() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ddppo bench scaling", description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="results/scaling.json", help="JSON output")
    parser.add_argument("--updates", type=int, default=30, help="updates per gridnav run (the 8-rank runs do 12+)")
    parser.add_argument("--repeats", type=int, default=1, help="runs per configuration (the median is reported)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds allowed per training run")
    parser.add_argument("--parts", default="gridnav,slow8", help="which comparisons: gridnav, slow8 or both")
    args = parser.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="ddppo-scaling-"))  # kept (with every run's log) when a run fails
    try:
        empty = work / "empty.yaml"
        empty.write_text("{}\n")
        gridnav_yaml = shipped_config("gridnav")
        load_before = load_average()
        plans = {}  # name -> (ranks, config, overrides)
        parts = set(args.parts.split(","))
        for nproc in (1, 2) if "gridnav" in parts else ():
            total = args.updates * nproc * GRIDNAV_STEPS_PER_RANK_UPDATE
            plans[f"gridnav_{nproc}rank"] = (nproc, gridnav_yaml, GRIDNAV + [f"run.total_env_steps={total}"])
        for frac in ("0.6", "1.0") if "slow8" in parts else ():
            total = 12 * 8 * SLOW_ENV_STEPS_PER_RANK_UPDATE  # 12 full updates; more when ranks are preempted
            plans[f"slow8_sync{frac}"] = (8, empty, SLOW_ENV + [f"preemption.sync_frac={frac}",
                                                                f"run.total_env_steps={total}"])
        runs: dict[str, list[dict]] = {name: [] for name in plans}
        for rep in range(args.repeats):  # interleaved, so slow phases of the machine hit every configuration
            for name, (nproc, config, overrides) in plans.items():
                runs[name].append(train(nproc, config, work / f"{name}-{rep}", overrides, args.timeout))
        results = {name: median_run(r) for name, r in runs.items()}
        load_after = load_average()
    except BaseException:
        sys.stderr.write(f"scaling: a run failed; logs and run dirs kept in {work}\n")
        raise
    shutil.rmtree(work, ignore_errors=True)

    def ratio(a: str, b: str) -> float | None:
        return results[a]["fps"] / results[b]["fps"] if a in results and b in results else None

    scaling = ratio("gridnav_2rank", "gridnav_1rank")
    preempt = ratio("slow8_sync0.6", "slow8_sync1.0")
    report = {
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
                    "load_average_before": load_before, "load_average_after": load_after},
        "runs": results,
        "ratios": {"gridnav_2rank_over_1rank": scaling, "goal_gridnav": 1.8,
                   "slow8_sync0.6_over_sync1.0": preempt, "goal_preemption": 2.0},
        "repeats": args.repeats,
        "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(out, json.dumps(report, indent=2) + "\n")

    lines = [f"{'run':<16} {'ranks':>5} {'updates':>7} {'fps':>9} {'update s':>8} {'min steps frac':>15} "
             f"{'preempted':>9} {'wait s':>6}"]
    for name, r in results.items():
        lines.append(f"{name:<16} {r['ranks']:>5} {r['updates']:>7} {r['fps']:>9,.0f} {r['update_s_mean']:>8.2f} "
                     f"{r['steps_fraction_min_mean']:>15.2f} {r['num_preempted_mean']:>9.2f} "
                     f"{r['straggler_wait_s_max_mean']:>6.2f}")
        if args.repeats > 1:
            lines[-1] += "   fps of each run: " + ", ".join(f"{f:,.0f}" for f in r["fps_all"])
    if scaling is not None:
        lines.append(f"gridnav 2 ranks / 1 rank:            {scaling:.2f}x (goal >= 1.8x)")
    if preempt is not None:
        lines.append(f"8 ranks, one 3x slower: sync 0.6/1.0: {preempt:.2f}x (goal >= 2x)")
    lines.append(f"load average (1 min) before/after: {load_before} / {load_after}; cpus: {os.cpu_count()}")
    lines.append(f"JSON: {out}")
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


