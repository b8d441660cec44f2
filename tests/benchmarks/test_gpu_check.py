"""benchmarks/gpu_check.py's plan, without running it (CI runs `--dry-run` itself, .ci/run): every defect of
issue 24 that only a GPU can show has a check; a real run asks for CUDA/NCCL where a dry run asks for CPU/gloo;
checks that need two GPUs skip on one; the table is one row per check."""

from __future__ import annotations

import signal
from pathlib import Path

from ddppo.benchmarks import gpu_check


def test_every_gpu_defect_has_a_check():
    covers = " ".join(c for _, c, _ in gpu_check.CHECKS)
    for defect in ("d1", "d2", "d3", "d5"):
        assert defect in covers, defect
    names = [n for n, _, _ in gpu_check.CHECKS]
    assert len(names) == len(set(names))
    for needed in ("nccl_1rank", "two_ranks_one_gpu", "deterministic_lstm", "resume_gpu", "eval_export",
                   "habitat_paper_policy", "timing_overhead", "habitat_sim_cuda0", "peer_killed", "peer_stopped"):
        assert needed in names


def test_real_runs_ask_for_cuda_and_nccl_dry_runs_for_cpu(tmp_path: Path):
    real, dry = gpu_check.Env(False, tmp_path, 1), gpu_check.Env(True, tmp_path, 0)
    assert real.dev() == ["dist.device=cuda", "dist.backend=nccl"]
    assert dry.dev() == dry.dev("gloo", "auto") == ["dist.device=cpu", "dist.backend=gloo"]
    assert real.steps(100, 1) == "run.total_env_steps=100" and dry.steps(100, 1) == "run.total_env_steps=1"
    cmd = gpu_check.train_cmd(2, "configs/gridnav.yaml", tmp_path / "run", *real.dev())
    assert cmd[1:4] == ["-m", "torch.distributed.run", "--standalone"] and "--nproc-per-node=2" in cmd
    assert cmd[-2:] == ["dist.device=cuda", "dist.backend=nccl"] and f"run.dir={tmp_path / 'run'}" in cmd


def test_lost_peer_checks_need_two_gpus(tmp_path: Path):
    one_gpu = gpu_check.Env(False, tmp_path, 1)
    for sig in (signal.SIGKILL, signal.SIGSTOP):
        assert gpu_check.peer_lost(one_gpu, sig).startswith("SKIP")


def test_lost_peer_line_and_bad_exits_are_recognised():
    line = ("ERROR ddppo.distributed: rank 0: gradient all-reduce failed: peer rank(s) [1] lost (they did not "
            "check in after the failure) (timed out in blocking wait); exiting")
    assert gpu_check.LOST.search(line) and not gpu_check.BAD_EXIT.search(line)
    assert gpu_check.BAD_EXIT.search("terminate called after throwing an instance of 'c10::DistBackendError'")
    assert gpu_check.BAD_EXIT.search("Fatal Python error: Aborted")


def test_table_has_a_row_per_check():
    rows = [("a", "d1: x", "PASS", "fps 1", 1.0), ("b", "d2: y", "SKIP", "why", 0.0)]
    lines = gpu_check.table(rows).splitlines()
    assert len(lines) == 4 and lines[2].startswith("a ") and "SKIP" in lines[3]
