"""`ddppo bench preempt`: store traffic of the preemption check, before (a read before every step) and after
(at most one read per preemption.poll_interval_s), measured side by side in one run.

Two real gloo ranks over loopback (rank 0 hosts the TCP store) run the collector's preemption calls around a
stand-in env step that keeps the CPU busy for `step_ms` (gridnav's step is ~0.7 ms); rank 1's step is 20%
slower, so it is the one preempted (sync_frac=0.5: 1 of 2 ranks). Rounds alternate the two settings.
Reported per rollout and rank (medians): store operations, time spent in them, wall time, steps collected.
"""

from __future__ import annotations

import multiprocessing as mp
import socket
import statistics
import time
from typing import Any


def _busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def _rank(rank: int, port: int, rounds: int, rollouts: int, num_steps: int, step_s: float,
          intervals: tuple[float, ...], out: Any) -> None:
    import torch

    from ddppo.config import PreemptionConfig
    from ddppo.distributed import Launch, init_distributed
    from ddppo.rollout.preemption import Preemption

    torch.set_num_threads(1)
    ctx = init_distributed("gloo", "cpu", 60, 60, 0, Launch(rank, 2, rank, 2, "127.0.0.1", port, "torchrun"))
    ops = [0, 0.0]  # store operations and the seconds spent in them, this rollout
    add = ctx.add_to_counter

    def counted(key: str, amount: int) -> int:
        t = time.perf_counter()
        try:
            return add(key, amount)
        finally:
            ops[0] += 1
            ops[1] += time.perf_counter() - t

    ctx.add_to_counter = counted  # type: ignore[method-assign]
    rows = []
    update = 0
    try:
        for r in range(rounds):
            for interval in intervals:
                cfg = PreemptionConfig(enabled=True, sync_frac=0.5, min_rollout_fraction=0.25,
                                       poll_interval_s=interval)
                pre = Preemption(cfg, ctx, num_steps)
                for _ in range(rollouts):
                    update += 1
                    ctx.rollout_barrier(0)
                    ops[0], ops[1] = 0, 0.0
                    t0 = time.perf_counter()
                    steps = 0
                    for t in range(num_steps):
                        if pre.should_stop(update, t):
                            break
                        _busy(step_s * (1.2 if rank == 1 else 1.0))
                        steps += 1
                    else:
                        pre.finished(update)
                    seconds = time.perf_counter() - t0
                    rows.append({"round": r, "poll_interval_s": interval, "ops": ops[0], "store_s": ops[1],
                                 "seconds": seconds, "steps": steps})
        ctx.rollout_barrier(0)
        out.put((rank, rows))
    finally:
        ctx.close()


def main(out: str, rounds: int = 3, rollouts: int = 10, num_steps: int = 128, step_ms: float = 0.7,
         interval_s: float = 0.01) -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    spawn = mp.get_context("spawn")
    queue = spawn.Queue()
    intervals = (0.0, interval_s)
    procs = [spawn.Process(target=_rank, args=(r, port, rounds, rollouts, num_steps, step_ms / 1e3, intervals,
                                               queue)) for r in range(2)]
    for p in procs:
        p.start()
    results = dict(queue.get(timeout=600) for _ in procs)
    for p in procs:
        p.join(timeout=30)
    keys = ("ops", "store_s", "seconds", "steps")
    summary = {f"rank{rank}": {str(i): {k: statistics.median(row[k] for row in results[rank]
                                                            if row["poll_interval_s"] == i) for k in keys}
                               for i in intervals} for rank in (0, 1)}
    lines = [f"preemption store traffic, 2 gloo ranks on loopback, {num_steps} steps x {step_ms} ms (rank 1 20% "
             f"slower: preempted), medians over {rounds} x {rollouts} rollouts per setting, interleaved:",
             f"{'rank':>5} {'poll_interval_s':>16} {'store ops':>10} {'store ms':>9} {'s/rollout':>10} {'steps':>6}"]
    ratios = {}
    for rank in (0, 1):
        for i in intervals:
            x = summary[f"rank{rank}"][str(i)]
            lines.append(f"{rank:>5} {i:>16g} {x['ops']:>10.0f} {1e3 * x['store_s']:>9.2f} {x['seconds']:>10.4f} "
                         f"{x['steps']:>6.0f}")
        before, after = (summary[f"rank{rank}"][str(i)] for i in intervals)
        ratios[f"rank{rank}"] = {"store_ops": after["ops"] / max(before["ops"], 1),
                                 "store_time": after["store_s"] / max(before["store_s"], 1e-12),
                                 "seconds_per_step": (after["seconds"] / after["steps"]) /
                                 (before["seconds"] / before["steps"])}
        r = ratios[f"rank{rank}"]
        lines.append(f"rank {rank} after/before: store ops {r['store_ops']:.3f}x, time in the store "
                     f"{r['store_time']:.3f}x, wall time per collected step {r['seconds_per_step']:.3f}x")
    from benchmarks import report

    return report(lines, {"summary": summary, "ratios": ratios, "rows": results}, out)
