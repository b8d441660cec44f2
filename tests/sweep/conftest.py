"""Sweep test helpers: tiny sweep specs, and the local SLURM cluster fixture of tests/slurm.

`slurm_cluster` is the session fixture defined in tests/slurm/conftest.py, re-exported here (a conftest
fixture is only visible below its own directory). Pytest keeps one instance per defining conftest, so a run
of both tests/slurm and tests/sweep starts two throwaway clusters, one after the other's tests.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SLURM_TESTS = REPO / "tests" / "slurm"

sys.path.insert(0, str(SLURM_TESTS))  # tests/slurm/conftest.py imports local_slurm
_spec = importlib.util.spec_from_file_location("_ddppo_slurm_conftest", SLURM_TESTS / "conftest.py")
_slurm_conftest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_slurm_conftest)
slurm_cluster = _slurm_conftest.slurm_cluster


@pytest.fixture
def spec_file(tmp_path):
    """`spec_file(name, **spec)` -> path of a tiny gridnav sweep spec in tmp_path (see sweep_helpers.write_spec)."""
    from sweep_helpers import write_spec

    def make(name: str = "tiny", **spec) -> Path:
        return write_spec(tmp_path / f"{name}.yaml", **spec)
    return make
