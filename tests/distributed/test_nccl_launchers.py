"""NCCL's lost-peer handling is the same however the ranks are started: the environment each rank hands to
NCCL (nccl_env_probe.py: two ranks, each on a pretended GPU of its own, record it where the NCCL group is made)
under real `torchrun` (whose agent injects TORCH_NCCL_ASYNC_ERROR_HANDLING=1 into every worker) and by hand;
the srun side is tests/slurm/test_nccl_env_srun.py. A warning names only what the user set."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from dist_harness import PY, REPO, free_port, subprocess_env, torchrun_cmd

PROBE = REPO / "tests" / "distributed" / "nccl_env_probe.py"
NCCL_WARNING = ("TORCH_NCCL", "NCCL_BLOCKING", "NCCL_ASYNC")


def _results(out: Path, log: str) -> list[dict]:
    files = sorted(out.glob("rank*.json"))
    assert len(files) == 2, log[-4000:]
    return [json.loads(f.read_text()) for f in files]


def probe_torchrun(tmp_path: Path, **user_env: str) -> tuple[list[dict], str]:
    out = tmp_path / "out"
    out.mkdir()
    proc = subprocess.run(torchrun_cmd(2) + [str(PROBE), str(out)], cwd=REPO, env=subprocess_env(**user_env),
                          capture_output=True, text=True, timeout=240)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-4000:]
    return _results(out, log), log


def probe_by_hand(tmp_path: Path, **user_env: str) -> tuple[list[dict], str]:
    out, port = tmp_path / "out", free_port()
    out.mkdir()
    procs = [subprocess.Popen([PY, str(PROBE), str(out)], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, env=subprocess_env(RANK=str(r), WORLD_SIZE="2", LOCAL_RANK=str(r),
                                                            LOCAL_WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                                                            MASTER_PORT=str(port), **user_env))
             for r in range(2)]
    logs = []
    try:
        for p in procs:
            logs.append(p.communicate(timeout=240)[0])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    log = "\n".join(logs)
    assert [p.returncode for p in procs] == [0, 0], log[-4000:]
    return _results(out, log), log


def _nccl_warnings(result: dict) -> list[str]:
    return [w for w in result["warnings"] if any(k in w for k in NCCL_WARNING)]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("probe", [probe_torchrun, probe_by_hand], ids=["torchrun", "by-hand"])
def test_every_rank_hands_nccl_blocking_wait_and_no_warning(tmp_path, probe):
    results, log = probe(tmp_path)
    for r in results:
        assert r["backend"] == "nccl", r
        assert r["env"]["TORCH_NCCL_BLOCKING_WAIT"] == "1" and r["env"]["TORCH_NCCL_DUMP_ON_TIMEOUT"] == "0", r
        assert _nccl_warnings(r) == [], r  # nothing the user set: nothing to warn about
    # the launcher really is what the test says: torchrun's agent injects its variable, a start by hand does not
    injected = {r["launcher_env"]["TORCH_NCCL_ASYNC_ERROR_HANDLING"] for r in results}
    assert injected == ({"1"} if probe is probe_torchrun else {None}), results


@pytest.mark.timeout(300)
def test_a_users_own_blocking_wait_choice_under_torchrun_is_kept_and_named(tmp_path):
    results, _ = probe_torchrun(tmp_path, TORCH_NCCL_BLOCKING_WAIT="0")
    for r in results:
        assert r["env"]["TORCH_NCCL_BLOCKING_WAIT"] == "0" and r["env"]["TORCH_NCCL_DUMP_ON_TIMEOUT"] is None, r
        assert len(_nccl_warnings(r)) == 1 and "TORCH_NCCL_BLOCKING_WAIT=0 set" in _nccl_warnings(r)[0], r


@pytest.mark.timeout(300)
def test_a_users_own_async_error_handling_under_torchrun_is_named_as_unused(tmp_path):
    """torchrun passes a value the user exported through unchanged (3 here): that one is the user's."""
    results, _ = probe_torchrun(tmp_path, TORCH_NCCL_ASYNC_ERROR_HANDLING="3")
    for r in results:
        assert r["env"]["TORCH_NCCL_BLOCKING_WAIT"] == "1" and r["env"]["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "3", r
        warnings = _nccl_warnings(r)
        assert len(warnings) == 1 and "TORCH_NCCL_ASYNC_ERROR_HANDLING=3 (set in your environment)" in warnings[0]
