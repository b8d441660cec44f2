"""Plain helpers shared by test modules (a uniquely named module: `conftest` is not safely importable)."""

from __future__ import annotations

import os
from pathlib import Path

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
    "dist.device": "cpu",  # CPU tests mean CPU: on a GPU machine auto would put (several) ranks on a GPU
}

def as_overrides(values: dict) -> list[str]:
    """{"ppo.lr": 1e-3} -> ["ppo.lr=0.001"]: `key=value` overrides for the CLI."""
    return [f"{k}={v}" for k, v in values.items()]


def cli_env() -> dict[str, str]:
    from ddppo.distributed.launch import without_launch_vars

    env = without_launch_vars()  # never inherit a launcher's identity from the shell that runs pytest
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def unavailable(require_var: str, missing: str, reason: str) -> None:
    """A test feature this machine lacks: skip with one reason line, or fail where `require_var`=1 makes the
    feature mandatory (CI sets DDPPO_REQUIRE_SLURM and DDPPO_REQUIRE_NETNS)."""
    import pytest

    if os.environ.get(require_var) == "1":
        pytest.fail(f"{require_var}=1 but {missing}: {reason}", pytrace=False)
    pytest.skip(f"{missing}: {reason} (set {require_var}=1 to make this a failure)")
