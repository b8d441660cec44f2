"""Helpers of the sweep tests: tiny sweep specs and reading run dirs."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]

# 4 envs x 32 steps = 128 env steps per update; a small, fast model; a checkpoint every update.
TINY = {
    "env.num_envs": 4,
    "rollout.num_steps": 32,
    "ppo.num_mini_batch": 2,
    "ppo.epochs": 1,
    "policy.hidden_size": 16,
    "env.gridnav.map_size": 7,
    "env.gridnav.num_maps": 4,
    "log.interval_s": 0.1,
    "log.window": 1,
    "log.tensorboard": False,
    "run.torch_threads": 1,
    "checkpoint.interval_updates": 1,
    "checkpoint.keep_last": 5,
}


def write_spec(path: Path, **spec) -> Path:
    """A spec on the gridnav base with the tiny overrides; `spec` adds or replaces top-level keys
    (`overrides` is merged into the tiny ones)."""
    data = {"base": str(REPO / "configs" / "gridnav.yaml"),
            "overrides": {**TINY, **spec.pop("overrides", {})}, **spec}
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def read_updates(run_dir: Path) -> list[dict]:
    path = Path(run_dir) / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
