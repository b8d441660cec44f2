"""ddppo against stable-baselines3 PPO side by side, the protocol `ddppo bench minigrid` and `ddppo bench atari`
share: each (seed, side) is a process of its own with one torch thread, started by the same command line and timed
from start to exit (imports, env construction and learning: the wall clock a user waits). ddppo's side is
`python -m ddppo train CONFIG` as a user runs it; SB3's side is a function of the task's module run in that process.

Figures per run: env steps/s over the wall time; env steps per CPU second (user + system time of the run's process
and the children it waited for; env workers started through a forkserver are not its children, so with
env.num_workers > 0 ddppo's CPU time is undercounted: compare wall clocks there); the return at the budget (SB3:
the mean of its last 100 episodes, `ep_info_buffer`; ddppo: `train/reward`, the episodes of its last log.window
updates, the task's window); and the learning curve, both sides' return at each rollout's end. Prints figures and
writes them as JSON; nothing is asserted.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

CURVE_POINTS = 5  # the printed curve: the mean return over seeds at budget x k / CURVE_POINTS


@dataclass(frozen=True)
class Task:
    """What a side-by-side benchmark compares; the runner is the same for every task."""

    name: str  # `ddppo bench NAME`, and the module ddppo.benchmarks.peers.<module> whose --one runs a side
    module: str
    description: str
    default_env: str
    needs: tuple[str, ...]  # modules both sides import
    extras: str  # the pip extras that bring them
    config: str  # ddppo's shipped config
    env_name: Callable[[str], str]  # --env -> env.name
    window: int  # ddppo's log.window: updates whose finished episodes make train/reward
    sb3_run: Callable[[str, int, int], dict]  # (env, seed, budget) -> {"env_steps", "return", "curve"}


def sb3_curve():
    """An SB3 callback that records (env steps, mean return of the last 100 episodes) at each rollout's end."""
    from stable_baselines3.common.callbacks import BaseCallback

    class Curve(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.points: list[list] = []

        def _on_step(self) -> bool:
            return True

        def _on_rollout_end(self) -> None:
            buf = self.model.ep_info_buffer
            self.points.append([int(self.num_timesteps), statistics.fmean(e["r"] for e in buf) if buf else None])

    return Curve()


def sb3_figures(model, curve) -> dict:
    returns = [e["r"] for e in model.ep_info_buffer]
    return {"env_steps": int(model.num_timesteps), "return": statistics.fmean(returns) if returns else None,
            "curve": curve.points}


def ddppo_run(task: Task, env: str, seed: int, budget: int, run_dir: Path, overrides: list[str]) -> dict:
    """One ddppo run (a `python -m ddppo train CONFIG` process); its figures."""
    res = subprocess.run([sys.executable, "-m", "ddppo", "train", task.config, f"run.dir={run_dir}",
                          f"run.seed={seed}", f"run.total_env_steps={budget}", f"env.name={task.env_name(env)}",
                          "run.torch_threads=1", "dist.device=cpu", "log.tensorboard=false",
                          f"log.window={task.window}", *overrides], capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"ddppo train failed: {res.stderr[-2000:]}")
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return {"env_steps": int(rows[-1]["env_steps"]), "return": rows[-1].get("train/reward"),
            "curve": [[int(r["env_steps"]), r.get("train/reward")] for r in rows]}


def job(task: Task, side: str, env: str, seed: int, budget: int, tmp: Path, overrides: list[str]) -> dict:
    """One (side, seed) as a process of its own, timed from start to exit."""
    start = time.perf_counter()
    cmd = [sys.executable, "-m", f"ddppo.benchmarks.peers.{task.module}", "--one", side, "--env", env, "--seeds",
           str(seed), "--budget", str(budget), "--out", str(tmp / f"{side}-{seed}"),
           *(["--set", *overrides] if overrides else [])]
    res = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    wall = time.perf_counter() - start
    if res.returncode != 0:
        raise RuntimeError(f"{side} seed {seed} failed: {res.stderr[-2000:]}")
    figures = json.loads(res.stdout.splitlines()[-1])
    return {"side": side, "seed": seed, "wall_s": wall, "steps_per_s": figures["env_steps"] / wall,
            "steps_per_cpu_s": figures["env_steps"] / figures["cpu_s"], **figures}


def return_at(curve: list[list], steps: int) -> float | None:
    """The curve's return at the last rollout that ended at or before `steps` env steps."""
    before = [r for s, r in curve if s <= steps and r is not None]
    return before[-1] if before else None


def main(task: Task, argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog=f"ddppo bench {task.name}", description=task.description)
    ap.add_argument("--env", default=task.default_env, help=f"the env id (default {task.default_env})")
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--budget", type=int, default=100_000, help="env steps per run")
    ap.add_argument("--jobs", type=int, default=1, help="runs at a time (a seed's two sides start together)")
    ap.add_argument("--out", default=f"results/{task.name}.json", help="JSON output path")
    ap.add_argument("--set", nargs="+", default=[], metavar="KEY=VALUE",
                    help=f"ddppo's side: overrides of configs/{task.config}.yaml (e.g. run.precision=fp32)")
    ap.add_argument("--one", choices=("sb3", "ddppo"), help=argparse.SUPPRESS)  # a job's own process
    args = ap.parse_args(argv)
    missing = [m for m in ("stable_baselines3", *task.needs) if importlib.util.find_spec(m) is None]
    if missing:
        sys.stderr.write(f"ddppo bench {task.name} needs {' and '.join(missing)}: "
                         f"pip install -e \".[bench,{task.extras}]\"\n")
        return 2
    if args.one:
        seed = args.seeds[0]
        if args.one == "sb3":
            import torch

            torch.set_num_threads(1)
            figures = task.sb3_run(args.env, seed, args.budget)
        else:
            figures = ddppo_run(task, args.env, seed, args.budget, Path(args.out), args.set)
        times = os.times()  # this process and the ones it waited for (ddppo's train process)
        figures["cpu_s"] = times.user + times.system + times.children_user + times.children_system
        print(json.dumps(figures))
        return 0
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(args.jobs) as pool:
        futures = [pool.submit(job, task, side, args.env, seed, args.budget, Path(tmp), args.set)
                   for seed in args.seeds for side in ("ddppo", "sb3")]
        runs = [f.result() for f in futures]
    summary = report(task, args, runs)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"command": sys.argv, "env": args.env, "budget": args.budget, "cpus": os.cpu_count(),
                               "jobs": args.jobs, "ddppo_overrides": args.set, "ddppo_window_updates": task.window,
                               "runs": runs, "summary": summary}, indent=2) + "\n")
    print(f"wrote {out}")
    return 0


