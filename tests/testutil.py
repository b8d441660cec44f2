"""Plain helpers shared by test modules (a uniquely named module: `conftest` is not safely importable)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any, Iterator

REPO = Path(__file__).resolve().parents[1]

# A gridnav run of a few seconds: 4 envs x 32 steps = 128 env steps per update.
TINY = {
    "env.num_envs": 4,
    "rollout.num_steps": 32,
    "ppo.num_mini_batch": 2,
    "ppo.epochs": 2,
    "policy.hidden_size": 32,
    "env.gridnav.map_size": 7,
    "env.gridnav.num_maps": 4,
    "env.gridnav.max_episode_steps": 20,
    "log.interval_s": 0.1,
    "log.window": 1,
    "run.torch_threads": 1,
}

def as_overrides(values: dict) -> list[str]:
    """{"ppo.lr": 1e-3} -> ["ppo.lr=0.001"]: `key=value` overrides for the CLI."""
    return [f"{k}={v}" for k, v in values.items()]


def cli_env(no_slurm: bool = False, **extra: str) -> dict[str, str]:
    """The environment of a process this test starts as its own job: no launcher variables (LAUNCH_VARS: it
    never inherits a launcher's identity from the shell that runs pytest), with `no_slurm` none of SLURM_*
    either (a job started inside an allocation must not look like a step of it), the repo on PYTHONPATH, one
    OpenMP thread unless set, then `extra`."""
    from ddppo.distributed.launch import without_launch_vars

    env = {k: v for k, v in without_launch_vars().items() if not (no_slurm and k.startswith("SLURM_"))}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("OMP_NUM_THREADS", "1")
    env.update(extra)
    return env


def unavailable(require_var: str, missing: str, reason: str) -> None:
    """A test feature this machine lacks: skip with one reason line, or fail where `require_var`=1 makes the
    feature mandatory (CI sets DDPPO_REQUIRE_SLURM and DDPPO_REQUIRE_NETNS)."""
    import pytest

    if os.environ.get(require_var) == "1":
        pytest.fail(f"{require_var}=1 but {missing}: {reason}", pytrace=False)
    pytest.skip(f"{missing}: {reason} (set {require_var}=1 to make this a failure)")


def gloo_context(rank: int = 0, world: int = 1, port: int = 0, seed: int = 0, timeout_s: float = 60.0,
                 startup_timeout_s: float = 60.0, **launch: Any):
    """A DistContext on gloo and the CPU, as rank `rank` of `world` meeting at 127.0.0.1:`port` (one process:
    an in-memory store, no port); `launch`: further Launch fields (attempt, agent_store). Close it."""
    from ddppo.distributed import Launch, init_distributed

    how = "torchrun" if world > 1 or launch else "single"
    return init_distributed("gloo", "cpu", timeout_s, startup_timeout_s, seed,
                            Launch(rank, world, rank, world, "127.0.0.1", port, how, **launch))


@contextlib.contextmanager
def trainer_in_process(cfg) -> Iterator[Any]:
    """A Trainer for `cfg` in this process on a one-rank gloo context (resuming from its run dir, as `ddppo train`
    would); closed with its context afterwards."""
    from ddppo.train.trainer import Trainer

    ctx = gloo_context(seed=cfg.run.seed)
    try:
        trainer = Trainer(cfg, ctx)
        try:
            yield trainer
        finally:
            trainer.close()
    finally:
        ctx.close()
