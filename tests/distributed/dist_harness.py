"""Helpers for the distributed tests: real ranks as spawned processes, `ddppo train` processes, torchrun.

Everything here is bounded: every wait has a deadline, and on a deadline or a
failure every process that was started is killed (by its own pid) before the
test fails, with the ranks' logs in the failure message.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing as mp
import os
import signal
import socket
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import psutil

REPO = Path(__file__).resolve().parents[2]
PY = sys.executable
EMPTY_CONFIG = REPO / "tests" / "distributed" / "empty.yaml"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def subprocess_env(**extra: str) -> dict[str, str]:
    if str(REPO / "tests") not in sys.path:  # testutil beside the test packages (a child may import this alone)
        sys.path.append(str(REPO / "tests"))
    import testutil

    return testutil.cli_env(no_slurm=True, **{"OMP_NUM_THREADS": "1", **extra})


# ------------------------------------------------------------ spawned ranks
def _rank_entry(fn: Callable, rank: int, world: int, port: int, args: tuple, results: Any) -> None:
    os.environ["OMP_NUM_THREADS"] = "1"
    import torch

    torch.set_num_threads(1)
    try:
        results.put((rank, True, fn(rank, world, port, *args)))
    except BaseException:  # reported to the parent, which fails the test with it
        results.put((rank, False, traceback.format_exc()))


def spawn_ranks(fn: Callable, world: int, *args: Any, timeout_s: float = 120.0) -> list[Any]:
    """Run `fn(rank, world, port, *args)` in `world` fresh processes; returns the results by rank.

    `fn` must be importable (defined at module level). Rank 0 hosts the store at `port`.
    """
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=_rank_entry, args=(fn, r, world, port, args, results), daemon=True)
             for r in range(world)]
    for p in procs:
        p.start()
    out: dict[int, Any] = {}
    errors: list[str] = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(out) + len(errors) < world:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"ranks {sorted(set(range(world)) - set(out))} did not finish within "
                                     f"{timeout_s:.0f} s; errors so far: {errors}")
            try:
                rank, ok, value = results.get(timeout=min(remaining, 1.0))
            except Exception:  # queue.Empty: check for ranks that died without reporting
                dead = [r for r, p in enumerate(procs) if p.exitcode not in (None, 0) and r not in out]
                if dead and results.empty():
                    time.sleep(1.0)
                    if results.empty():
                        raise AssertionError(f"rank(s) {dead} died (exit codes "
                                             f"{[procs[r].exitcode for r in dead]}); errors: {errors}") from None
                continue
            if ok:
                out[rank] = value
            else:
                errors.append(f"rank {rank}:\n{value}")
        if errors:
            raise AssertionError("\n".join(errors))
    finally:
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
                p.join(timeout=5)
    return [out[r] for r in range(world)]


# ---------------------------------------------------------------- train CLI
class Job:
    """Processes running `ddppo train` (plain ranks or one torchrun); logs in files."""

    def __init__(self, procs: list[subprocess.Popen], logs: list[Path], run_dir: Path):
        self.procs, self.logs, self.run_dir = procs, logs, Path(run_dir)

    def log_text(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-6000:]}" for p in self.logs if p.exists())

    def wait(self, timeout_s: float) -> list[int]:
        deadline = time.monotonic() + timeout_s
        codes = []
        for p in self.procs:
            try:
                codes.append(p.wait(timeout=max(0.1, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                self.kill()
                raise AssertionError(f"job did not exit within {timeout_s:.0f} s\n{self.log_text()}") from None
        return codes

    def kill(self) -> None:
        """SIGKILL everything this job started (torchrun's workers first), by pid."""
        for p in self.procs:
            if p.poll() is None:
                try:
                    children = psutil.Process(p.pid).children(recursive=True)
                except psutil.NoSuchProcess:
                    children = []
                for c in children + [psutil.Process(p.pid)]:
                    try:
                        c.send_signal(signal.SIGCONT)
                        c.kill()
                    except psutil.NoSuchProcess:
                        pass
                p.wait(timeout=10)

    def metrics(self) -> list[dict]:
        return read_metrics(self.run_dir)

    def wait_for_updates(self, n: int, timeout_s: float) -> list[dict]:
        """Until metrics.jsonl has `n` updates; fails early when a process exits."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            rows = self.metrics()
            if len(rows) >= n:
                return rows
            exited = [p.returncode for p in self.procs if p.poll() is not None]
            if exited:
                raise AssertionError(f"job exited ({exited}) before update {n}\n{self.log_text()}")
            time.sleep(0.2)
        self.kill()
        raise AssertionError(f"no update {n} within {timeout_s:.0f} s\n{self.log_text()}")

    def rank_pid(self, rank: int) -> int:
        """The pid of the process that is rank `rank` (read from its environment)."""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            for p in self.procs:
                try:
                    candidates = [psutil.Process(p.pid)] + psutil.Process(p.pid).children(recursive=True)
                except psutil.NoSuchProcess:
                    continue
                for c in candidates:
                    try:
                        if "ddppo" in " ".join(c.cmdline()) and c.environ().get("RANK") == str(rank):
                            return c.pid
                    except (psutil.NoSuchProcess, psutil.AccessDenied):
                        continue
            time.sleep(0.2)
        raise AssertionError(f"no process is rank {rank}\n{self.log_text()}")

    def __enter__(self) -> Job:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()


def train_args(run_dir: Path, overrides: Sequence[str], config: Path = EMPTY_CONFIG) -> list[str]:
    # CPU unless a test says otherwise: on a GPU machine auto would put ranks on (shared) GPUs
    return ["-m", "ddppo", "train", str(config), f"run.dir={run_dir}", "dist.device=cpu", *overrides]


def start_ranks(world: int, run_dir: Path, overrides: Sequence[str], log_dir: Path) -> Job:
    """`world` plain `python -m ddppo train` processes with torchrun's variables (rank 0 hosts the store)."""
    port = free_port()
    procs, logs = [], []
    for rank in range(world):
        log = Path(log_dir) / f"rank{rank}.log"
        env = subprocess_env(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
                             LOCAL_WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        with open(log, "wb") as f:
            procs.append(subprocess.Popen([PY, *train_args(run_dir, overrides)], cwd=REPO, env=env,
                                          stdout=f, stderr=subprocess.STDOUT, start_new_session=True))
        logs.append(log)
    return Job(procs, logs, run_dir)


def torchrun_cmd(nproc: int, *extra: str) -> list[str]:
    script = Path(PY).parent / "torchrun"
    head = [str(script)] if script.exists() else [PY, "-m", "torch.distributed.run"]
    return [*head, "--standalone", f"--nproc_per_node={nproc}", *extra]


def start_torchrun(nproc: int, run_dir: Path, overrides: Sequence[str], log_dir: Path,
                   torchrun_args: Sequence[str] = (), config: Path = EMPTY_CONFIG, name: str = "torchrun") -> Job:
    log = Path(log_dir) / f"{name}.log"
    cmd = torchrun_cmd(nproc, *torchrun_args) + train_args(run_dir, overrides, config)
    with open(log, "wb") as f:
        proc = subprocess.Popen(cmd, cwd=REPO, env=subprocess_env(), stdout=f, stderr=subprocess.STDOUT,
                                start_new_session=True)
    return Job([proc], [log], run_dir)


# ----------------------------------------------------------------- outputs
def read_metrics(run_dir: Path) -> list[dict]:
    path = Path(run_dir) / "metrics.jsonl"
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except ValueError:
            break  # a line being written
    return rows


def checkpoints(run_dir: Path) -> list[Path]:
    return sorted((Path(run_dir) / "checkpoints").glob("ckpt-*.pt"), key=lambda p: int(p.stem.split("-")[1]))


def digest(tensors: dict[str, Any]) -> str:
    """sha256 over the names and exact bytes of a dict of tensors (bit-identity)."""
    h = hashlib.sha256()
    for name in sorted(tensors):
        t = tensors[name].detach().cpu().contiguous()
        h.update(name.encode())
        h.update(str(t.dtype).encode())
        h.update(t.numpy().tobytes())
    return h.hexdigest()


def synthetic(num_envs: int = 4, num_steps: int = 8, **extra: Any) -> list[str]:
    """Overrides for a tiny synthetic-env run."""
    base = {"env.name": "synthetic", "env.num_envs": num_envs, "rollout.num_steps": num_steps,
            "ppo.num_mini_batch": 2, "ppo.epochs": 2, "policy.hidden_size": 32, "log.tensorboard": "false",
            "log.interval_s": 1, "checkpoint.interval_updates": 1000}
    base.update(extra)
    return [f"{k}={v}" for k, v in base.items()]


def optimizer_tensors(optimizer: Any) -> dict[str, Any]:
    """An optimiser's per-parameter state as {"<param>.<key>": tensor} (for `digest`)."""
    import torch

    out = {}
    for i, state in optimizer.state_dict()["state"].items():
        for k, v in state.items():
            out[f"{i}.{k}"] = v if torch.is_tensor(v) else torch.tensor(v)
    return out


def train_and_digest(rank: int, world: int, port: int, overrides: list[str], run_dir: str) -> dict:
    """A `spawn_ranks` worker: build the real Trainer on a gloo rank for the config `overrides` in `run_dir`,
    train to the end, and report exit code, counters, per-rank seed and digests (initial and final model, Adam
    state, and the acting copy's model under rollout.overlap_learning)."""
    import dataclasses

    from ddppo.config import load_config
    from ddppo.distributed.placement import resolve
    from ddppo.train.builder import Trainer
    from testutil import gloo_context

    cfg = load_config(None, [*overrides, f"run.dir={run_dir}"])
    ctx = gloo_context(rank, world, port, cfg.run.seed, cfg.dist.timeout_s, cfg.dist.startup_timeout_s,
                       resolve(dataclasses.asdict(cfg.placement), world))
    try:
        trainer = Trainer(cfg, ctx)
        try:
            initial = digest(trainer.policy.state_dict())
            code = trainer.train()
            out = {"code": code, "update": trainer.progress.update, "env_steps": trainer.progress.env_steps,
                   "initial": initial, "model": digest(trainer.policy.state_dict()),
                   "optimizer": digest(optimizer_tensors(trainer.updater.optimizer)), "seed": ctx.seed}
            if cfg.rollout.overlap_learning:
                out["acting"] = digest(trainer.learning.acting.state_dict())
            return out
        finally:
            trainer.close()
    finally:
        ctx.close()


def tiny_learner(rank: int, world: int, port: int, ppo: Any, num_envs: int, steps: int, obs_dim: int,
                 actions: int) -> tuple[Any, Any, Any, Any]:
    """(ctx, policy, updater, storage) of a real gloo rank: a tiny MLP policy on a vector observation, its
    PPOUpdater with the PPOConfig `ppo`, and an empty rollout storage of `steps` x `num_envs`."""
    import gymnasium
    import numpy as np
    import torch

    from ddppo.config import PolicyConfig
    from testutil import gloo_context
    from ddppo.model.policy import Policy
    from ddppo.advantage import estimator_for
    from ddppo.ppo.update import PPOUpdater
    from ddppo.rollout.storage import RolloutStorage

    ctx = gloo_context(rank, world, port)
    torch.manual_seed(0)
    obs_space = gymnasium.spaces.Dict({"obs": gymnasium.spaces.Box(-np.inf, np.inf, (obs_dim,), np.float32)})
    policy = Policy(obs_space, gymnasium.spaces.Discrete(actions), PolicyConfig(hidden_size=8))
    storage = RolloutStorage(steps, num_envs, obs_space, gymnasium.spaces.Discrete(actions),
                             policy.initial_memory(num_envs), torch.device("cpu"))
    return ctx, policy, PPOUpdater(policy, ppo, ctx, advantage=estimator_for(ppo, num_envs)), storage


def fill_random_rollout(storage: Any, policy: Any, steps: int, actions: int, generator: Any) -> Any:
    """Start `storage` afresh and insert `steps` steps of random observations and actions (zero rewards); the
    Rollout (bootstrap values 0)."""
    import torch

    n, obs_dim = storage.num_envs, storage.obs["obs"].shape[-1]
    storage.begin({"obs": torch.randn(n, obs_dim, generator=generator)}, torch.ones(n), policy.initial_memory(n))
    for _ in range(steps):
        zeros = torch.zeros(n)
        storage.insert(torch.randint(0, actions, (n,), generator=generator), zeros - 1.0, zeros, zeros, zeros,
                       {"obs": torch.randn(n, obs_dim, generator=generator)})
    return storage.rollout(torch.zeros(n))
