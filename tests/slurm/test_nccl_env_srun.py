"""NCCL's lost-peer handling under the real srun of the local SLURM: each task of an srun step hands NCCL the
same environment as under torchrun and by hand (tests/distributed/test_nccl_launchers.py): blocking wait, no
warning; a blocking-wait setting the user exported through sbatch is kept and named."""

from __future__ import annotations

import json

import pytest

from local_slurm import free_port
from test_train_sbatch import PYTHON, REPO

PROBE = REPO / "tests" / "distributed" / "nccl_env_probe.py"

pytestmark = pytest.mark.slow


def probe_srun(cluster, tmp_path, **user_env: str) -> list[dict]:
    out_dir, log = tmp_path / "out", tmp_path / "job.out"
    out_dir.mkdir()
    script = tmp_path / "probe.sbatch"
    script.write_text(f"""#!/bin/bash
export MASTER_ADDR=127.0.0.1 MASTER_PORT={free_port()} PYTHONPATH={REPO}
srun {PYTHON} {PROBE} {out_dir}
""")
    job = cluster.sbatch(script, options=("--nodes=1", "--ntasks=2", "--cpus-per-task=1", "--gres=none",
                                          "--time=00:05:00", f"--output={log}"), env=user_env, cwd=REPO)
    info = cluster.wait_job(job, timeout=240, log=log)
    assert info["JobState"] == "COMPLETED", cluster.describe(job, log)
    results = [json.loads(p.read_text()) for p in sorted(out_dir.glob("rank*.json"))]
    assert len(results) == 2 and {r["source"] for r in results} == {"slurm"}, cluster.describe(job, log)
    return results


def test_srun_tasks_hand_nccl_blocking_wait_and_no_warning(slurm_cluster, tmp_path):
    for r in probe_srun(slurm_cluster, tmp_path):
        assert r["backend"] == "nccl" and r["launcher_env"]["TORCH_NCCL_ASYNC_ERROR_HANDLING"] is None, r
        assert r["env"]["TORCH_NCCL_BLOCKING_WAIT"] == "1" and r["env"]["TORCH_NCCL_DUMP_ON_TIMEOUT"] == "0", r
        assert not [w for w in r["warnings"] if "NCCL" in w], r


def test_srun_keeps_and_names_a_blocking_wait_the_user_exported(slurm_cluster, tmp_path):
    for r in probe_srun(slurm_cluster, tmp_path, TORCH_NCCL_BLOCKING_WAIT="0"):
        assert r["env"]["TORCH_NCCL_BLOCKING_WAIT"] == "0", r
        assert [w for w in r["warnings"] if "TORCH_NCCL_BLOCKING_WAIT=0 set" in w], r
