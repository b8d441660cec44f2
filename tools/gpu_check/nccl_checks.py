"""The GPU check's NCCL and rank-placement checks (tools/gpu_check/run.py runs them in its order). Each returns
its figures for the table, or raises CheckFailed; a dry run (CPU, gloo) runs each one's CPU counterpart.

Failures are judged by what the processes did (exit code, the rank named in ddppo's line, no abort), never by
NCCL's own log text: NCCL writes "Watchdog caught collective operation timeout" for every timeout, a blocking
wait's included."""

from __future__ import annotations

import json
import os
import re
import signal
import time

from gpu_check.common import (
    GRID, GRIDNAV, LOST, NCCL_VAR_WARNING, PY, CheckFailed, Env, expect, kill, metrics, no_abort, refuse, run,
    start_ranks, tail, torchrun, train_cmd, trained, wait,
)


def blocking_wait_timeout(e: Env, under_torchrun: bool) -> str:
    """One rank's NCCL group, its all-reduce queued behind `torch.cuda._sleep` for 3 x dist.timeout_s: the wait
    raises inside the guard (blocking wait, whatever the launcher injected), the rank exits 1, no abort."""
    name = "stall_torchrun" if under_torchrun else "stall_plain"
    out = e.work / name
    out.mkdir(exist_ok=True)
    timeout_s = 5
    body = ["tools/gpu_check/ranks.py", "stall", GRIDNAV, str(out), f"dist.timeout_s={timeout_s}",
            "log.tensorboard=false", f"run.dir={e.work / name}", *e.dev()]
    cmd = torchrun(1, *body) if under_torchrun else [PY, *body]
    rc, text = run(e, cmd, e.work / f"{name}.log", timeout_s=120)
    no_abort(rc, text, "the rank")
    row_path = out / "rank0.json"
    if rc != 1 or not row_path.exists():
        raise CheckFailed(f"exit {rc} (expected 1 by the wait's error), {row_path.name} "
                          f"{'written' if row_path.exists() else 'missing'}: {tail(text)}")
    row = json.loads(row_path.read_text())
    if not row["raised"] or "DistBackendError" not in row["raised"]:
        raise CheckFailed(f"the wait did not raise DistBackendError: {row}")
    if not e.dry and (row["backend"], row["env"]["TORCH_NCCL_BLOCKING_WAIT"]) != ("nccl", "1"):
        raise CheckFailed(f"not NCCL under blocking wait: {row['backend']}, env {row['env']}")
    refuse(text, NCCL_VAR_WARNING, "a warning about NCCL variables nobody set")
    launcher = "torchrun" if under_torchrun else "plain"
    where = "CPU counterpart (a work raising as a blocking wait does)" if e.dry else "NCCL"
    return f"{where}, {launcher}: raised after {row['after_s']} s (timeout {timeout_s} s), exit 1: {row['raised'][:80]}"


def nccl_1rank(e: Env) -> str:
    """World 1 under torchrun (whose agent injects TORCH_NCCL_ASYNC_ERROR_HANDLING=1): NCCL, the phase timers,
    and no warning about NCCL variables."""
    from gpu_check.path_checks import phases

    run_dir, text = trained(e, "nccl_1rank", 1, GRIDNAV, e.steps(40960, 4096), "checkpoint.interval_updates=1000",
                            *e.dev())
    expect(text, r"backend=gloo device=cpu" if e.dry else r"backend=nccl device=cuda:0", "start-up")
    refuse(text, NCCL_VAR_WARNING, "a warning about NCCL variables nobody set")
    return phases(e, run_dir) + "; no NCCL-variable warning"


def two_ranks_one_gpu(e: Env) -> str:
    """dist.device=auto on one visible GPU: both ranks fall back to gloo on cuda:0 and stay identical."""
    out = e.work / "digests"
    out.mkdir(exist_ok=True)
    cmd = train_cmd(2, GRIDNAV, e.work / "two_ranks", *GRID, e.steps(16384, 2048), "dist.bucket_mb=0.01",
                    "checkpoint.interval_updates=4", *(e.dev() if e.dry else ["dist.device=auto",
                                                                             "dist.backend=auto"]),
                    module=["tools/gpu_check/ranks.py", "digest", GRIDNAV, str(out)])
    rc, text = run(e, cmd, e.work / "two_ranks.log", **({} if e.dry else {"CUDA_VISIBLE_DEVICES": "0"}))
    if rc != 0:
        raise CheckFailed(f"exit {rc}: {tail(text)}")
    rows = [json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)]
    device = "cpu" if e.dry else "cuda:0"
    for r in rows:
        if (r["backend"], r["device"], r["grad_devices"]) != ("gloo", device, [device]):
            raise CheckFailed(f"rank {r['rank']} ran {r['backend']} on {r['device']}, gradients on "
                              f"{r['grad_devices']} (expected gloo on {device})")
    if rows[0]["model"] != rows[1]["model"] or rows[0]["optimizer"] != rows[1]["optimizer"]:
        raise CheckFailed(f"parameters or Adam state differ across ranks after {rows[0]['update']} updates")
    return f"gloo on {device} x2, {rows[0]['update']} updates, digests equal ({rows[0]['model'][:12]})"


