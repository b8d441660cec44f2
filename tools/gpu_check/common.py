"""What the GPU check's checks share (tools/gpu_check/run.py runs them): the machine they run on, bounded
processes (every wait ends at the check's deadline), reading what a run wrote, and the verdicts on an exit."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PY = sys.executable
GRIDNAV = "configs/gridnav.yaml"
GRID = ["env.num_envs=16", "rollout.num_steps=32", "checkpoint.interval_updates=100000"]
# a process that ended by an abort (NCCL's watchdog, std::terminate, a fatal signal), read from the runtime's own
# lines; the exit code is judged first (a negative one is a signal)
ABORTED = re.compile(r"core dumped|terminate called|Fatal Python error|SIGABRT")
LOST = re.compile(r"peer rank\(s\) \[1\] lost")
# a warning of ddppo's about the user's NCCL variables (cuda.nccl_failure_env)
NCCL_VAR_WARNING = re.compile(r"NCCL_\w+=\S*( \(set in your environment\))? (set|is not used)")
CUDNN_NOT_CONTIGUOUS = re.compile(r"RNN module weights are not part of single contiguous chunk of memory")


class CheckFailed(RuntimeError):
    """A check's one-line reason."""


@dataclasses.dataclass
class Env:
    dry: bool
    work: Path
    gpus: int
    deadline: float = float("inf")  # time.monotonic() by which the running check must end

    def dev(self, backend: str = "nccl", device: str = "cuda") -> list[str]:
        return ["dist.device=cpu", "dist.backend=gloo"] if self.dry else [f"dist.device={device}",
                                                                           f"dist.backend={backend}"]

    def steps(self, real: int, dry: int) -> str:
        return f"run.total_env_steps={dry if self.dry else real}"

    def left(self, wanted: float) -> float:
        """`wanted` seconds, or what is left of the check's deadline; CheckFailed once it has passed."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise CheckFailed("over its deadline")
        return min(wanted, left)


def child_env(**extra: str) -> dict[str, str]:
    from ddppo.distributed.launch import without_launch_vars

    env = without_launch_vars()
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("OMP_NUM_THREADS", "2")
    env.update(extra)
    return env


def run(e: Env, cmd: list[str], log: Path, timeout_s: float = 300, **env: str) -> tuple[int, str]:
    """`cmd` with its output in `log`; rc 124 when it ran past `timeout_s` or the check's deadline (killed)."""
    with open(log, "w") as f:
        proc = subprocess.Popen(cmd, cwd=REPO, env=child_env(**env), stdout=f, stderr=subprocess.STDOUT,
                                start_new_session=True)
        rc = wait(proc, e.left(timeout_s))
        if rc is None:
            kill(proc)
            rc = 124
    return rc, log.read_text(errors="replace")


def wait(proc: subprocess.Popen, timeout_s: float) -> int | None:
    try:
        return proc.wait(timeout=max(0.1, timeout_s))
    except subprocess.TimeoutExpired:
        return None


def kill(proc: subprocess.Popen) -> None:
    """SIGKILL `proc` and everything in its session (torchrun's workers), by process group."""
    import signal

    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def torchrun(nproc: int, *body: str) -> list[str]:
    return [PY, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}", *body]


def train_cmd(nproc: int, config: str, run_dir: Path, *overrides: str, module: list[str] | None = None) -> list[str]:
    base = [f"run.dir={run_dir}", "log.tensorboard=false", "log.interval_s=5", "log.bottleneck_interval_s=1",
            "run.torch_threads=2"]
    return torchrun(nproc, *(module or ["-m", "ddppo", "train", config]), *base, *overrides)


def trained(e: Env, name: str, nproc: int, config: str, *overrides: str, **env: str) -> tuple[Path, str]:
    """Train; the run directory and the log, or CheckFailed with the log's tail."""
    run_dir = e.work / name
    rc, text = run(e, train_cmd(nproc, config, run_dir, *overrides), e.work / f"{name}.log", **env)
    if rc != 0:
        raise CheckFailed(f"exit {rc}{' (deadline)' if rc == 124 else ''}: {tail(text)}")
    return run_dir, text


def tail(text: str, n: int = 3) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return " | ".join(lines[-n:])[-600:]


def metrics(run_dir: Path) -> list[dict]:
    path = run_dir / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def reached(run_dir: Path, env_steps: int) -> dict:
    """The last metrics row; CheckFailed unless the run counted at least `env_steps` env steps at some fps."""
    rows = metrics(run_dir)
    if not rows or rows[-1].get("env_steps", 0) < env_steps or not rows[-1].get("perf/fps", 0) > 0:
        raise CheckFailed(f"the run stopped short: {rows[-1] if rows else 'no metrics'} (budget {env_steps})")
    return rows[-1]


def expect(text: str, pattern: str, what: str) -> re.Match:
    found = re.search(pattern, text)
    if not found:
        raise CheckFailed(f"{what}: no line matching {pattern!r}: {tail(text)}")
    return found


def refuse(text: str, pattern: re.Pattern, what: str) -> None:
    found = pattern.search(text)
    if found:
        line = next(x for x in text.splitlines() if pattern.search(x))
        raise CheckFailed(f"{what}: {line.strip()[:300]}")


def no_abort(rc: int | None, text: str, who: str) -> None:
    """CheckFailed when the process ended by a signal (an abort is SIGABRT) or wrote an abort's lines."""
    if rc is not None and rc < 0:
        raise CheckFailed(f"{who} ended by signal {-rc} (an abort): {tail(text)}")
    refuse(text, ABORTED, f"{who} aborted")


def model_digest(run_dir: Path) -> str:
    from ddppo import checkpoint
    from gpu_check.ranks import digest

    newest = max((run_dir / "checkpoints").glob("ckpt-*.pt"), key=lambda p: int(p.stem.split("-")[1]))
    return digest(checkpoint.load(newest)["model"])


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_ranks(e: Env, name: str, overrides: list[str], per_rank: tuple[dict, dict] = ({}, {}),
                **env: str) -> list[tuple[subprocess.Popen, Path]]:
    """Two `python -m ddppo train` processes with torchrun's variables (rank 0 hosts the store); `per_rank`:
    extra environment of each."""
    port, out = free_port(), []
    for rank in (0, 1):
        log = e.work / f"{name}.rank{rank}.log"
        launch = {"RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_RANK": str(rank), "LOCAL_WORLD_SIZE": "2",
                  "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
        with open(log, "w") as f:
            out.append((subprocess.Popen([PY, "-m", "ddppo", "train", GRIDNAV, f"run.dir={e.work / name}",
                                          "log.tensorboard=false", "run.torch_threads=1", *overrides],
                                         cwd=REPO, env=child_env(**launch, **env, **per_rank[rank]), stdout=f,
                                         stderr=subprocess.STDOUT, start_new_session=True), log))
    return out
