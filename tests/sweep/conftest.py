"""Sweep test helpers: tiny sweep specs (the local SLURM fixture `slurm_cluster` is in tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def spec_file(tmp_path):
    """`spec_file(name, **spec)` -> path of a tiny gridnav sweep spec in tmp_path (see sweep_helpers.write_spec)."""
    from sweep_helpers import write_spec

    def make(name: str = "tiny", **spec) -> Path:
        return write_spec(tmp_path / f"{name}.yaml", **spec)
    return make
