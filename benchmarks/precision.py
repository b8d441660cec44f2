"""`ddppo bench precision`: update time of an image policy, fp32 vs bf16 vs bf16 + torch.compile, side by side.

    ddppo bench precision [--rounds 2] [--updates 6] [--size 64] [--device cpu|cuda] [--out FILE] [OVERRIDE ...]

The real trainer (in this process, one rank, run.torch_threads=1 unless overridden) learns a small image task
(`PixelReach-v0`, below: a 64x64 RGB image of the agent and a goal square, four moves, reward at the goal) with
the CNN encoder and a GRU, once per case, the cases interleaved over rounds:

    fp32            run.precision=fp32
    bf16            run.precision=bf16
    bf16+compile    run.precision=bf16 run.compile=true
    bf16 act/fp32   bf16 acting, fp32 learning (the numerical-staleness case: not a config, set on the updater)

Per update (the first `--warmup` updates left out: compilation, allocator warm-up), from metrics.jsonl: acting
seconds (perf/policy_forward_s: the policy's forward at every step, bootstraps included), learning seconds
(forward/backward + all-reduce + optimiser), the update's wall time, and loss/ratio_dev_start and
loss/clip_fraction_start (the acting vs learning gap before the first optimiser step). Medians over every
measured update of every round; speed-ups against fp32 of the same run. The env's own step time is the same in
every case and is not in either column.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path

import gymnasium
import numpy as np

ENV_ID = "PixelReach-v0"
LEARN = ("learn_forward_backward", "allreduce", "optimizer")
CASES = {  # name -> (overrides, learning precision when it differs from acting)
    "fp32": (["run.precision=fp32"], None),
    "bf16": (["run.precision=bf16"], None),
    "bf16+compile": (["run.precision=bf16", "run.compile=true"], None),
    "bf16 act/fp32 learn": (["run.precision=bf16"], "fp32"),
}


class PixelReach(gymnasium.Env):
    """Reach the goal in a size x size RGB image: the agent (red) and goal (green) squares, walls (blue) at the
    border; actions move the agent by a square's width; +1 and the episode ends at the goal, 64 steps at most."""

    def __init__(self, size: int = 64, cell: int = 8):
        self.size, self.cell = size, cell
        self.n = size // cell
        self.observation_space = gymnasium.spaces.Box(0, 255, (size, size, 3), np.uint8)
        self.action_space = gymnasium.spaces.Discrete(4)
        self.agent = self.goal = np.zeros(2, np.int64)

    def _obs(self) -> np.ndarray:
        img = np.zeros((self.size, self.size, 3), np.uint8)
        img[[0, -1], :, 2] = img[:, [0, -1], 2] = 255
        for pos, channel in ((self.goal, 1), (self.agent, 0)):
            r, c = pos * self.cell
            img[r:r + self.cell, c:c + self.cell, channel] = 255
        return img

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.agent, self.goal = self.np_random.integers(0, self.n, 2), self.np_random.integers(0, self.n, 2)
        return self._obs(), {}

    def step(self, action):
        move = ((-1, 0), (1, 0), (0, -1), (0, 1))[int(action)]
        self.agent = np.clip(self.agent + move, 0, self.n - 1)
        success = bool((self.agent == self.goal).all())
        return self._obs(), float(success), success, False, {"success": float(success)}


if ENV_ID not in gymnasium.registry:
    gymnasium.register(ENV_ID, entry_point=PixelReach, max_episode_steps=64)


def run_case(overrides: list[str], learning: str | None, run_dir: Path) -> list[dict]:
    """Train one case in this process; its metrics.jsonl rows."""
    from ddppo.config import load_config
    from ddppo.distributed import read_launch, run_in_process_group
    from ddppo.train.builder import Trainer

    cfg = load_config(None, [f"env.name=gym:ddppo.benchmarks.precision:{ENV_ID}", f"run.dir={run_dir}",
                             "log.tensorboard=false", "checkpoint.interval_updates=100000", *overrides])

    def body(ctx) -> int:
        trainer = Trainer(cfg, ctx)
        try:
            if learning is not None:
                trainer.updater.precision = learning
            return trainer.train()
        finally:
            trainer.close()

    if run_in_process_group(cfg, read_launch(), body) != 0:
        raise SystemExit(f"ddppo bench precision: training {' '.join(overrides)} failed")
    return [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]


