"""`ddppo bench sb3`: time and env steps to mean return 475 on CartPole-v1, ddppo vs stable-baselines3 PPO.

Both run in this process, one after the other for each seed (interleaved, so machine
noise hits both), with the same settings (SB3's tuned CartPole PPO: 8 envs, 32 steps,
batch 256, 20 epochs, lr 1e-3 linear, GAE 0.8, gamma 0.98, no entropy bonus) and
the same criterion: the mean return of the episodes finished during the last 10
rollouts (ddppo's `train/reward` window) reaches 475. The clock starts when
training starts (after construction) and stops at the end of the update where the
criterion first holds. Needs the `bench` extra (stable-baselines3).
"""

from __future__ import annotations

import logging
import statistics
import time
from collections import deque
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ddppo.benchmarks import common
from ddppo.config.loading import shipped_config

NAME = "sb3"
HELP = "time/steps to CartPole 475 vs stable-baselines3 (extra `bench`)"

TARGET = 475.0
WINDOW = 10  # rollouts


def run_sb3(seed: int, budget: int) -> dict[str, Any]:
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env

    class Watch(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.window: deque = deque(maxlen=WINDOW)
            self.current: list[float] = []
            self.hit: tuple[int, float] | None = None

        def _on_training_start(self) -> None:
            self.t0 = time.perf_counter()

        def _on_step(self) -> bool:
            self.current += [info["episode"]["r"] for info in self.locals["infos"] if "episode" in info]
            return True

        def _on_rollout_end(self) -> None:
            self.window.append(self.current)
            self.current = []
            episodes = [r for rollout in self.window for r in rollout]
            if self.hit is None and episodes and np.mean(episodes) >= TARGET:
                self.hit = (self.num_timesteps, time.perf_counter() - self.t0)

    env = make_vec_env("CartPole-v1", n_envs=8, seed=seed)
    model = PPO("MlpPolicy", env, n_steps=32, batch_size=256, n_epochs=20, gae_lambda=0.8, gamma=0.98,
                ent_coef=0.0, learning_rate=lambda f: 1e-3 * f, clip_range=0.2, seed=seed, device="cpu", verbose=0)
    watch = Watch()
    t0 = time.perf_counter()
    model.learn(total_timesteps=budget, callback=watch)
    total = time.perf_counter() - t0
    env.close()
    return {"steps_to_target": watch.hit[0] if watch.hit else None,
            "seconds_to_target": watch.hit[1] if watch.hit else None, "fps": budget / total}


def run_ddppo(seed: int, budget: int, config: str) -> dict[str, Any]:
    from ddppo.config import load_config
    from ddppo.distributed import init_distributed
    from ddppo.rundir import RunDir
    from ddppo.train.builder import Trainer

    run_dir = Path(f"/tmp/ddppo-bench-sb3-{seed}-{time.time_ns()}")
    cfg = load_config(config, [f"run.seed={seed}", f"run.total_env_steps={budget}", f"run.dir={run_dir}",
                               "log.tensorboard=false", "checkpoint.interval_updates=100000"])
    torch.set_num_threads(cfg.run.torch_threads or 1)
    ctx = init_distributed("gloo", "cpu", 60, 60, cfg.run.seed)
    try:
        trainer = Trainer(cfg, ctx)
        try:
            t0 = time.time()
            start = time.perf_counter()
            trainer.train()
            total = time.perf_counter() - start
        finally:
            trainer.close()
    finally:
        ctx.close()
    rows = RunDir(run_dir).metrics()
    hit = next((r for r in rows if (r.get("train/reward") or 0) >= TARGET), None)
    return {"steps_to_target": hit["env_steps"] if hit else None,
            "seconds_to_target": hit["wall_time"] - t0 if hit else None, "fps": rows[-1]["env_steps"] / total}


def _median(values: list[float | None]) -> float | None:
    found = [v for v in values if v is not None]
    return statistics.median(found) if len(found) == len(values) else None


def available() -> bool:
    """stable-baselines3 (the `bench` extra) is installed."""
    import importlib.util

    return importlib.util.find_spec("stable_baselines3") is not None


def main(argv: list[str] | None = None) -> int:
    bench = common.parser(NAME, HELP)
    bench.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3], help="seeds")
    bench.add_argument("--budget", type=int, default=100_000, help="env steps per learning run")
    args = bench.parse_args(argv)
    if not available():
        import sys

        sys.stderr.write('ddppo bench sb3 needs stable-baselines3 (the `bench` extra): pip install -e ".[bench]"\n')
        return 2
    logging.getLogger("ddppo").setLevel(logging.WARNING)
    rows = []
    config = str(shipped_config("cartpole"))
    for seed in args.seeds:
        rows.append({"seed": seed, "ddppo": run_ddppo(seed, args.budget, config), "sb3": run_sb3(seed, args.budget)})
    summary = {}
    for who in ("ddppo", "sb3"):
        summary[who] = {k: _median([r[who][k] for r in rows]) for k in ("steps_to_target", "seconds_to_target",
                                                                         "fps")}
    d, s = summary["ddppo"], summary["sb3"]
    ratios = {
        "time_ratio": d["seconds_to_target"] / s["seconds_to_target"] if d["seconds_to_target"] and
        s["seconds_to_target"] else None,
        "steps_ratio": d["steps_to_target"] / s["steps_to_target"] if d["steps_to_target"] and
        s["steps_to_target"] else None,
    }
    lines = [f"{'seed':>5} {'who':>6} {'steps to 475':>13} {'s to 475':>9} {'fps':>8}"]
    for r in rows:
        for who in ("ddppo", "sb3"):
            x = r[who]
            lines.append(f"{r['seed']:>5} {who:>6} {x['steps_to_target'] or '-':>13} "
                         f"{(x['seconds_to_target'] or float('nan')):>9.1f} {x['fps']:>8.0f}")
    lines.append(f"median ddppo/sb3: time {ratios['time_ratio'] or float('nan'):.2f}x, "
                 f"steps {ratios['steps_ratio'] or float('nan'):.2f}x (goal: time <= 0.5x at steps <= 1.5x)")
    return common.report(lines, {"runs": rows, "median": summary, "ratios": ratios}, args.out)
