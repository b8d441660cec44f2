"""Memory cores side by side: a GRU vs the transformer at two contexts, acting and learning time of the core alone.

    ddppo bench memory-cores [--envs 32] [--steps 64] [--hidden 128] [--contexts 32 128] [--rounds 5]
                             [--threads 1] [--out results/memory_cores.json]

At gridnav's sizes by default (32 envs, 64-step rollouts, hidden 128, 4 epochs x 4 minibatches of whole envs),
on whatever device torch picks (CPU here): per rollout, acting = `steps` single-step calls over all envs under
no_grad (the cache read, attention, the cache's slide); per update, learning = epochs x minibatches of one
forward + backward pass over a minibatch's envs and steps from its rollout-start memory (the recompute). The
cores are run interleaved, round by round; medians. Episode starts at random (1 in 50 steps). Only the core:
the encoders and heads cost the same for every core and are left out.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

from ddppo.model.memory import nbytes, select
from ddppo.model.recurrent import RecurrentCore
from ddppo.model.transformer import TransformerCore
from ddppo.files import atomic_write

NAME = "memory-cores"
HELP = ("GRU vs transformer cores (two contexts): acting and learning time of the core alone, at gridnav's "
        "sizes")


def _time_rollout(core, x, start, memory) -> tuple[float, dict]:
    t0 = time.perf_counter()
    with torch.no_grad():
        for t in range(x.shape[0]):
            _, memory = core(x[t:t + 1], memory, start[t:t + 1])
    return time.perf_counter() - t0, memory


def _time_update(core, x, start, memory, epochs: int, minibatches: int) -> float:
    n = x.shape[1] // minibatches
    t0 = time.perf_counter()
    for _ in range(epochs):
        for m in range(minibatches):
            envs = slice(m * n, (m + 1) * n)
            out, _ = core(x[:, envs], select(memory, envs), start[:, envs])
            out.square().mean().backward()
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="ddppo bench memory-cores", description=__doc__.splitlines()[0])
    ap.add_argument("--envs", type=int, default=32)
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--layers", type=int, default=2, help="transformer layers")
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--contexts", type=int, nargs="+", default=[32, 128])
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--minibatches", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default="results/memory_cores.json")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    cores = {"gru": RecurrentCore("gru", args.hidden, 1)}
    for c in args.contexts:
        cores[f"transformer c={c}"] = TransformerCore(args.hidden, args.layers, args.heads, c)
    x = torch.randn(args.steps, args.envs, args.hidden)
    start = (torch.rand(args.steps, args.envs) < 0.02).float()
    memories = {name: core.initial_memory(args.envs) for name, core in cores.items()}
    for name, core in cores.items():  # warm-up: a rollout fills the caches (and the allocator)
        _, memories[name] = _time_rollout(core, x, start, memories[name])
    times: dict[str, dict[str, list[float]]] = {name: {"act_s": [], "learn_s": []} for name in cores}
    for _ in range(args.rounds):
        for name, core in cores.items():
            begin = memories[name]
            acted, memories[name] = _time_rollout(core, x, start, begin)
            times[name]["act_s"].append(acted)
            times[name]["learn_s"].append(_time_update(core, x, start, begin, args.epochs, args.minibatches))
    med = {name: {k: statistics.median(v) for k, v in t.items()} for name, t in times.items()}
    gru = med["gru"]
    print(f"{args.envs} envs x {args.steps} steps, hidden {args.hidden}, transformer {args.layers} layers x "
          f"{args.heads} heads; {args.epochs} epochs x {args.minibatches} minibatches; {args.threads} thread(s); "
          f"medians of {args.rounds} rounds")
    print(f"{'core':<18}{'acting ms/rollout':>19}{'x GRU':>8}{'learning ms/update':>20}{'x GRU':>8}"
          f"{'memory B/env':>14}")
    rows = []
    for name, m in med.items():
        mem = nbytes(select(memories[name], slice(0, 1)))
        rows.append({"core": name, **m, "act_vs_gru": m["act_s"] / gru["act_s"],
                     "learn_vs_gru": m["learn_s"] / gru["learn_s"], "memory_bytes_per_env": mem})
        print(f"{name:<18}{m['act_s'] * 1e3:>19.1f}{m['act_s'] / gru['act_s']:>8.2f}{m['learn_s'] * 1e3:>20.1f}"
              f"{m['learn_s'] / gru['learn_s']:>8.2f}{mem:>14,}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(out, json.dumps({"args": vars(args), "rows": rows}, indent=2))
    return 0