def report(task: Task, args: argparse.Namespace, runs: list[dict]) -> dict:
    """Print the runs, the means per side, the throughput ratios and the learning curve; the summary."""
    print(f"{args.env}, {args.budget:,} env steps per run, {os.cpu_count()} CPUs, {args.jobs} job(s) at a time"
          + (f", ddppo with {' '.join(args.set)}" if args.set else ""))
    print(f"  {'side':<6} {'seed':>4} {'wall s':>8} {'steps/s':>8} {'cpu s':>7} {'steps/cpu s':>11} {'return':>7}")
    for r in runs:
        ret = "-" if r["return"] is None else f"{r['return']:.3f}"
        print(f"  {r['side']:<6} {r['seed']:>4} {r['wall_s']:>8.1f} {r['steps_per_s']:>8.0f} {r['cpu_s']:>7.1f} "
              f"{r['steps_per_cpu_s']:>11.0f} {ret:>7}")
    summary: dict = {}
    for side in ("ddppo", "sb3"):
        mine = [r for r in runs if r["side"] == side]
        summary[side] = {key: statistics.fmean(r[key] for r in mine) for key in ("steps_per_s", "steps_per_cpu_s")}
        summary[side]["return"] = statistics.fmean(r["return"] or 0.0 for r in mine)
        print(f"  {side}: mean {summary[side]['steps_per_s']:.0f} steps/s, {summary[side]['steps_per_cpu_s']:.0f} "
              f"steps per CPU s, return {summary[side]['return']:.3f}")
    ratio = {key: summary["ddppo"][key] / summary["sb3"][key] for key in ("steps_per_s", "steps_per_cpu_s")}
    summary["ratio"] = ratio
    print(f"  throughput ddppo / sb3: {ratio['steps_per_s']:.2f}x wall clock, {ratio['steps_per_cpu_s']:.2f}x per "
          f"CPU second")
    print(f"  learning curve, mean return over seeds (SB3: its last 100 episodes; ddppo: the episodes of its last "
          f"{task.window} updates)")
    print(f"  {'env steps':>10} {'ddppo':>8} {'sb3':>8}")
    summary["curve"] = []
    for k in range(1, CURVE_POINTS + 1):
        steps = args.budget * k // CURVE_POINTS
        point = {"env_steps": steps}
        for side in ("ddppo", "sb3"):
            values = [v for r in runs if r["side"] == side and (v := return_at(r["curve"], steps)) is not None]
            point[side] = statistics.fmean(values) if values else None
        summary["curve"].append(point)
        cells = ["-" if point[s] is None else f"{point[s]:.3f}" for s in ("ddppo", "sb3")]
        print(f"  {steps:>10,} {cells[0]:>8} {cells[1]:>8}")
    return summary
