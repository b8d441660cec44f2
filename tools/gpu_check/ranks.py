"""The in-process parts of the GPU check (tools/gpu_check/run.py), run as scripts by its checks.

    torchrun ... tools/gpu_check/ranks.py digest CONFIG OUT_DIR [overrides]   # train; OUT_DIR/rank<r>.json
    python tools/gpu_check/ranks.py timing CONFIG ROUNDS [overrides]          # event timers vs a sync per phase
    [torchrun ...] tools/gpu_check/ranks.py stall CONFIG OUT_DIR [overrides]  # a collective behind a stalled GPU

`digest`: the real start-up (device map, backend agreement) and Trainer on every rank; each rank writes what
it ran on (backend, device, where its gradients live) and sha256 digests of its parameters and Adam state.
`timing`: one rank, one Trainer; rounds of two updates alternate between the event timers (the default on
CUDA) and the old sync at the end of every phase; prints one line `timing: events F1 fps, per-phase sync F2
fps, ratio R` (medians over rounds).
`stall`: one rank's NCCL group (dist.timeout_s from the overrides) whose all-reduce is queued behind
`torch.cuda._sleep` for 3 x dist.timeout_s: under blocking wait its wait must raise (inside DistContext.guard),
and the rank exit 1 by that error, not by an abort of NCCL's watchdog. Writes OUT_DIR/rank0.json (backend, NCCL
variables, what the wait raised and after how long) before the error ends the rank. On CPU (a dry run) the wait
is a work's that raises as a blocking wait's does.
"""

from __future__ import annotations

import hashlib
import json
import logging
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from ddppo.config import load_config
from ddppo.distributed import Launch, read_launch, run_in_process_group
from ddppo.files import atomic_write


def digest(tensors: dict[str, Any]) -> str:
    """sha256 over names, dtypes and exact bytes (bit-identity across ranks)."""
    import torch

    h = hashlib.sha256()
    for name in sorted(tensors):
        t = tensors[name]
        t = (t if torch.is_tensor(t) else torch.tensor(t)).detach().cpu().contiguous()
        h.update(name.encode() + str(t.dtype).encode() + t.numpy().tobytes())
    return h.hexdigest()


def _optimizer_tensors(optimizer: Any) -> dict[str, Any]:
    return {f"{i}.{k}": v for i, state in optimizer.state_dict()["state"].items() for k, v in state.items()}


def run_digest(config: str, out_dir: str, overrides: list[str]) -> int:
    from ddppo.train.builder import Trainer

    cfg = load_config(config, overrides)

    def body(ctx: Any) -> int:
        trainer = Trainer(cfg, ctx)
        try:
            code = trainer.train()
            params = list(trainer.policy.parameters())
            row = {"rank": ctx.rank, "code": code, "backend": ctx.backend, "device": str(ctx.device),
                   "grad_devices": sorted({str(p.grad.device) for p in params if p.grad is not None}),
                   "update": trainer.progress.update, "model": digest(trainer.policy.state_dict()),
                   "optimizer": digest(_optimizer_tensors(trainer.updater.optimizer))}
            atomic_write(Path(out_dir) / f"rank{ctx.rank}.json", json.dumps(row))
            return code
        finally:
            trainer.close()

    return run_in_process_group(cfg, read_launch(), body)


def _round(trainer: Any, update: int) -> float:
    """env steps per second over two full updates as `ddppo train` runs them (the learning strategy's step: collect,
    advantages, agree, learn, the timer read)."""
    start, steps = time.perf_counter(), 0
    for u in (update, update + 1):
        steps += trainer.learning.step(u).collected.env_steps
    return steps / (time.perf_counter() - start)


def run_timing(config: str, rounds: int, overrides: list[str]) -> int:
    from ddppo.train.builder import Trainer

    cfg = load_config(config, overrides)

    def body(ctx: Any) -> int:
        trainer = Trainer(cfg, ctx)
        try:
            fps: dict[str, list[float]] = {"events": [], "sync": []}
            update = 1
            for r in range(rounds + 1):  # round 0 warms up (allocations, cuDNN plans)
                order = list(fps)
                for name in order if r % 2 else order[::-1]:  # alternate who goes first
                    trainer.timer.use_per_phase_sync(name == "sync")
                    value = _round(trainer, update)
                    update += 2
                    if r:
                        fps[name].append(value)
            events, sync = (statistics.median(fps[n]) for n in ("events", "sync"))
            print(f"timing: events {events:.0f} fps, per-phase sync {sync:.0f} fps, ratio {events / sync:.3f} "
                  f"on {ctx.device} ({rounds} rounds of 2 updates each)", flush=True)  # noqa: T201
            return 0
        finally:
            trainer.close()

    return run_in_process_group(cfg, Launch(0, 1, 0, 1, "127.0.0.1", 0, "single"), body)


NCCL_VARS = ("TORCH_NCCL_BLOCKING_WAIT", "TORCH_NCCL_ASYNC_ERROR_HANDLING", "TORCH_NCCL_DUMP_ON_TIMEOUT")


class _TimedOutWork:
    """What a blocking wait on a timed-out NCCL work raises (a dry run's stand-in)."""

    def wait(self, timeout: Any = None) -> bool:
        import torch.distributed as dist

        raise dist.DistBackendError("[Rank 0] Work WorkNCCL(OpType=ALLREDUCE) timed out in blocking wait (CPU "
                                    "stand-in)")


def _stall_gpu(seconds: float) -> None:
    """Keep the current stream busy for about `seconds` (torch.cuda._sleep counts cycles: calibrated here)."""
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(10**7)
    end.record()
    end.synchronize()
    cycles_per_s = 10**7 / max(1e-6, start.elapsed_time(end) / 1000)
    torch.cuda._sleep(int(seconds * cycles_per_s))


def run_stall(config: str, out_dir: str, overrides: list[str]) -> int:
    import os

    import torch

    cfg = load_config(config, overrides)

    def body(ctx: Any) -> int:
        ctx.mark_started()  # the training group: dist.timeout_s
        row: dict[str, Any] = {"backend": ctx.backend, "device": str(ctx.device), "raised": None,
                               "env": {n: os.environ.get(n) for n in NCCL_VARS}, "timeout_s": cfg.dist.timeout_s}
        buf = torch.ones(1024, device=ctx.comm_device)
        if ctx.device.type == "cuda":
            _stall_gpu(3 * cfg.dist.timeout_s)  # the all-reduce is queued behind this on the GPU
            handle = ctx.all_reduce_async(buf, "stalled all-reduce")
        else:
            handle = (_TimedOutWork(), buf)
        start = time.monotonic()
        try:
            ctx.wait_async(handle, "stalled all-reduce")
        except Exception as err:
            row["raised"] = f"{type(err).__name__}: {str(err).splitlines()[0][:300]}"
            raise
        finally:
            row["after_s"] = round(time.monotonic() - start, 2)
            atomic_write(Path(out_dir) / "rank0.json", json.dumps(row))
        return 0

    return run_in_process_group(cfg, read_launch(), body)


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    if argv[:1] == ["digest"] and len(argv) >= 3:
        return run_digest(argv[1], argv[2], argv[3:])
    if argv[:1] == ["stall"] and len(argv) >= 3:
        return run_stall(argv[1], argv[2], argv[3:])
    if argv[:1] == ["timing"] and len(argv) >= 3:
        return run_timing(argv[1], int(argv[2]), argv[3:])
    sys.stderr.write(__doc__.split("\n\n")[1] + "\n")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
