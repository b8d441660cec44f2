"""Helpers for the reliability tests: snapshots of a run dir, finiteness scans, tmpfs, process helpers.

The process helpers of tests/distributed/dist_harness.py are reused (every wait bounded, every process
killed by its own pid on failure).
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "distributed"))

import dist_harness  # noqa: E402  (tests/distributed/dist_harness.py)

EMPTY_CONFIG = dist_harness.EMPTY_CONFIG


def run_cli(*args: str, timeout: float = 150) -> subprocess.CompletedProcess:
    """`python -m ddppo ARGS...` as a user runs it (no launcher variables inherited); text output captured."""
    return subprocess.run([sys.executable, "-m", "ddppo", *args], cwd=REPO, env=dist_harness.subprocess_env(),
                          capture_output=True, text=True, timeout=timeout)


def run_cli_many(arg_lists: list[list[str]], parallel: int = 3, timeout: float = 150) -> list:
    """Several CLI invocations, `parallel` at a time (each is mostly interpreter start-up)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(parallel) as pool:
        return list(pool.map(lambda a: run_cli(*a, timeout=timeout), arg_lists))


def describe(res: subprocess.CompletedProcess) -> str:
    return f"rc={res.returncode}\n--- stdout\n{res.stdout[-2000:]}\n--- stderr\n{res.stderr[-3000:]}"


def synthetic_overrides(run_dir: Path, **extra: Any) -> list[str]:
    """A tiny synthetic-env run: 4 envs x 8 steps per rank and update, a small policy, no TensorBoard."""
    base = {"run.dir": str(run_dir), "env.name": "synthetic", "env.num_envs": 4, "rollout.num_steps": 8,
            "ppo.num_mini_batch": 2, "ppo.epochs": 2, "policy.hidden_size": 32, "log.tensorboard": "false",
            "log.interval_s": 0.01, "run.torch_threads": 1, "preemption.sync_frac": 1,
            "dist.device": "cpu"}  # CPU tests mean CPU: on a GPU machine auto would put ranks on (shared) GPUs
    base.update(extra)
    return [f"{k}={v}" for k, v in base.items()]


def snapshot(path: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under `path` (hidden ones too) -> (sha256, mtime_ns); directories as ("dir", 0)."""
    out: dict[str, tuple[bytes, int]] = {}
    if not path.exists():
        return out
    for p in sorted(path.rglob("*")):
        rel = str(p.relative_to(path))
        if p.is_dir():
            out[rel] = (b"dir", 0)
        else:
            out[rel] = (hashlib.sha256(p.read_bytes()).digest(), p.stat().st_mtime_ns)
    return out


def non_finite_paths(obj: Any, path: str = "") -> Iterator[str]:
    """Paths (`/model/w`, `/counters/window/3/0`) of every non-finite float in a loaded checkpoint."""
    if isinstance(obj, torch.Tensor):
        if obj.is_floating_point() and not bool(torch.isfinite(obj).all()):
            yield path
    elif isinstance(obj, np.ndarray):
        if obj.dtype.kind in "fc" and not bool(np.isfinite(obj).all()):
            yield path
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from non_finite_paths(v, f"{path}/{k}")
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from non_finite_paths(v, f"{path}/{i}")
    elif isinstance(obj, float) and not math.isfinite(obj):
        yield path


def tensors_equal(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@contextlib.contextmanager
def tmpfs(size: str, parent: Path) -> Iterator[Path]:
    """A fresh tmpfs of `size` mounted under `parent` (always unmounted); skips the test if mounting fails."""
    import pytest

    mnt = parent / f"tmpfs-{uuid.uuid4().hex[:8]}"
    mnt.mkdir()
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)], capture_output=True,
                         text=True, timeout=30)
    if res.returncode != 0:
        mnt.rmdir()
        pytest.skip(f"cannot mount a tmpfs (needs root and mount rights): {res.stderr.strip()[:200]}")
    try:
        yield mnt
    finally:
        for _ in range(5):
            if subprocess.run(["umount", str(mnt)], capture_output=True, timeout=30).returncode == 0:
                break
            subprocess.run(["sync"], timeout=30)
        else:
            subprocess.run(["umount", "-l", str(mnt)], capture_output=True, timeout=30)
        with contextlib.suppress(OSError):
            mnt.rmdir()
