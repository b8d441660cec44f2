"""slurm/single_node.sh: the same job under torchrun --standalone (no SLURM needed)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from testutil import cli_env
from test_train_sbatch import CONFIG, NUM_ENVS, NUM_STEPS, REPO, TINY

pytestmark = pytest.mark.slow


def test_single_node_two_ranks(tmp_path):
    run_dir = tmp_path / "run"
    total = 4 * NUM_ENVS * NUM_STEPS * 2
    env = cli_env(no_slurm=True, NPROC="2", DDPPO_PYTHON=sys.executable)
    proc = subprocess.run([str(REPO / "slurm" / "single_node.sh"), CONFIG, f"run.dir={run_dir}",
                           f"run.total_env_steps={total}", *TINY], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-4000:]
    assert "on 2 rank(s)" in log, log[-4000:]
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["update"] for r in rows] == list(range(1, len(rows) + 1))
    assert rows[-1]["env_steps"] >= total
    assert (run_dir / "checkpoints" / f"ckpt-{len(rows)}.pt").exists()
