"""MiniGrid on its raw observation, side by side: ddppo (configs/minigrid.yaml) against stable-baselines3 PPO with
the same PPO settings (rl-starter-files': 16 envs x 128 steps, 4 epochs, minibatches of 256, entropy 0.01, grad
norm 0.5; as the config, lr 1e-3 decayed linearly and advantages standardised per minibatch on SB3's side, per
update on ddppo's), both on the 7x7x3 image and the direction with the mission left out:

    ddppo bench minigrid [--env MiniGrid-DoorKey-5x5-v0] [--seeds 1 2 3] [--budget 100000] [--jobs 1] [--out FILE]
                         [--set KEY=VALUE ...]   (ddppo's side: overrides of configs/minigrid.yaml)

Each (seed, side) is a process of its own with one torch thread, started by the same command line, and timed
from start to exit (imports, env construction and learning: the wall clock a user waits). Figures per run: env
steps/s over that wall time, env steps per CPU second (user + system time of the run's processes: the figure a
machine shared with other jobs disturbs least), and the mean return of the last 100 finished episodes at the
budget (ddppo: the episodes of its last log.window updates, train/reward). SB3's NatureCNN does not fit a 7x7
image, so SB3's side uses rl-starter-files' MiniGrid CNN (2x2 convolutions, 16-32-64 channels) beside the direction
one-hot, with 64-wide actor and critic heads; ddppo's side runs configs/minigrid.yaml as shipped (the default `cnn`,
132k parameters, the direction embedded), or the same CNN as SB3's with `--set policy.image_encoder=grid`.
Needs the extras `bench` and `minigrid`. Prints figures and writes them as JSON; nothing is asserted.
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
from pathlib import Path

SB3_SETTINGS = dict(n_steps=128, batch_size=256, n_epochs=4, ent_coef=0.01, vf_coef=0.5, gae_lambda=0.95,
                    gamma=0.99, max_grad_norm=0.5, clip_range=0.2, normalize_advantage=True)
LR = 1e-3  # decayed linearly to 0 at the budget, as configs/minigrid.yaml
NUM_ENVS = 16


def sb3_run(env_id: str, seed: int, budget: int) -> dict:
    """One SB3 PPO run (in this process); its figures."""
    import gymnasium
    import minigrid  # noqa: F401  (registers the ids)
    import torch
    from gymnasium.wrappers import FilterObservation
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
    from torch import nn

    class MiniGridCNN(BaseFeaturesExtractor):
        """rl-starter-files' image CNN on the raw 7x7x3 integers, with the direction one-hot beside it."""

        def __init__(self, space: gymnasium.spaces.Dict):
            super().__init__(space, 64 + 4)
            self.cnn = nn.Sequential(nn.Conv2d(3, 16, 2), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(16, 32, 2), nn.ReLU(),
                                     nn.Conv2d(32, 64, 2), nn.ReLU(), nn.Flatten())

        def forward(self, obs: dict) -> torch.Tensor:
            direction = obs["direction"].reshape(len(obs["direction"]), -1)  # one-hot (SB3 preprocesses it)
            return torch.cat([self.cnn(obs["image"]), direction], 1)  # the image: SB3 moved its channels first

    torch.set_num_threads(1)
    envs = make_vec_env(env_id, NUM_ENVS, seed=seed,
                        wrapper_class=lambda env: FilterObservation(env, ["image", "direction"]))
    model = PPO("MultiInputPolicy", envs, seed=seed, device="cpu", verbose=0, **SB3_SETTINGS,
                learning_rate=lambda remaining: LR * remaining,
                policy_kwargs=dict(features_extractor_class=MiniGridCNN, normalize_images=False,
                                   net_arch=dict(pi=[64], vf=[64]), activation_fn=nn.Tanh))
    model.learn(budget)
    returns = [e["r"] for e in model.ep_info_buffer]
    return {"env_steps": int(model.num_timesteps), "return": statistics.fmean(returns) if returns else None}


def ddppo_run(env_id: str, seed: int, budget: int, run_dir: Path, overrides: list[str]) -> dict:
    """One ddppo run (a `python -m ddppo train minigrid` process); its figures."""
    res = subprocess.run([sys.executable, "-m", "ddppo", "train", "minigrid", f"run.dir={run_dir}",
                          f"run.seed={seed}", f"run.total_env_steps={budget}", f"env.name=gym:minigrid:{env_id}",
                          "run.torch_threads=1", "dist.device=cpu", "log.tensorboard=false", "log.window=6",
                          *overrides], capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"ddppo train failed: {res.stderr[-2000:]}")
    last = json.loads((run_dir / "metrics.jsonl").read_text().splitlines()[-1])
    return {"env_steps": int(last["env_steps"]), "return": last.get("train/reward")}


