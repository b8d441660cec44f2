"""Memory cores on the memory task: success of each `policy.rnn_type` on gridnav_memory, seeds side by side.

    ddppo bench memory-task [--cores gru lstm transformer none] [--seeds 1 2 3] [--steps 800000]
                            [--episodes 200] [--out results/memory_task.json] [OVERRIDE ...]

`ddppo bench seeds gridnav_memory` with a variant per core (seeds.py): each (seed, core) trains the
shipped gridnav_memory config (the goal shown at the first step only: only a policy
with memory can finish) with the same budget, as `python -m ddppo train` subprocesses run one after another, seed by
seed so the cores share the machine's conditions; then `ddppo eval` runs the final checkpoint (greedy, fresh
episodes). Reported: evaluation success and SPL per run, their mean per core, and each run's training fps.
Expectation (issue 54): the transformer at least the GRU within noise, both >= 0.9, none far below.
Budget: at 500k steps the 4 runs of one seed took 22 minutes here (GRU 4,400 fps, transformer 960).
"""

from __future__ import annotations

import argparse

from ddppo.benchmarks.learning import seeds

NAME = "memory-task"
HELP = "success of each policy.rnn_type (gru, lstm, transformer, none) on gridnav_memory, seeds side by side"

CORES = ("gru", "lstm", "transformer", "none")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="ddppo bench memory-task", description=__doc__.splitlines()[0])
    ap.add_argument("--cores", nargs="+", default=list(CORES), choices=CORES)
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--steps", type=int, default=800_000, help="env steps per run (gridnav_memory's own budget)")
    ap.add_argument("--episodes", type=int, default=200, help="evaluation episodes per run")
    ap.add_argument("--out", default="results/memory_task.json")
    ap.add_argument("overrides", nargs="*", help="key=value overrides for every run")
    args = ap.parse_args(argv)
    variants = [arg for core in args.cores for arg in ("--variant", core, f"policy.rnn_type={core}")]
    return seeds.main(["gridnav_memory", *args.overrides, *variants, "--seeds", *map(str, args.seeds),
                       "--steps", str(args.steps), "--episodes", str(args.episodes), "--out", args.out])


if __name__ == "__main__":
    raise SystemExit(main())
