"""The run-directory claim on shared file systems, with real processes on real mounts (issue 43).

Where: FUSE mounts of one backing folder (fuse_helpers.py; this kernel has no NFS): `nolock` (flock fails with
ENOSYS, as on Lustre without flock) and `local` (each mount locks alone: two mounts are two nodes of NFS
local_lock=flock / nolock or Lustre localflock). Other hosts are UTS namespaces with their own host name.
Holders are claim_proc.py (RunDir.claim_writer, as `ddppo train`), or the real `ddppo train`; freeing is the real
`ddppo rundir release`.

Cases:
  no flock            one holder at a time through the holder record alone; the second refused, then free again
  live writer's temp  a second `ddppo train` is refused and the first one's checkpoint temp file survives it; once
                      the first is killed, a restart removes that temp file (its kind only)
  stale holders       each kind taken over with one warning: a dead pid on this host (and a pid now used by
                      another process), this SLURM job's own earlier run (on another host), a job SLURM no longer
                      runs, a holder silent past its bound (which then finds itself taken over); and refused where
                      the rule does not apply (the job still runs, squeue cannot tell, a long checkpoint interval)
  another host        a live holder on another node of a per-node-locking mount is refused (its flock does not
                      reach this node), then freed with `ddppo rundir release`; a live holder on this host is not
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fuse_helpers import can_unshare, fuse_mount, on_host, require_fuse
from rel_util import REPO
from test_rundir_lifecycle import cli, holds, refused, running, slow_train_args, wait_until
from testutil import cli_env

HERE = Path(__file__).resolve().parent
CLAIM = [sys.executable, str(HERE / "claim_proc.py")]


# ------------------------------------------------------------------------------ processes
def holder(run_dir: Path, stale_s: float = 3600, host: str | None = None, **env: str) -> subprocess.Popen:
    """A claim_proc.py holding `run_dir` (on `host`: another UTS namespace), once it says so."""
    argv = [*CLAIM, str(run_dir), str(stale_s)]
    proc = subprocess.Popen(on_host(host, argv) if host else argv, cwd=REPO, env=cli_env(no_slurm=True, **env),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    line = proc.stdout.readline()
    if line.strip() != "claimed":
        proc.kill()
        raise AssertionError(f"the holder did not claim {run_dir}: {line!r}\n{proc.stderr.read()[-3000:]}")
    return proc


def tell(proc: subprocess.Popen, command: str) -> tuple[int, str, str]:
    """Send `command` to a holder and let it end (`release`), or read its answer and end it."""
    out, err = proc.communicate(f"{command}\n", timeout=60)
    return proc.returncode, out, err


def attempt(run_dir: Path, stale_s: float = 3600, path: str | None = None, **env: str) -> tuple[int, str, str]:
    """One claim of `run_dir` by a new process, released at once when it succeeds: (rc, stdout, stderr)."""
    extra = dict(env, PATH=path) if path is not None else env
    res = subprocess.run([*CLAIM, str(run_dir), str(stale_s)], cwd=REPO, env=cli_env(no_slurm=True, **extra),
                         input="release\n", capture_output=True, text=True, timeout=120)
    return res.returncode, res.stdout, res.stderr


def kill(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)


def took_over(res: tuple[int, str, str], *names: str) -> str:
    """Claimed with exactly one takeover warning naming `names`; that line."""
    rc, out, err = res
    lines = [line for line in err.splitlines() if "taking it over" in line]
    assert rc == 0 and out.startswith("claimed") and len(lines) == 1, f"rc={rc}\n{err[-3000:]}"
    assert all(n in lines[0] for n in names), f"{names} not all in: {lines[0]}"
    return lines[0]


def record(run_dir: Path) -> dict:
    return json.loads((run_dir / ".holder.json").read_text())


# ------------------------------------------------------------------------------ mounts
@pytest.fixture(scope="module")
def nolock(tmp_path_factory) -> Path:
    """A FUSE mount whose flock fails with ENOSYS."""
    require_fuse()
    root = tmp_path_factory.mktemp("nolock")
    (root / "backing").mkdir()
    with fuse_mount(root / "backing", root, "nolock") as point:
        yield point


@pytest.fixture
def run_dir(nolock, request) -> Path:
    return nolock / request.node.name.replace("[", "-").replace("]", "")


@pytest.fixture
def two_nodes(tmp_path) -> tuple[Path, Path]:
    """Two mounts of one folder that lock per mount: node A's and node B's view of one shared directory."""
    require_fuse()
    if not can_unshare():
        pytest.skip("no UTS namespaces (unshare --uts) for a second host")
    (tmp_path / "backing").mkdir()
    with fuse_mount(tmp_path / "backing", tmp_path, "local") as a, fuse_mount(tmp_path / "backing", tmp_path,
                                                                              "local") as b:
        yield a, b


# ------------------------------------------------------------------------------ no flock
def test_without_flock_the_holder_record_keeps_one_holder(run_dir):
    first = holder(run_dir)
    refused(attempt(run_dir), str(run_dir), f"pid {first.pid}", "ddppo train", "ddppo rundir release")
    assert record(run_dir)["pid"] == first.pid  # the refused claim changed nothing
    rc, _, err = tell(first, "release")
    assert rc == 0 and "has no flock" in err and not (run_dir / ".holder.json").exists(), err[-3000:]
    rc, out, err = attempt(run_dir)
    assert rc == 0 and out.startswith("claimed") and "taking it over" not in err, err[-3000:]


def test_a_live_writers_temporary_checkpoint_survives_a_second_train(run_dir):
    with running(*slow_train_args(run_dir)) as trainer:
        wait_until("the first train checkpoints", lambda: holds(run_dir, trainer) and
                   any((run_dir / "checkpoints").glob("ckpt-*.pt")), trainer)
        assert record(run_dir)["heartbeat_interval_s"] is not None  # its checkpoint refreshed the heartbeat
        writing = run_dir / "checkpoints" / f".ckpt-999.pt.{trainer.pid}.tmp"  # its checkpoint being written
        writing.write_bytes(b"half a checkpoint")
        refused(cli(*slow_train_args(run_dir)), str(run_dir), f"pid {trainer.pid}", "ddppo rundir release")
        assert writing.read_bytes() == b"half a checkpoint"
        os.killpg(trainer.pid, signal.SIGKILL)
        trainer.communicate(timeout=60)
    other = run_dir / "checkpoints" / ".notes.tmp"  # not a checkpoint's: not ddppo's to remove
    other.write_text("mine")
    took_over(attempt(run_dir), f"pid {trainer.pid}", "is gone")
    assert not writing.exists() and other.read_text() == "mine"


# ------------------------------------------------------------------------------ stale holders
def fake_squeue(tmp_path: Path, output: str | None) -> str:
    """A PATH whose `squeue` prints `output` for any job (None: no squeue on PATH at all)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    if output is not None:
        (bin_dir / "squeue").write_text(f"#!/bin/sh\nprintf '{output}'\n")
        (bin_dir / "squeue").chmod(0o755)
    return f"{bin_dir}:{os.path.dirname(sys.executable)}:/usr/bin:/bin"