def job(side: str, env_id: str, seed: int, budget: int, tmp: Path, overrides: list[str]) -> dict:
    """One (side, seed) as a process of its own, timed from start to exit."""
    start = time.perf_counter()
    cmd = [sys.executable, "-m", "ddppo.benchmarks.minigrid", "--one", side, "--env", env_id, "--seeds", str(seed),
           "--budget", str(budget), "--out", str(tmp / f"{side}-{seed}"), *(["--set", *overrides] if overrides else [])]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    res = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    if res.returncode != 0:
        raise RuntimeError(f"{side} seed {seed} failed: {res.stderr[-2000:]}")
    figures = json.loads(res.stdout.splitlines()[-1])
    return {"side": side, "seed": seed, "wall_s": wall, "steps_per_s": figures["env_steps"] / wall,
            "steps_per_cpu_s": figures["env_steps"] / figures["cpu_s"], **figures}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="ddppo bench minigrid", description=__doc__.splitlines()[0])
    ap.add_argument("--env", default="MiniGrid-DoorKey-5x5-v0", help="MiniGrid id")
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--budget", type=int, default=100_000, help="env steps per run")
    ap.add_argument("--jobs", type=int, default=1, help="runs at a time (a seed's two sides start together)")
    ap.add_argument("--out", default="results/minigrid.json", help="JSON output path")
    ap.add_argument("--set", nargs="+", default=[], metavar="KEY=VALUE",
                    help="ddppo's side: overrides of configs/minigrid.yaml (e.g. policy.image_encoder=grid)")
    ap.add_argument("--one", choices=("sb3", "ddppo"), help=argparse.SUPPRESS)  # a job's own process
    args = ap.parse_args(argv)
    missing = [m for m in ("stable_baselines3", "minigrid") if importlib.util.find_spec(m) is None]
    if missing:
        sys.stderr.write(f"ddppo bench minigrid needs {' and '.join(missing)}: pip install -e \".[bench,minigrid]\"\n")
        return 2
    if args.one:
        seed = args.seeds[0]
        figures = (sb3_run(args.env, seed, args.budget) if args.one == "sb3"
                   else ddppo_run(args.env, seed, args.budget, Path(args.out), args.set))
        times = os.times()  # this process and the ones it waited for (ddppo's train process)
        figures["cpu_s"] = times.user + times.system + times.children_user + times.children_system
        print(json.dumps(figures))
        return 0
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(args.jobs) as pool:
        futures = [pool.submit(job, side, args.env, seed, args.budget, Path(tmp), args.set)
                   for seed in args.seeds for side in ("ddppo", "sb3")]
        runs = [f.result() for f in futures]
    print(f"{args.env}, {args.budget:,} env steps per run, {os.cpu_count()} CPUs, {args.jobs} job(s) at a time"
          + (f", ddppo with {' '.join(args.set)}" if args.set else ""))
    print(f"  {'side':<6} {'seed':>4} {'wall s':>8} {'steps/s':>8} {'cpu s':>7} {'steps/cpu s':>11} {'return':>7}")
    for r in runs:
        ret = "-" if r["return"] is None else f"{r['return']:.3f}"
        print(f"  {r['side']:<6} {r['seed']:>4} {r['wall_s']:>8.1f} {r['steps_per_s']:>8.0f} {r['cpu_s']:>7.1f} "
              f"{r['steps_per_cpu_s']:>11.0f} {ret:>7}")
    summary = {}
    for side in ("ddppo", "sb3"):
        mine = [r for r in runs if r["side"] == side]
        summary[side] = {key: statistics.fmean(r[key] for r in mine) for key in ("steps_per_s", "steps_per_cpu_s")}
        summary[side]["return"] = statistics.fmean(r["return"] or 0.0 for r in mine)
        print(f"  {side}: mean {summary[side]['steps_per_s']:.0f} steps/s, {summary[side]['steps_per_cpu_s']:.0f} "
              f"steps per CPU s, return {summary[side]['return']:.3f}")
    ratio = {key: summary["ddppo"][key] / summary["sb3"][key] for key in ("steps_per_s", "steps_per_cpu_s")}
    print(f"  throughput ddppo / sb3: {ratio['steps_per_s']:.2f}x wall clock, {ratio['steps_per_cpu_s']:.2f}x per "
          f"CPU second")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"command": sys.argv, "env": args.env, "budget": args.budget, "cpus": os.cpu_count(),
                               "jobs": args.jobs, "ddppo_overrides": args.set, "runs": runs, "summary": summary},
                              indent=2) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