def _both_refuse(e: Env, name: str, overrides: list[str], want: str, per_rank: tuple[dict, dict] = ({}, {}),
                 **env: str) -> None:
    """Both ranks exit 2, each with exactly one ddppo line (no traceback) matching `want`."""
    procs = start_ranks(e, name, ["env.name=synthetic", "env.num_envs=4", *overrides], per_rank, **env)
    try:
        for rank, (proc, log) in enumerate(procs):
            rc = wait(proc, e.left(120))
            text = log.read_text(errors="replace")
            errors = [line for line in text.splitlines() if "Traceback" in line or line.startswith("ddppo:")]
            if rc != 2 or len(errors) != 1 or not re.search(want, errors[0]):
                raise CheckFailed(f"rank {rank}: exit {rc}, expected 2 and one line matching {want!r}: {tail(text)}")
    finally:
        for proc, _ in procs:
            if proc.poll() is None:
                kill(proc)


def shared_gpu_refused(e: Env) -> str:
    """An explicit NCCL request with two ranks on one GPU: every rank exits 2 with one line."""
    overrides = ["dist.device=cuda"] if e.dry else ["dist.backend=nccl", "dist.device=cuda"]
    want = r"torch sees no CUDA device" if e.dry else r"needs one GPU per rank, but ranks \[0, 1\] on one GPU"
    _both_refuse(e, "refused", overrides, want, CUDA_VISIBLE_DEVICES="0")
    return ("CPU counterpart: dist.device=cuda without CUDA, exit 2 on both ranks" if e.dry
            else "exit 2 on both ranks, one line naming ranks [0, 1]")


def backend_agreement(e: Env) -> str:
    """dist.device=auto, rank 0 on the GPU, rank 1 with none visible: both exit 2 with one line naming rank 1
    and its host (they would otherwise choose NCCL and gloo and wait on each other)."""
    if e.dry:
        return "SKIP: needs a GPU on one rank (tests/distributed/test_shared_gpus.py covers it on CPU)"
    _both_refuse(e, "agreement", ["dist.device=auto", "dist.backend=auto"], r"rank\(s\) 1 \(.*\) .*have no GPU",
                 per_rank=({"CUDA_VISIBLE_DEVICES": "0"}, {"CUDA_VISIBLE_DEVICES": ""}))
    return "exit 2 on both ranks, one line naming rank 1 and its host"


def peer_lost(e: Env, sig: signal.Signals) -> str:
    """Rank 1 killed or stopped mid-update: rank 0 exits 1 naming rank 1, without an abort (judged by the exit
    code, ddppo's line and the absence of an abort; bounded by the check's deadline)."""
    if not e.dry and e.gpus < 2:
        return "SKIP: needs 2 GPUs (NCCL refuses two ranks on one)"
    timeout_s = 10 if e.dry else 20
    procs = start_ranks(e, f"lost_{sig.name}", [
        "env.name=synthetic", "env.num_envs=4", "rollout.num_steps=16", "env.synthetic.step_sleep_s=0.005",
        "run.total_env_steps=100000000", f"dist.timeout_s={timeout_s}", "checkpoint.interval_updates=100000",
        "log.interval_s=1", *e.dev()])
    (p0, log0), (p1, _) = procs
    try:
        while len(metrics(e.work / f"lost_{sig.name}")) < 3:  # past update 1: dist.timeout_s applies
            if p0.poll() is not None or p1.poll() is not None:
                raise CheckFailed(f"no 3 updates before the fault: {tail(log0.read_text(errors='replace'))}")
            e.left(1.0)
            time.sleep(0.2)
        os.kill(p1.pid, sig)
        start = time.monotonic()
        rc = wait(p0, e.left(timeout_s + 60))
        took = time.monotonic() - start
    finally:
        for p, _ in procs:
            if p.poll() is None:
                kill(p)
    text = log0.read_text(errors="replace")
    no_abort(rc, text, "rank 0")
    if rc != 1 or not LOST.search(text):
        raise CheckFailed(f"rank 0: exit {rc} after {took:.0f} s (expected 1 naming rank 1): {tail(text)}")
    where = "gloo/CPU counterpart" if e.dry else "NCCL"
    return f"{where}: rank 0 exit 1 after {took:.1f} s (dist.timeout_s={timeout_s}): " + LOST.search(text).group(0)
