"""Figures for the closing note of issue 18 (not a test; needs root): 3 hosts x 1 rank over the delay line at
0, 20 and 100 ms one way (round trips +0/40/200 ms), rank 2 three times slower at stepping its envs, with
straggler preemption off (sync_frac=1) and on (sync_frac=0.6). Prints per case: seconds per update, fps, the
all-reduce and straggler-wait shares of the update, the fraction of steps collected; writes JSON if asked.

    PYTHONPATH=$PWD python tests/multihost/delay_figures.py [--out FILE] [--updates 6]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mh_util import REPO, by_hand  # noqa: E402
from netns import Network, remove_stale  # noqa: E402


def run_case(net: Network, delay_ms: float, sync_frac: float, updates: int, tmp: Path, port: int) -> dict:
    from ddppo.rundir import RunDir

    net.delay_line().delay_ms = delay_ms
    run = tmp / f"d{delay_ms:g}-s{sync_frac:g}"
    values = {"run.dir": run, "env.name": "synthetic", "env.num_envs": 4, "rollout.num_steps": 16,
              "ppo.num_mini_batch": 2, "ppo.epochs": 2, "policy.hidden_size": 64, "log.tensorboard": "false",
              "run.torch_threads": 1, "env.synthetic.step_sleep_s": 0.01, "env.synthetic.slow_ranks": "[2]",
              "env.synthetic.slow_factor": 3, "preemption.sync_frac": sync_frac, "dist.timeout_s": 60,
              "run.total_env_steps": updates * 3 * 4 * 16}
    argv = ["-m", "ddppo", "train", str(REPO / "tests" / "distributed" / "empty.yaml"),
            *[f"{k}={v}" for k, v in values.items()]]
    job = by_hand(net, [0, 1, 2], argv, port, tmp / f"logs-{run.name}", master=net.delay_line().addrs[0],
                  extra={"LOCAL_WORLD_SIZE": "1"})
    if job.wait(600) != [0, 0, 0]:
        raise SystemExit(job.describe())
    rows = RunDir(run).metrics()[1:]  # the first update pays start-up
    mean = lambda key: sum(r.get(key) or 0.0 for r in rows) / len(rows)  # noqa: E731
    update_s, collected = mean("perf/update_s"), mean("preempt/steps_fraction_mean")
    return {"delay_ms_one_way": delay_ms, "sync_frac": sync_frac, "update_s": round(update_s, 3),
            "fps": round(3 * 4 * 16 * collected / update_s, 1),
            "allreduce_share": round(mean("perf/allreduce_s_max") / update_s, 3),
            "straggler_wait_share": round(mean("perf/straggler_wait_s_max") / update_s, 3),
            "steps_collected": round(collected, 3)}

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="")
    parser.add_argument("--updates", type=int, default=6)
    args = parser.parse_args()
    remove_stale()
    results = []
    with Network(3) as net, tempfile.TemporaryDirectory() as d:
        port = 29700
        for delay in (0.0, 20.0, 100.0):  # interleaved: both settings at each delay, side by side
            for sync_frac in (1.0, 0.6):
                port += 1
                results.append(run_case(net, delay, sync_frac, args.updates, Path(d), port))
                print(json.dumps(results[-1]), flush=True)
    print("\n| one-way delay | sync_frac | s/update | fps | all-reduce share | straggler wait share "
          "| steps collected |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['delay_ms_one_way']:g} ms | {r['sync_frac']:g} | {r['update_s']:.2f} | {r['fps']:.0f} | "
              f"{r['allreduce_share']:.0%} | {r['straggler_wait_share']:.0%} | {r['steps_collected']} |")
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
