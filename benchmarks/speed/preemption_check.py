"""`ddppo bench preempt`: what the preemption check costs a rank's step path, before (a blocking store read
before every step once the rank may stop) and now (reads sent to the store thread, at most one per
preemption.poll_interval_s, never waited for), measured side by side in one run.

Two real gloo ranks over loopback (rank 0 hosts the TCP store) run the collector's preemption calls around a
stand-in env step that keeps the CPU busy for `step_ms` (gridnav's step is ~0.7 ms); rank 1's step is 20%
slower, so it is the one preempted (sync_frac=0.5: 1 of 2 ranks). A second pair of settings adds a simulated
round trip to every store call (`rtt_ms`, slept on the calling thread: a store across a slow link).
Rounds alternate the settings. Reported per rollout and rank (medians): store operations, the time the step
path spent in the check, wall time, steps collected.
"""

from __future__ import annotations

import multiprocessing as mp
import socket
import statistics
import time
from typing import Any

from ddppo.benchmarks import common

NAME = "preempt"
HELP = "preemption check cost, a blocking read every step vs async reads"


def _busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


class _BlockingEveryStep:
    """The check as it was before: a blocking counter read before every step from min_steps on."""

    def __init__(self, pre: Any):
        self.pre = pre

    def begin(self, update: int) -> None:
        self.pre.begin(update)

    def should_stop(self, update: int, step: int) -> bool:
        if step < self.pre.min_steps:
            return False
        return self.pre.ctx.add_to_counter(self.pre.key(update), 0) >= self.pre.threshold

    def finished(self, update: int) -> None:
        self.pre.finished(update)


class _SlowStore:
    """The rank's store with `rtt_s` slept before each call (a store across a slow link)."""

    def __init__(self, store: Any, rtt_s: float, ops: list):
        self._store, self._rtt_s, self._ops = store, rtt_s, ops

    def __getattr__(self, name: str) -> Any:
        fn = getattr(self._store, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            self._ops[0] += 1
            time.sleep(self._rtt_s)
            return fn(*args, **kwargs)

        return call


def _rank(rank: int, port: int, rounds: int, rollouts: int, num_steps: int, step_s: float,
          settings: tuple[tuple[str, float], ...], out: Any) -> None:
    import torch

    from ddppo.config import PreemptionConfig
    from ddppo.distributed import Launch, init_distributed
    from ddppo.rollout.preemption import Preemption

    torch.set_num_threads(1)
    ctx = init_distributed("gloo", "cpu", 60, 60, 0, Launch(rank, 2, rank, 2, "127.0.0.1", port, "torchrun"))
    ops = [0]  # store operations this rollout
    real_store = ctx.store
    rows = []
    update = 0
    try:
        for r in range(rounds):
            for check, rtt_s in settings:
                ctx.store = _SlowStore(real_store, rtt_s, ops)
                cfg = PreemptionConfig(enabled=True, sync_frac=0.5, min_rollout_fraction=0.25, poll_interval_s=0.01)
                pre: Any = Preemption(cfg, ctx, num_steps)
                if check == "blocking":
                    pre = _BlockingEveryStep(pre)
                for _ in range(rollouts):
                    update += 1
                    ctx.store = real_store
                    ctx.rollout_barrier(0)
                    ctx.store = _SlowStore(real_store, rtt_s, ops)
                    pre.begin(update)  # as a collector's rollout starts (rank 0 deletes update - 2's counter)
                    ops[0], check_s = 0, 0.0
                    t0 = time.perf_counter()
                    steps = 0
                    for t in range(num_steps):
                        c = time.perf_counter()
                        stop = pre.should_stop(update, t)
                        check_s += time.perf_counter() - c
                        if stop:
                            break
                        _busy(step_s * (1.2 if rank == 1 else 1.0))
                        steps += 1
                    else:
                        c = time.perf_counter()
                        pre.finished(update)
                        check_s += time.perf_counter() - c
                    seconds = time.perf_counter() - t0
                    rows.append({"round": r, "setting": f"{check}@{1e3 * rtt_s:g}ms", "ops": ops[0],
                                 "check_s": check_s, "seconds": seconds, "steps": steps})
        ctx.store = real_store
        ctx.rollout_barrier(0)
        out.put((rank, rows))
    finally:
        ctx.store = real_store
        ctx.close()


def main(argv: list[str] | None = None) -> int:
    out = common.parser(NAME, HELP).parse_args(argv).out
    rounds, rollouts, num_steps, step_ms, rtt_ms = 3, 10, 128, 0.7, 20.0
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    spawn = mp.get_context("spawn")
    queue = spawn.Queue()
    settings = (("blocking", 0.0), ("async", 0.0), ("blocking", rtt_ms / 1e3), ("async", rtt_ms / 1e3))
    procs = [spawn.Process(target=_rank, args=(r, port, rounds, rollouts, num_steps, step_ms / 1e3, settings,
                                               queue)) for r in range(2)]
    for p in procs:
        p.start()
    results = dict(queue.get(timeout=900) for _ in procs)
    for p in procs:
        p.join(timeout=30)
    names = [f"{c}@{1e3 * rtt:g}ms" for c, rtt in settings]
    keys = ("ops", "check_s", "seconds", "steps")
    summary = {f"rank{rank}": {n: {k: statistics.median(row[k] for row in results[rank] if row["setting"] == n)
                                   for k in keys} for n in names} for rank in (0, 1)}
    lines = [f"preemption check cost, 2 gloo ranks on loopback, {num_steps} steps x {step_ms} ms (rank 1 20% "
             f"slower: preempted), medians over {rounds} x {rollouts} rollouts per setting, interleaved; "
             f"blocking = a store read before every step (before), async = reads on the store thread, "
             f"one per 10 ms at most (now); @{rtt_ms:g}ms = a simulated store round trip:",
             f"{'rank':>5} {'setting':>16} {'store ops':>10} {'check ms':>9} {'s/rollout':>10} {'steps':>6}"]
    ratios = {}
    for rank in (0, 1):
        for n in names:
            x = summary[f"rank{rank}"][n]
            lines.append(f"{rank:>5} {n:>16} {x['ops']:>10.0f} {1e3 * x['check_s']:>9.2f} {x['seconds']:>10.4f} "
                         f"{x['steps']:>6.0f}")
        for rtt in (0.0, rtt_ms):
            before, after = (summary[f"rank{rank}"][f"{c}@{rtt:g}ms"] for c in ("blocking", "async"))
            r = {"store_ops": after["ops"] / max(before["ops"], 1),
                 "check_time": after["check_s"] / max(before["check_s"], 1e-12),
                 "seconds_per_step": (after["seconds"] / max(after["steps"], 1)) /
                 (before["seconds"] / max(before["steps"], 1))}
            ratios[f"rank{rank}@{rtt:g}ms"] = r
            lines.append(f"rank {rank} @{rtt:g}ms now/before: store ops {r['store_ops']:.3f}x, time the step path "
                         f"spends in the check {r['check_time']:.3f}x, wall time per collected step "
                         f"{r['seconds_per_step']:.3f}x")
    return common.report(lines, {"summary": summary, "ratios": ratios, "rows": results}, out)