def figures(rows: list[dict]) -> dict[str, float]:
    acting = [r["perf/policy_forward_s"] for r in rows]
    learning = [sum(r.get(f"perf/{p}_s", 0.0) for p in LEARN) for r in rows]
    return {"acting_s": statistics.median(acting), "learning_s": statistics.median(learning),
            "acting_plus_learning_s": statistics.median(a + b for a, b in zip(acting, learning)),
            "update_s": statistics.median(r["perf/update_s"] for r in rows),
            "ratio_dev_start": statistics.mean(r["loss/ratio_dev_start"] for r in rows),
            "clip_fraction_start": statistics.mean(r["loss/clip_fraction_start"] for r in rows),
            "updates": len(rows)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="ddppo bench precision", description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=2, help="interleaved rounds of every case")
    ap.add_argument("--updates", type=int, default=6, help="updates per run, --warmup of them left out")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES), metavar="CASE",
                    help=f"which cases ({', '.join(CASES)})")
    ap.add_argument("--out", default="results/precision.json", help="JSON output path")
    ap.add_argument("overrides", nargs="*", help="config overrides for every case (e.g. env.num_envs=16)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    logging.getLogger("ddppo.model.compiled").setLevel(logging.INFO)  # the compile times
    base = ["env.num_envs=16", "rollout.num_steps=32", "ppo.epochs=2", "ppo.num_mini_batch=2",
            "policy.image_encoder=cnn", "policy.rnn_type=gru", "policy.hidden_size=256", "run.torch_threads=1",
            f"dist.device={args.device}", "env.gym.episode_metrics=[success]"]
    from ddppo.config import load_config

    base += args.overrides
    cfg = load_config(None, [f"env.name=gym:ddppo.benchmarks.precision:{ENV_ID}", *base])
    total = [f"run.total_env_steps={cfg.env.num_envs * cfg.rollout.num_steps * args.updates}"]
    per_case: dict[str, list[dict]] = {name: [] for name in args.cases}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ddppo-bench-precision-") as work:
        for r in range(args.rounds):
            for name in args.cases:
                overrides, learning = CASES[name]
                rows = run_case([*base, *overrides, *total], learning,
                                Path(work) / f"{r}-{name.replace(' ', '_').replace('/', '_')}")
                per_case[name] += [row for row in rows if "perf/update_s" in row][args.warmup:]
    results = {name: figures(rows) for name, rows in per_case.items() if rows}
    fp32 = results.get("fp32")
    print(f"{'case':22s} {'acting s':>9s} {'learning s':>10s} {'act+learn s':>11s} {'update s':>9s} "
          f"{'x fp32 (act, learn, both)':>26s} {'ratio_dev_start':>15s} {'clip_frac_start':>15s}")
    for name, f in results.items():
        if fp32 is not None:
            f["speedup"] = {k: fp32[k] / f[k] for k in ("acting_s", "learning_s", "acting_plus_learning_s")}
        speed = ("{acting_s:.2f}, {learning_s:.2f}, {acting_plus_learning_s:.2f}".format(**f["speedup"])
                 if "speedup" in f else "")
        print(f"{name:22s} {f['acting_s']:9.3f} {f['learning_s']:10.3f} {f['acting_plus_learning_s']:11.3f} "
              f"{f['update_s']:9.3f} {speed:>26s} {f['ratio_dev_start']:15.2e} {f['clip_fraction_start']:15.4f}")
    import torch

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"command": sys.argv, "torch": torch.__version__, "device": args.device,
                               "cpu_capability": torch.backends.cpu.get_cpu_capability(),
                               "overrides": base, "rounds": args.rounds,
                               "updates": args.updates, "warmup": args.warmup,
                               "wall_s": time.perf_counter() - started, "results": results}, indent=1) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
