"""Raw env stepping speed (env-steps/s, random actions, no policy) for a few batch sizes, gridnav also with its
camera (env.gridnav.camera) beside its range scan.

    ddppo bench env-fps [--seconds 1.0] [--workers 2] [--gym ID [--drop-keys KEY ...]] [--transport]

`--gym ID` (env.name=gym:ID, e.g. minigrid:MiniGrid-DoorKey-5x5-v0 with --drop-keys mission) measures that env
alone, 16 envs in the trainer process, in 1 worker and in --workers workers: what stepping envs in worker
processes costs and gains for it. `--transport` measures only the round trip of one worker step with an env that
does nothing (median and 90th percentile), beside a bare multiprocessing Pipe's and a spun-on shared counter's
(ddppo.benchmarks.speed.transport_rtt).
Prints figures only; performance is never asserted in tests.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from ddppo.envs.registry import make_vec_env
from ddppo.envs.base import EnvSpec

NAME = "env-fps"
HELP = "raw env stepping speed for a few batch sizes"


def steps_per_second(name: str, options: dict, spec: EnvSpec, seconds: float) -> float:
    env = make_vec_env(name, options, spec)
    try:
        env.reset()
        space = env.action_space
        rng = np.random.default_rng(0)
        if hasattr(space, "n"):
            actions = rng.integers(0, space.n, (256, spec.num_envs))
        else:
            actions = rng.uniform(space.low, space.high, (256, spec.num_envs, *space.shape)).astype(np.float32)
        for a in actions[:10]:  # warm up
            env.step(a)
        steps, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            for a in actions[:32]:
                env.step(a)
            steps += 32
        return steps * spec.num_envs / (time.perf_counter() - start)
    finally:
        env.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ddppo bench env-fps", description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="measuring time per configuration")
    parser.add_argument("--workers", type=int, default=2, help="subprocess workers for the SubprocVecEnv rows")
    parser.add_argument("--gym", metavar="ID", help="only this gymnasium env (env.name=gym:ID), 16 envs in the "
                                                    "trainer process, in 1 worker and in --workers workers")
    parser.add_argument("--drop-keys", nargs="+", default=[], metavar="KEY", help="with --gym: env.gym.drop_keys")
    parser.add_argument("--transport", action="store_true", help="only the round trip of one env worker step, "
                                                                 "beside a bare Pipe's and a spun-on counter's")
    args = parser.parse_args(argv)
    if args.transport:
        from ddppo.benchmarks.speed.transport_rtt import round_trips

        print(f"{'round trip between two processes':<44} {'p50 us':>8} {'p90 us':>8}")
        for what, p50, p90 in round_trips():
            print(f"{what:<44} {p50:>8.1f} {p90:>8.1f}", flush=True)
        return 0
    gym_options = {"drop_keys": args.drop_keys} if args.drop_keys else {}
    rows = [(f"gym:{args.gym}", gym_options, [16], workers) for workers in (0, 1, args.workers)] if args.gym else [
        ("gridnav", {}, [1, 16, 64, 256], 0),
        ("gridnav", {"num_headings": 8}, [64], 0),
        *(("gridnav", {"camera": camera, "camera_size": size}, [16, 64], 0)  # the first-person camera
          for camera, size in (("depth", 32), ("depth", 64), ("rgb", 64), ("rgbd", 64))),
        ("gym:CartPole-v1", {}, [1, 16, 64], 0),
        ("synthetic", {}, [64], 0),
        ("gridnav", {}, [64, 256], args.workers),
    ]
    width = max(18, *(len(name) for name, *_ in rows))
    print(f"{'env':<{width}} {'options':<38} {'workers':>7} {'num_envs':>8} {'env-steps/s':>12}")
    for name, options, sizes, workers in rows:
        for n in sizes:
            fps = steps_per_second(name, options, EnvSpec(num_envs=n, seed=0, num_workers=workers), args.seconds)
            print(f"{name:<{width}} {str(options or '-'):<38} {workers:>7} {n:>8} {fps:>12,.0f}", flush=True)


