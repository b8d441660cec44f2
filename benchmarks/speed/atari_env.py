"""The Atari env's own speed (env-steps/s, random actions, no policy) with the standard preprocessing, two ways:

    ddppo bench atari-env [--game Breakout] [--envs 8] [--seconds 10] [--out FILE]

- gymnasium's wrappers: `AtariPreprocessing` (noop reset, frame skip 4 with max-pooling, 84x84 grayscale) and
  `FrameStackObservation` (4 frames) on `ALE/<game>-v5` made with frameskip=1, in gymnasium's SyncVectorEnv;
- ale-py's `AtariVectorEnv` (the same preprocessing in C++ threads);
- ddppo's adapter with env.gym.atari=true (the vector env, frames moved to channels-last, rewards' signs, lives).

Needs the extra `atari` (ale-py, opencv). Prints figures and writes them as JSON; nothing is asserted.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

NAME = "atari-env"
HELP = ("the Atari env's own fps, gymnasium's AtariPreprocessing wrappers vs ale-py's AtariVectorEnv (extra "
        "`atari`)")


def fps(step: Callable[[np.ndarray], Any], n: int, actions: int, seconds: float) -> float:
    rng = np.random.default_rng(0)
    batches = rng.integers(0, actions, (64, n))
    for a in batches[:8]:  # warm up
        step(a)
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for a in batches:
            step(a)
        steps += len(batches)
    return steps * n / (time.perf_counter() - start)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="ddppo bench atari-env", description=__doc__.splitlines()[0])
    ap.add_argument("--game", default="Breakout", help="ALE game (ALE/<game>-v5)")
    ap.add_argument("--envs", type=int, default=8, help="envs stepped together")
    ap.add_argument("--seconds", type=float, default=10.0, help="measuring time per way")
    ap.add_argument("--out", default="results/atari-env.json", help="JSON output path")
    args = ap.parse_args(argv)
    missing = [m for m in ("ale_py", "cv2") if importlib.util.find_spec(m) is None]
    if missing:
        sys.stderr.write(f"ddppo bench atari-env needs {' and '.join(missing)}: pip install -e \".[atari]\"\n")
        return 2
    import ale_py
    import gymnasium
    from ale_py.vector_env import AtariVectorEnv
    from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation

    from ddppo.envs.base import EnvSpec
    from ddppo.envs.registry import make_vec_env

    gymnasium.register_envs(ale_py)
    env_id, n = f"ALE/{args.game}-v5", args.envs

    def wrapped() -> gymnasium.Env:
        return FrameStackObservation(AtariPreprocessing(gymnasium.make(env_id, frameskip=1)), 4)

    same_step = gymnasium.vector.AutoresetMode.SAME_STEP
    rows = {}
    sync = gymnasium.vector.SyncVectorEnv([wrapped] * n, autoreset_mode=same_step)
    sync.reset(seed=list(range(n)))
    rows["gymnasium AtariPreprocessing + FrameStackObservation (SyncVectorEnv)"] = fps(
        sync.step, n, int(sync.single_action_space.n), args.seconds)
    sync.close()
    vec = AtariVectorEnv(args.game.lower(), n, autoreset_mode=same_step, repeat_action_probability=0.25)
    vec.reset(seed=0)
    rows["ale-py AtariVectorEnv"] = fps(vec.step, n, int(vec.single_action_space.n), args.seconds)
    vec.close()
    ours = make_vec_env(f"gym:ale_py:{env_id}", {"atari": True}, EnvSpec(num_envs=n, seed=0))
    ours.reset()
    rows["ddppo env.gym.atari=true (AtariVectorEnv)"] = fps(ours.step, n, int(ours.action_space.n), args.seconds)
    ours.close()
    print(f"{args.game}, {n} envs, {os.cpu_count()} CPUs")
    for name, value in rows.items():
        print(f"  {name:<70} {value:>10,.0f} env-steps/s")
    base = rows["gymnasium AtariPreprocessing + FrameStackObservation (SyncVectorEnv)"]
    print(f"  AtariVectorEnv / gymnasium wrappers: {rows['ale-py AtariVectorEnv'] / base:.2f}x")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"command": sys.argv, "game": args.game, "envs": n, "cpus": os.cpu_count(),
                               "env_steps_per_s": rows}, indent=2) + "\n")
    print(f"wrote {out}")
    return 0
