"""`ddppo bench throughput`: raw env stepping vs rollout-phase vs full-training fps, side by side.

All three are measured in one process, on the same env and batch, interleaved
over several rounds (medians reported), so the ratios hold on a noisy shared
machine even when absolute figures drift. Figures are printed as a table and
written as JSON; nothing is asserted.
"""

from __future__ import annotations

import logging
import statistics
import time
from typing import Any

import numpy as np
import torch

from ddppo.benchmarks import common
from ddppo.config import load_config
from ddppo.config.loading import shipped_config
from ddppo.distributed import init_distributed
from ddppo.envs.registry import simulator_fps

NAME = "throughput"
HELP = "raw env vs rollout vs training fps"

log = logging.getLogger(__name__)


def _raw_env_fps(envs, steps: int, rng: np.random.Generator) -> float:
    space = envs.action_space
    if hasattr(space, "n"):
        actions = rng.integers(0, space.n, size=(steps, envs.num_envs))
    else:
        actions = rng.uniform(space.low, space.high, size=(steps, envs.num_envs, *space.shape)).astype(np.float32)
    start = time.perf_counter()
    for t in range(steps):
        envs.step(actions[t])
    return steps * envs.num_envs / (time.perf_counter() - start)


def _update_fps(trainer, update: int, storage: Any = None) -> tuple[float, dict[str, float]]:
    """(env steps per second, phase timings) of one update as `ddppo train` runs it (the learning strategy's
    step: collect, advantages, agree, learn), or, given a `storage` of its own, of the collection phase alone."""
    start = time.perf_counter()
    if storage is None:
        out = trainer.learning.step(update)
        steps, timings = out.collected.steps, out.timings
    else:
        steps, timings = trainer.phases.collect(update, storage).result.steps, trainer.timer.pop()
    return steps * trainer.envs.num_envs / (time.perf_counter() - start), timings


def throughput(config: str, overrides: list[str], rounds: int = 5) -> dict[str, Any]:
    import tempfile

    from ddppo.train.builder import Trainer

    with tempfile.TemporaryDirectory(prefix="ddppo-bench-") as run_dir:
        cfg = load_config(config, [*overrides, f"run.dir={run_dir}", "log.tensorboard=false"])
        torch.set_num_threads(cfg.run.torch_threads or 1)
        ctx = init_distributed("gloo", "cpu", 60, 60, cfg.run.seed)
        try:
            trainer = Trainer(cfg, ctx)
            try:
                rng = np.random.default_rng(0)
                own = trainer.new_storage()  # the collection-only rounds' buffers
                _update_fps(trainer, 0, own)  # warm-up
                raw, roll, train, phases = [], [], [], {}
                for r in range(rounds):
                    raw.append(_raw_env_fps(trainer.envs, cfg.rollout.num_steps, rng))
                    for fps_list, storage in ((roll, own), (train, None)):
                        fps, timings = _update_fps(trainer, r + 1, storage)
                        fps_list.append(fps)
                        for k, v in timings.items():
                            phases[k] = phases.get(k, 0.0) + v
                sim = [simulator_fps(cfg.env.name, cfg.env_options, trainer.env_spec, 200) for _ in range(rounds)]
                result = {
                    "config": config, "overrides": overrides, "env": cfg.env.name, "num_envs": cfg.env.num_envs,
                    "num_workers": cfg.env.num_workers, "num_steps": cfg.rollout.num_steps, "rounds": rounds,
                    "raw_sim_fps": statistics.median(sim) if sim[0] is not None else None,
                    "raw_env_fps": statistics.median(raw), "rollout_fps": statistics.median(roll),
                    "train_fps": statistics.median(train),
                    "rollout_phases_s": {k: v / rounds for k, v in phases.items()},
                }
            finally:
                trainer.close()
        finally:
            ctx.close()
    result["rollout_over_raw"] = result["rollout_fps"] / result["raw_env_fps"]
    result["train_over_raw"] = result["train_fps"] / result["raw_env_fps"]
    if result["raw_sim_fps"] is not None:
        result["rollout_over_sim"] = result["rollout_fps"] / result["raw_sim_fps"]
    return result


def main(argv: list[str] | None = None) -> int:
    bench = common.parser(NAME, HELP)
    common.add_case(bench, "a config and overrides to measure (repeatable; default: gridnav and cartpole)")
    bench.add_argument("--rounds", type=int, default=5, help="interleaved rounds (medians reported)")
    args = bench.parse_args(argv)
    default = [(str(shipped_config("gridnav")), []), (str(shipped_config("cartpole")), [])]
    results = [throughput(c, o, args.rounds) for c, o in common.cases(args, default)]
    header = (f"{'env':<18}{'envs':>5}{'workers':>8}{'1 sim fps':>11}{'raw env fps':>13}{'rollout fps':>13}"
              f"{'train fps':>11}{'rollout/raw':>13}{'rollout/sim':>13}")
    lines = [header, "-" * len(header)]
    for r in results:
        sim = r["raw_sim_fps"]
        lines.append(f"{r['env']:<18}{r['num_envs']:>5}{r['num_workers']:>8}"
                     f"{(f'{sim:,.0f}' if sim is not None else '-'):>11}{r['raw_env_fps']:>13,.0f}"
                     f"{r['rollout_fps']:>13,.0f}{r['train_fps']:>11,.0f}{r['rollout_over_raw']:>13.2f}"
                     f"{(format(r['rollout_over_sim'], '.2f') if sim is not None else '-'):>13}")
    return common.report(lines, results, args.out)
