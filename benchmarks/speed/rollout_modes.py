"""`ddppo bench rollout`: training throughput of rollout.mode=fixed vs variable, side by side in one run.

For each case one trainer per mode is built in this process (same config, same env workers); rounds of
`updates` full updates (collect, returns, PPO update) alternate between the modes, and each mode's env steps
per second over its rounds are compared (medians). A variable-mode round ends by receiving the steps still
in flight, so the env time they cost is counted in the round that sent them. Also reported per mode: the
per-env steps per rollout (min/mean/max), the share of the rollout the slowest env step took, and the
bottleneck line the trainer would print.

Default cases: the synthetic env with heterogeneous speeds (per-env step times from a log-normal spread,
redrawn every episode, plus slow resets: as habitat scenes and scene switches), the same env homogeneous,
and gridnav through workers. Figures are printed and written as JSON; nothing is asserted.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from typing import Any

import torch

from ddppo.benchmarks import common
from ddppo.config import load_config
from ddppo.config.loading import shipped_config
from ddppo.distributed import init_distributed
from ddppo.train.bottleneck import diagnose
from ddppo.train.stats import StepStats, reduce_stats

NAME = "rollout"
HELP = "rollout.mode=fixed vs variable training fps on heterogeneous/homogeneous envs"

SYNTHETIC = ["env.name=synthetic", "env.num_envs=16", "env.num_workers=16", "rollout.num_steps=32",
             "env.synthetic.step_sleep_s=0.002", "env.synthetic.episode_length=48", "ppo.epochs=2",
             "ppo.num_mini_batch=2", "policy.hidden_size=64"]
UPDATES = 3  # full updates per mode in a round
CASES = {
    "synthetic heterogeneous": SYNTHETIC + ["env.synthetic.step_sleep_sigma=0.75",
                                            "env.synthetic.reset_sleep_s=0.02"],
    "synthetic heterog., wait 0": SYNTHETIC + ["env.synthetic.step_sleep_sigma=0.75",
                                               "env.synthetic.reset_sleep_s=0.02", "rollout.batch_wait_s=0"],
    "synthetic homogeneous": SYNTHETIC,
    "gridnav (8 workers)": ["env.num_workers=8"],
}


def _update(trainer: Any, update: int) -> tuple[int, dict[str, float], dict[str, float]]:
    """One update as `ddppo train` runs it (the learning strategy's step, then the stats reduced over the ranks);
    (env steps, reduced perf, rollout diagnostics)."""
    cfg, ctx = trainer.cfg, trainer.ctx
    t0 = time.perf_counter()
    out = trainer.learning.step(update)
    local = StepStats(out.collected, out.result, 0, time.perf_counter() - t0, out.timings)
    reduced = reduce_stats(ctx, local, cfg.ppo.epochs, cfg.env.num_envs, cfg.rollout.num_steps)
    return out.collected.env_steps, reduced.perf, out.collected.diag


def _round(trainer: Any, first_update: int, updates: int, window: list, diags: list) -> float:
    """env steps per second over `updates` updates (and the receipt of the steps still in flight)."""
    start, steps = time.perf_counter(), 0
    for u in range(updates):
        n, perf, diag = _update(trainer, first_update + u)
        steps += n
        window.append(perf)
        diags.append(diag)
    if hasattr(trainer.collector, "drain"):  # the variable collector: receive the steps in flight
        trainer.collector.drain()
    return steps / (time.perf_counter() - start)


def compare(config: str, overrides: list[str], rounds: int, updates: int) -> dict[str, Any]:
    from ddppo.train.builder import Trainer

    out: dict[str, Any] = {"config": config, "overrides": overrides, "rounds": rounds, "updates_per_round": updates}
    ctx = init_distributed("gloo", "cpu", 60, 60, 0)
    trainers: dict[str, Any] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="ddppo-bench-") as tmp:
            for mode in ("fixed", "variable"):
                cfg = load_config(config, [*overrides, f"rollout.mode={mode}", f"run.dir={tmp}/{mode}",
                                           "log.tensorboard=false"])
                torch.set_num_threads(cfg.run.torch_threads or 1)
                trainers[mode] = Trainer(cfg, ctx)
            fps: dict[str, list[float]] = {m: [] for m in trainers}
            windows: dict[str, list] = {m: [] for m in trainers}
            diags: dict[str, list] = {m: [] for m in trainers}
            for mode, trainer in trainers.items():  # warm-up
                _round(trainer, 1, 1, [], [])
            for r in range(rounds):
                for mode, trainer in trainers.items():
                    fps[mode].append(_round(trainer, 2 + r * updates, updates, windows[mode], diags[mode]))
            for mode in trainers:
                found = diagnose(windows[mode])
                d = diags[mode]
                out[mode] = {
                    "fps": statistics.median(fps[mode]), "fps_rounds": fps[mode],
                    "env_steps_min": min(x["env_steps_min"] for x in d),
                    "env_steps_mean": statistics.mean(x["env_steps_mean"] for x in d),
                    "env_steps_max": max(x["env_steps_max"] for x in d),
                    "slowest_step_share_max": statistics.mean(x["slowest_step_share_max"] for x in d),
                    "slowest_step_share_mean": statistics.mean(x["slowest_step_share_mean"] for x in d),
                    "bottleneck": found.line() if found is not None else "",
                }
    finally:
        for trainer in trainers.values():
            trainer.close()
        ctx.close()
    out["variable_over_fixed"] = out["variable"]["fps"] / out["fixed"]["fps"]
    return out


def _raw_fps(envs: Any, steps: int) -> float:
    import numpy as np

    actions = np.random.default_rng(0).integers(0, envs.action_space.n, (steps, envs.num_envs))
    start = time.perf_counter()
    for a in actions:
        envs.step(a)
    return steps * envs.num_envs / (time.perf_counter() - start)


def rollout_phase(config: str, overrides: list[str], rounds: int) -> dict[str, Any]:
    """Rollout-phase fps of fixed mode in lockstep and double-buffered, and raw stepping of the same envs,
    interleaved (issue 16's rollout/raw figure)."""
    from ddppo.train.builder import Trainer

    ctx = init_distributed("gloo", "cpu", 60, 60, 0)
    trainers: dict[str, Any] = {}
    fps: dict[str, list[float]] = {"raw": [], "lockstep": [], "double_buffered": []}
    try:
        with tempfile.TemporaryDirectory(prefix="ddppo-bench-") as tmp:
            for name, overlap in (("lockstep", False), ("double_buffered", True)):
                cfg = load_config(config, [*overrides, f"rollout.overlap={overlap}", f"run.dir={tmp}/{name}",
                                           "log.tensorboard=false"])
                torch.set_num_threads(cfg.run.torch_threads or 1)
                trainers[name] = Trainer(cfg, ctx)
            storages = {name: t.new_storage() for name, t in trainers.items()}  # collection alone, into its own
            for u in range(rounds + 1):
                for name, trainer in trainers.items():
                    start = time.perf_counter()
                    n = trainer.phases.collect(u, storages[name]).result.env_steps
                    if u:  # round 0 warms up
                        fps[name].append(n / (time.perf_counter() - start))
                if u:
                    fps["raw"].append(_raw_fps(trainers["lockstep"].envs, cfg.rollout.num_steps))
            phases = {name: {k: v / (rounds + 1) for k, v in t.timer.pop().items()} for name, t in trainers.items()}
    finally:
        for trainer in trainers.values():
            trainer.close()
        ctx.close()
    out: dict[str, Any] = {k: statistics.median(v) for k, v in fps.items()}
    out.update({"overrides": overrides, "rounds": rounds, "phases_s_per_rollout": phases,
                "lockstep_over_raw": out["lockstep"] / out["raw"],
                "double_buffered_over_raw": out["double_buffered"] / out["raw"]})
    return out


def main(argv: list[str] | None = None) -> int:
    """The default cases (on gridnav), or the given (config, overrides) cases; each also gets the rollout-phase
    comparison (lockstep vs double-buffered vs raw), which the defaults run on gridnav only."""
    import os

    bench = common.parser(NAME, HELP)
    common.add_case(bench, "a config and overrides to measure (repeatable; default: synthetic heterogeneous and "
                           "homogeneous envs, and gridnav)")
    bench.add_argument("--rounds", type=int, default=5, help="interleaved rounds (medians reported)")
    args = bench.parse_args(argv)
    gridnav = str(shipped_config("gridnav"))
    named = {" ".join(o) or c: (c, o) for c, o in common.cases(args, [])} or {
        name: (gridnav, o) for name, o in CASES.items()}
    phase_cases = named if args.case else {"gridnav (8 workers)": named["gridnav (8 workers)"]}
    results: dict[str, Any] = {"load_average_start": os.getloadavg(), "modes": {}, "rollout_phase": {}}
    for name, (c, o) in named.items():
        results["modes"][name] = compare(c, o, args.rounds, UPDATES)
    for name, (c, o) in phase_cases.items():
        results["rollout_phase"][name] = rollout_phase(c, o, args.rounds)
    results["load_average_end"] = os.getloadavg()
    header = f"{'case':<26}{'fixed fps':>11}{'variable fps':>14}{'var/fixed':>11}   per-env steps (min/mean/max)"
    lines = [header, "-" * len(header)]
    for name, r in results["modes"].items():
        v = r["variable"]
        lines.append(f"{name:<26}{r['fixed']['fps']:>11,.0f}{v['fps']:>14,.0f}{r['variable_over_fixed']:>11.2f}"
                     f"   {v['env_steps_min']:.0f}/{v['env_steps_mean']:.1f}/{v['env_steps_max']:.0f}")
    for name, r in results["modes"].items():
        for mode in ("fixed", "variable"):
            m = r[mode]
            lines.append(f"{name} [{mode}]: slowest env step = {m['slowest_step_share_max']:.1%} of the rollout "
                         f"(mean over envs {m['slowest_step_share_mean']:.1%}); {m['bottleneck']}")
    header = f"{'rollout phase, fixed mode':<26}{'raw env fps':>13}{'lockstep':>10}{'double-buf':>12}" \
             f"{'lockstep/raw':>14}{'double-buf/raw':>16}"
    lines += ["", header, "-" * len(header)]
    for name, r in results["rollout_phase"].items():
        lines.append(f"{name:<26}{r['raw']:>13,.0f}{r['lockstep']:>10,.0f}{r['double_buffered']:>12,.0f}"
                     f"{r['lockstep_over_raw']:>14.2f}{r['double_buffered_over_raw']:>16.2f}")
    lines.append(f"load average (1/5/15 min) at start {results['load_average_start']}, "
                 f"at end {results['load_average_end']}")
    return common.report(lines, results, args.out)