def test_stale_holder_a_dead_process_on_this_host(run_dir):
    first = holder(run_dir)
    kill(first)
    took_over(attempt(run_dir), f"pid {first.pid}", "is gone")


def test_stale_holder_a_pid_now_used_by_another_process(run_dir):
    first = holder(run_dir)
    kill(first)
    sleeper = subprocess.Popen(["sleep", "300"])
    try:  # its pid now names a live process of this host, one that started at another time
        (run_dir / ".holder.json").write_text(json.dumps({**record(run_dir), "pid": sleeper.pid}))
        took_over(attempt(run_dir), f"pid {sleeper.pid}", "is gone")
    finally:
        sleeper.kill()
        sleeper.wait()


def test_stale_holder_this_slurm_jobs_own_earlier_run_on_another_host(run_dir):
    if not can_unshare():
        pytest.skip("no UTS namespaces (unshare --uts) for a second host")
    first = holder(run_dir, host="gpu017", SLURM_JOB_ID="4242", SLURM_RESTART_COUNT="0")
    kill(first)  # its node lost: on NFS or Lustre its record (and lock) stay
    assert record(run_dir)["host"] == "gpu017" and record(run_dir)["slurm"]["job_id"] == "4242"
    refused(attempt(run_dir, SLURM_JOB_ID="5000"), "gpu017", "SLURM job 4242", "ddppo rundir release")
    took_over(attempt(run_dir, SLURM_JOB_ID="4242", SLURM_RESTART_COUNT="1"), "gpu017",
              "this SLURM job's own earlier run")


