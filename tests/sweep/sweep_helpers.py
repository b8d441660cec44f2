"""Helpers of the sweep tests: tiny sweep specs and reading run dirs."""

from __future__ import annotations

from pathlib import Path

import yaml

import testutil
from ddppo.rundir import RunDir

REPO = testutil.REPO

# the one tiny run (tests/testutil.py), with one epoch, a smaller model and a checkpoint every update
TINY = {**testutil.TINY, "ppo.epochs": 1, "policy.hidden_size": 16, "log.tensorboard": False,
        "checkpoint.interval_updates": 1, "checkpoint.keep_last": 5}


def write_spec(path: Path, **spec) -> Path:
    """A spec on the gridnav base with the tiny overrides; `spec` adds or replaces top-level keys
    (`overrides` is merged into the tiny ones)."""
    data = {"base": str(REPO / "configs" / "gridnav.yaml"),
            "overrides": {**TINY, **spec.pop("overrides", {})}, **spec}
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def read_updates(run_dir: Path) -> list[dict]:
    return RunDir(run_dir).metrics()
