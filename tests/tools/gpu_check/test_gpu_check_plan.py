"""tools/gpu_check/run.py's plan, verdicts and summary, without running it (CI runs `--dry-run` itself,
.ci/run): the most valuable checks first and the whole plan's budget known; a real run asks for CUDA/NCCL where a
dry run asks for CPU/gloo; a SKIP never reads as "all checks passed"; a check past the run's budget is not
started; the peer checks are judged by exit code and the named rank, not by NCCL's log text."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from gpu_check import common, nccl_checks, run
from gpu_check.common import CheckFailed, Env


def test_the_most_valuable_checks_come_first_and_every_check_has_a_budget():
    names = [c.name for c in run.PLAN]
    assert names[:3] == ["blocking_wait_timeout", "blocking_wait_torchrun", "nccl_1rank"]
    assert len(names) == len(set(names)) and names[-2:] == ["habitat_sim_cuda0", "bf16_compile"]
    assert all(c.budget_s > 0 for c in run.PLAN)
    # both parts' plans fit the run's budget (each part: one command; test_gpu_check_bare.py)
    assert sum(c.budget_s for c in run.PLAN) <= run.RUN_BUDGET_S


def test_real_runs_ask_for_cuda_and_nccl_dry_runs_for_cpu(tmp_path: Path):
    real, dry = Env(False, tmp_path, 1), Env(True, tmp_path, 0)
    assert real.dev() == ["dist.device=cuda", "dist.backend=nccl"]
    assert dry.dev() == dry.dev("gloo", "auto") == ["dist.device=cpu", "dist.backend=gloo"]
    assert real.steps(100, 1) == "run.total_env_steps=100" and dry.steps(100, 1) == "run.total_env_steps=1"
    cmd = common.train_cmd(2, "configs/gridnav.yaml", tmp_path / "run", *real.dev())
    assert cmd[1:4] == ["-m", "torch.distributed.run", "--standalone"] and "--nproc-per-node=2" in cmd
    assert cmd[-2:] == ["dist.device=cuda", "dist.backend=nccl"] and f"run.dir={tmp_path / 'run'}" in cmd


def test_lost_peer_checks_need_two_gpus(tmp_path: Path):
    one_gpu = Env(False, tmp_path, 1)
    for sig in (signal.SIGKILL, signal.SIGSTOP):
        assert nccl_checks.peer_lost(one_gpu, sig).startswith("SKIP")


def test_verdicts_rest_on_exit_codes_and_ddppos_line_not_on_ncclss_log_text():
    line = ("ERROR ddppo.distributed: rank 0: gradient all-reduce failed: peer rank(s) [1] lost (they did not "
            "check in after the failure) ([Rank 0] Watchdog caught collective operation timeout: WorkNCCL(...))")
    assert common.LOST.search(line)
    common.no_abort(1, line, "rank 0")  # NCCL's "Watchdog caught" text of a blocking-wait timeout is fine
    with pytest.raises(CheckFailed, match="signal 6"):
        common.no_abort(-6, "", "rank 0")
    with pytest.raises(CheckFailed, match="aborted"):
        common.no_abort(1, "terminate called after throwing an instance of 'c10::DistBackendError'", "r")
    warning = ("WARNING ddppo.distributed: TORCH_NCCL_ASYNC_ERROR_HANDLING=1 set: a lost or hung peer ends this rank "
               "as NCCL's watchdog decides")
    assert common.NCCL_VAR_WARNING.search(warning)
    assert common.NCCL_VAR_WARNING.search("TORCH_NCCL_ASYNC_ERROR_HANDLING=3 (set in your environment) is "
                                                  "not used: ddppo sets TORCH_NCCL_BLOCKING_WAIT=1")
    assert not common.NCCL_VAR_WARNING.search("rank 0/1 (local 0) up via torchrun: backend=nccl device=cuda:0")


def test_a_skip_is_never_all_checks_passed():
    passed = [("a", "x", "PASS", "fps 1", 1.0)]
    assert run.summary(passed).startswith("all checks passed")
    skipped = passed + [("b", "y", "SKIP", "needs 2 GPUs", 0.0)]
    assert "all checks passed" not in run.summary(skipped) and "SKIP b" in run.summary(skipped)
    failed = skipped + [("c", "z", "FAIL", "exit 1", 2.0)]
    assert run.summary(failed).startswith("FAILED: c") and "1 SKIP" in run.summary(failed)
    lines = run.table(failed).splitlines()
    assert len(lines) == 5 and "SKIP" in lines[3] and "FAIL" in lines[4]


def test_a_check_whose_budget_does_not_fit_is_skipped_and_one_past_its_deadline_fails(tmp_path: Path):
    ran = []
    check = run.Check("slow", "x", 100, lambda e: ran.append(1) or "fine")
    row = run.run_check(Env(False, tmp_path, 1), check, run_left=50)
    assert row[2] == "SKIP" and "not started" in row[3] and ran == []

    def overrun(e: Env) -> str:
        e.deadline = 0.0  # as if the check's time were up
        e.left(10)
        return "unreachable"

    row = run.run_check(Env(False, tmp_path, 1), run.Check("late", "x", 1, overrun), run_left=50)
    assert row[2] == "FAIL" and "over its deadline" in row[3]


def test_the_dry_run_writes_the_json_beside_the_table(tmp_path: Path, monkeypatch, capsys):
    plan = [run.Check("ok", "a", 1, lambda e: "fine"), run.Check("skip", "b", 1, lambda e: "SKIP: why")]
    monkeypatch.setattr(run, "PLAN", plan)
    assert run.main(["--dry-run", "--work", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "planned ok 1 s, skip 1 s" in out and "all checks passed" not in out
    saved = json.loads((tmp_path / "gpu_check.json").read_text())
    assert [c["result"] for c in saved["checks"]] == ["PASS", "SKIP"] and saved["checks"][1]["detail"] == "why"
