"""Are a run's phase timings plausible? Read by tools/gpu_check/run.py after its training runs.

    python -m gpu_check.phase_check RUN_DIR [--label NAME] [--world-size 1]

From metrics.jsonl (the first update, which holds start-up, left out): the share of update wall time of
every phase, summed over updates. Fails (exit 1, one line per problem) when
  - a phase that must do work reads ~0 (policy forward, env step, obs transfer, storage, learning, optimiser):
    on a GPU this is the sign of a timer that stopped before its kernels ran;
  - the phases of an update do not add up to about its wall time (0.7 .. 1.05): time charged twice, or lost;
  - with one rank, the all-reduce or the straggler wait takes a real share (nothing to send or wait for:
    a large share means backward or the rollout's GPU work was charged to them).
Prints the shares and the training fps either way.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ddppo import timing

MUST_WORK = (timing.POLICY_FORWARD, timing.ENV_STEP, timing.OBS_TRANSFER, timing.STORAGE,
             timing.LEARN_FORWARD_BACKWARD, timing.OPTIMIZER)
IN_UPDATE = tuple(p for p in timing.PHASES if p != timing.LOG_CHECKPOINT)  # logged after update_s is taken


def shares(rows: list[dict]) -> tuple[dict[str, float], float]:
    """Each phase's share of the updates' wall time, and the sum of the in-update shares."""
    total = sum(r["perf/update_s"] for r in rows)
    out = {p: sum(r.get(f"perf/{p}_s", 0.0) for r in rows) / total for p in timing.PHASES}
    return out, sum(out[p] for p in IN_UPDATE)


def problems(rows: list[dict], world_size: int) -> list[str]:
    if len(rows) < 2:
        return [f"only {len(rows)} update(s) logged; need at least 2"]
    share, covered = shares(rows[1:])
    found = [f"{p} takes {100 * share[p]:.3f}% of wall time (expected > 0.1%)" for p in MUST_WORK
             if share[p] < 1e-3]
    if not 0.7 <= covered <= 1.05:
        found.append(f"the phases add up to {100 * covered:.0f}% of the update wall time (expected 70-105%)")
    if world_size == 1:
        found += [f"{p} takes {100 * share[p]:.1f}% with one rank (expected < 10%)"
                  for p in (timing.ALLREDUCE, timing.STRAGGLER_WAIT) if share[p] > 0.1]
    return found


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir")
    ap.add_argument("--label", default="")
    ap.add_argument("--world-size", type=int, default=1)
    args = ap.parse_args(argv)
    path = Path(args.run_dir) / "metrics.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    label = args.label or args.run_dir
    found = problems(rows, args.world_size)
    if len(rows) >= 2:
        share, covered = shares(rows[1:])
        listed = ", ".join(f"{p} {100 * v:.1f}%" for p, v in sorted(share.items(), key=lambda kv: -kv[1]) if v)
        print(f"{label}: fps {rows[-1].get('perf/fps', float('nan')):.0f}; phases cover {100 * covered:.0f}% "
              f"of update time: {listed}")  # noqa: T201
    for p in found:
        print(f"{label}: FAILED: {p}")  # noqa: T201
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
