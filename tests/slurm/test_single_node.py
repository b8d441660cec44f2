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


def fake_gpus(tmp_path, count: int) -> str:
    """PATH with a stand-in `nvidia-smi` listing `count` GPUs (it ignores CUDA_VISIBLE_DEVICES, as the real one)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text("#!/bin/sh\n" + "".join(f"echo 'GPU {i}: NVIDIA A100 (UUID: GPU-{i:08d}-aaaa)'\n"
                                           for i in range(count)))
    smi.chmod(0o755)
    import os
    return f"{bin_dir}{os.pathsep}{os.environ['PATH']}"


def single_node(tmp_path, *overrides, **env):
    run_dir = tmp_path / "run"
    total = 2 * NUM_ENVS * NUM_STEPS * 2
    proc = subprocess.run([str(REPO / "slurm" / "single_node.sh"), CONFIG, f"run.dir={run_dir}",
                           f"run.total_env_steps={total}", *TINY, *overrides], cwd=REPO,
                          env=cli_env(no_slurm=True, DDPPO_PYTHON=sys.executable, **env), capture_output=True,
                          text=True, timeout=300)
    return proc, proc.stdout + proc.stderr


def test_the_rank_count_is_the_gpus_the_job_sees_not_every_gpu_of_the_machine(tmp_path):
    """8 GPUs in the machine, 2 visible: 2 ranks (before: nvidia-smi's 8, then a silent fallback to gloo)."""
    proc, log = single_node(tmp_path, PATH=fake_gpus(tmp_path, 8), CUDA_VISIBLE_DEVICES="0,1")
    assert proc.returncode == 0, log[-4000:]
    assert "nproc=2 gpus=2" in log and "on 2 rank(s)" in log, log[-4000:]


def test_more_ranks_than_visible_gpus_is_refused_in_one_line(tmp_path):
    proc, log = single_node(tmp_path, "dist.device=auto", PATH=fake_gpus(tmp_path, 8), CUDA_VISIBLE_DEVICES="5,6",
                            NPROC="4")
    assert proc.returncode == 2, log[-4000:]
    line = log.strip().splitlines()[-1]
    assert "NPROC=4 ranks but this job sees 2 GPU(s) (CUDA_VISIBLE_DEVICES=5,6)" in line, log
    assert not (tmp_path / "run").exists()