@pytest.mark.parametrize("squeue, taken", [("", True), ("COMPLETED\\n", True), ("RUNNING\\n", False),
                                           (None, False)], ids=["gone", "completed", "running", "no-squeue"])
def test_stale_holder_a_job_slurm_no_longer_runs(run_dir, tmp_path, squeue, taken):
    if not can_unshare():
        pytest.skip("no UTS namespaces (unshare --uts) for a second host")
    kill(holder(run_dir, host="gpu017", SLURM_JOB_ID="555"))
    res = attempt(run_dir, path=fake_squeue(tmp_path, squeue), SLURM_JOB_ID="777")
    if taken:
        took_over(res, "gpu017", "SLURM no longer runs its job 555")
    else:  # still running, or squeue cannot tell: not stale
        refused(res, "gpu017", "SLURM job 555", "ddppo rundir release")


def test_stale_holder_silent_past_its_bound_then_finds_itself_taken_over(run_dir):
    if not can_unshare():
        pytest.skip("no UTS namespaces (unshare --uts) for a second host")
    first = holder(run_dir, stale_s=1, host="gpu017")  # hung, say: alive, but no checkpoint for long
    assert tell_line(first, "heartbeat") == "ok"
    rec = record(run_dir)
    rec["heartbeat_interval_s"] = 100.0  # it checkpoints every 100 s: silent for 2 s is not stale
    (run_dir / ".holder.json").write_text(json.dumps(rec))
    refused(attempt(run_dir), "gpu017", f"pid {first.pid}", "ddppo rundir release")
    rec["heartbeat_interval_s"] = 0.1
    (run_dir / ".holder.json").write_text(json.dumps(rec))
    time.sleep(1.5)  # past max(1 s, 3 x 0.1 s) without a heartbeat
    took_over(attempt(run_dir), "gpu017", "no heartbeat for", "checkpoint.stale_claim_s")
    line = tell_line(first, "heartbeat")
    assert line.startswith("lost:") and "no longer this run's" in line, line
    first.wait(timeout=60)


def tell_line(proc: subprocess.Popen, command: str) -> str:
    proc.stdin.write(f"{command}\n")
    proc.stdin.flush()
    return proc.stdout.readline().strip()


# ------------------------------------------------------------------------------ a holder on another host
def test_a_live_holder_on_another_node_is_refused_until_released(two_nodes):
    node_a, node_b = two_nodes
    first = holder(node_a / "run", host="gpu017")
    try:
        res = attempt(node_b / "run")  # its flock is free on this node: the record refuses it
        refused(res, f"{node_b / 'run'}", "gpu017", f"pid {first.pid}", f"ddppo rundir release {node_b / 'run'}")
        freed = subprocess.run([sys.executable, "-m", "ddppo", "rundir", "release", str(node_b / "run")], cwd=REPO,
                               env=cli_env(no_slurm=True), capture_output=True, text=True, timeout=120)
        assert freed.returncode == 0 and "released" in freed.stdout and "gpu017" in freed.stdout, freed.stderr
        rc, out, err = attempt(node_b / "run")
        assert rc == 0 and out.startswith("claimed"), err[-3000:]
        line = tell_line(first, "heartbeat")  # its next checkpoint: the directory is no longer its own
        assert line.startswith("lost:"), line
    finally:
        if first.poll() is None:
            kill(first)


def test_release_refuses_a_live_holder_on_this_host(tmp_path):
    first = holder(tmp_path / "run")
    try:
        res = subprocess.run([sys.executable, "-m", "ddppo", "rundir", "release", str(tmp_path / "run")],
                             cwd=REPO, env=cli_env(no_slurm=True), capture_output=True, text=True, timeout=120)
        refused((res.returncode, res.stdout, res.stderr), f"pid {first.pid}", "live process on this host")
        assert record(tmp_path / "run")["pid"] == first.pid
    finally:
        kill(first)
