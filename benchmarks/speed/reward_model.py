"""What a reward model costs: `ddppo train` steps/s with no reward model, with an MLP reward model of a given width
scoring every step (reward.mode=step), and the same model scoring only ended episodes (reward.mode=terminal),
interleaved in one run (issue 56).

    ddppo bench reward-model [--rounds 3] [--steps 20480] [--width 256] [--out results/reward_model.json]
                             [CONFIG OVERRIDE...]

Each case is a `python -m ddppo train` subprocess (1 rank, 1 thread) of the same config (default: the built-in
gridnav), in a folder holding the reward model's module; per run the env steps over the summed update times (the
first update left out), and the share of them spent in the model (perf/reward_model_s). Medians over rounds.
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

from ddppo.benchmarks.common import report
from ddppo.config.loading import shipped_config

NAME = "reward-model"
HELP = ("training steps/s with no reward model, an MLP reward model scoring every step, and scoring only "
        "ended episodes (reward.mode=terminal)")

MODULE = '''
import torch


class MLPReward(torch.nn.Module):
    """An MLP over the flattened observation keys: the cost of scoring, not a trained model."""

    def __init__(self, inputs, width=256):
        super().__init__()
        self.net = torch.nn.Linear(inputs, width)
        self.out = torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Linear(width, width), torch.nn.ReLU(),
                                       torch.nn.Linear(width, 1))

    def forward(self, obs, actions, episode_step, done):
        x = torch.cat([obs[k].reshape(len(episode_step), -1).float() for k in sorted(obs)], -1)
        return self.out(self.net(x)).squeeze(-1)
'''


def observation_size(config: str, overrides: list[str]) -> int:
    """The numbers in one observation of the config's env (the MLP's input)."""
    import math

    from ddppo.config import load_config
    from ddppo.envs.base import EnvSpec
    from ddppo.envs.registry import make_vec_env

    cfg = load_config(config, overrides)
    envs = make_vec_env(cfg.env.name, cfg.env_options, EnvSpec(num_envs=1, seed=0))
    try:
        return sum(math.prod(s.shape) or 1 for s in envs.observation_space.spaces.values())
    finally:
        envs.close()


def cases(width: int, inputs: int) -> dict[str, list[str]]:
    model = ["reward.model=bench_reward:MLPReward", f"reward.kwargs={{width: {width}, inputs: {inputs}}}"]
    return {"no reward model": [], "step": model, "terminal": [*model, "reward.mode=terminal"]}


def run(config: str, overrides: list[str], steps: int, workdir: Path) -> dict[str, float]:
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        args = [sys.executable, "-m", "ddppo", "train", config, f"run.dir={tmp}/run", f"run.total_env_steps={steps}",
                "run.torch_threads=1", "log.tensorboard=false", "checkpoint.interval_updates=100000", *overrides]
        subprocess.run(args, cwd=workdir, env=env, check=True, capture_output=True, timeout=3600)
        rows = [json.loads(x) for x in (Path(tmp) / "run" / "metrics.jsonl").read_text().splitlines()]
    timed = rows[1:] or rows  # the first update warms up
    seconds = sum(r["perf/update_s"] for r in timed)
    return {"fps": (rows[-1]["env_steps"] - (rows[0]["env_steps"] if len(rows) > 1 else 0)) / seconds,
            "reward_model_share": sum(r.get("perf/reward_model_s", 0.0) for r in timed) / seconds}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="ddppo bench reward-model", description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=20480)
    ap.add_argument("--width", type=int, default=256, help="the reward MLP's hidden width")
    ap.add_argument("--out", default="results/reward_model.json")
    ap.add_argument("case", nargs="*", default=[str(shipped_config("gridnav"))])
    args = ap.parse_args(argv)
    config, overrides = args.case[0], args.case[1:]
    if Path(config).is_file():  # the runs start in a folder of their own
        config = str(Path(config).resolve())
    rows: list[dict] = []
    inputs = observation_size(config, overrides)
    with tempfile.TemporaryDirectory(prefix="ddppo-bench-reward-") as work:
        (Path(work) / "bench_reward.py").write_text(MODULE)
        for r in range(args.rounds):
            order = list(cases(args.width, inputs).items())
            for name, extra in order if r % 2 == 0 else order[::-1]:  # alternate who goes first
                rows.append({"round": r, "case": name, **run(config, overrides + extra, args.steps, Path(work))})
    names = list(cases(args.width, inputs))
    med = {n: {k: statistics.median(x[k] for x in rows if x["case"] == n) for k in ("fps", "reward_model_share")}
           for n in names}
    base = med[names[0]]["fps"]
    lines = [f"{'case':<18}{'steps/s':>10}{'x none':>8}{'in the model':>14}   ({args.rounds} interleaved rounds, "
             f"MLP width {args.width}, {Path(config).name} {' '.join(overrides)})"]
    for n in names:
        lines.append(f"{n:<18}{med[n]['fps']:>10,.0f}{med[n]['fps'] / base:>8.2f}"
                     f"{100 * med[n]['reward_model_share']:>13.1f}%")
    return report(lines, {"rows": rows, "median": med, "width": args.width, "config": config,
                          "overrides": overrides}, args.out)
