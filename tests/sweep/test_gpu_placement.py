"""A local sweep hands each parallel run its own GPU(s) of the visible ones (issue 43 item 3), with a stand-in
`nvidia-smi` on PATH listing the machine's GPUs and CUDA_VISIBLE_DEVICES set or not, through the real
`python -m ddppo sweep` (the runs themselves train on this machine's CPU: torch sees no CUDA here)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import testutil

pytestmark = pytest.mark.multiprocess

STEPS = 4 * 32
AUTO = {"run.total_env_steps": STEPS, "dist.device": "auto"}  # the tiny runs' dist.device=cpu would place nothing


@pytest.fixture
def four_gpu_machine(tmp_path):
    """PATH with an `nvidia-smi` that lists 4 GPUs, as `nvidia-smi -L` prints them."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text("#!/bin/sh\n" + "".join(
        f"echo 'GPU {i}: NVIDIA H100 80GB HBM3 (UUID: GPU-0000000{i}-1111-2222-3333-444444444444)'\n"
        for i in range(4)))
    smi.chmod(0o755)
    return str(bin_dir) + os.pathsep + os.environ["PATH"]


def sweep(tmp_path, path_var, *args, visible=None, timeout=400):
    env = testutil.cli_env(PATH=path_var)
    env.pop("CUDA_VISIBLE_DEVICES", None)
    if visible is not None:
        env["CUDA_VISIBLE_DEVICES"] = visible
    return subprocess.run([sys.executable, "-m", "ddppo", "sweep", *args, "--sweep-dir", str(tmp_path / "sweep")],
                          cwd=testutil.REPO, env=env, capture_output=True, text=True, timeout=timeout)


def placed(sweep_dir: Path) -> dict[str, str]:
    """Each run's CUDA_VISIBLE_DEVICES, from the launch line its log starts with."""
    out = {}
    for log in sorted((sweep_dir / "logs").glob("*.log")):
        m = re.search(r"\] CUDA_VISIBLE_DEVICES=(\S+) ", log.read_text())
        out[log.stem] = m.group(1) if m else None
    return out


def test_parallel_runs_each_get_their_own_gpu(spec_file, tmp_path, four_gpu_machine):
    spec = spec_file(seeds=2, overrides=AUTO)
    r = sweep(tmp_path, four_gpu_machine, str(spec), "--max-parallel", "2", visible="3,1")
    assert r.returncode == 0, r.stderr[-3000:]
    assert sorted(placed(tmp_path / "sweep").values()) == ["1", "3"], placed(tmp_path / "sweep")
    assert "GPUs per parallel run: 0: 3; 1: 1" in r.stdout


def test_without_cuda_visible_devices_nvidia_smi_counts_and_ranks_get_one_gpu_each(spec_file, tmp_path,
                                                                                    four_gpu_machine):
    spec = spec_file(seeds=3, ranks=2, overrides=AUTO)
    r = sweep(tmp_path, four_gpu_machine, str(spec), "--max-parallel", "2", "--dry-run")
    assert r.returncode == 0 and "GPUs per parallel run: 0: 0,1; 1: 2,3" in r.stdout, r


def test_more_parallel_ranks_than_visible_gpus_is_refused_unless_sharing_is_asked_for(spec_file, tmp_path,
                                                                                    four_gpu_machine):
    """nvidia-smi lists 4, but only 2 are visible: 3 runs at a time are refused in one line, nothing written."""
    spec = spec_file(seeds=3, overrides=AUTO)
    r = sweep(tmp_path, four_gpu_machine, str(spec), "--max-parallel", "3", visible="2,5")
    assert r.returncode == 2, r
    line = r.stderr.strip().splitlines()[-1]
    assert "3 run(s) at a time x 1 rank(s) need 3 GPUs" in line and "2 are visible (CUDA_VISIBLE_DEVICES=2,5)" in line
    assert "--share-gpus" in line and not (tmp_path / "sweep").exists()
    r = sweep(tmp_path, four_gpu_machine, str(spec), "--max-parallel", "3", "--share-gpus", "--dry-run",
              visible="2,5")
    assert r.returncode == 0 and "GPUs per parallel run: 0: 2; 1: 5; 2: 2" in r.stdout, r
    shared = spec_file("shared", seeds=3, share_gpus=True, overrides=AUTO)
    r = sweep(tmp_path, four_gpu_machine, str(shared), "--max-parallel", "3", "--dry-run", visible="2,5")
    assert r.returncode == 0 and "GPUs per parallel run: 0: 2; 1: 5; 2: 2" in r.stdout, r


def test_cpu_runs_and_machines_without_gpus_place_nothing(spec_file, tmp_path, four_gpu_machine):
    spec = spec_file(seeds=3, overrides={"run.total_env_steps": STEPS, "dist.device": "cpu"})
    r = sweep(tmp_path, four_gpu_machine, str(spec), "--max-parallel", "3", "--dry-run", visible="0")
    assert r.returncode == 0 and "GPUs per parallel run" not in r.stdout, r
    spec = spec_file("auto", seeds=3, overrides=AUTO)
    r = sweep(tmp_path, four_gpu_machine, str(spec), "--max-parallel", "3", "--dry-run", visible="")
    assert r.returncode == 0 and "GPUs per parallel run" not in r.stdout, r
