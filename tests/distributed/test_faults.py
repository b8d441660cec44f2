"""Agreed stop and no hangs, with real `ddppo train` processes.

- SIGTERM to one rank (torchrun, 2 ranks): every rank stops at the same update,
  one checkpoint is written, everything exits 0.
- SIGKILL of one rank (rank 1, or rank 0 which hosts the store): the survivor
  exits non-zero within dist.timeout_s, saying a peer rank was lost.
- SIGSTOP of rank 0 (alive but hung, with the store): the survivor still exits
  non-zero within the timeout (collective timeout + bounded store probe).
- A store whose host hangs makes store calls fail within the timeout.
- `torchrun --max-restarts 1`: a rank killed once, the job comes back from the
  newest checkpoint and finishes with consecutive metrics.
"""

from __future__ import annotations

import datetime
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
from dist_harness import (
    PY,
    checkpoints,
    free_port,
    start_ranks,
    start_torchrun,
    subprocess_env,
    synthetic,
)
from testutil import stop_process

# updates of ~0.1-0.2 s, so a signal lands mid-run; a budget far beyond what the tests wait for
LONG_RUN = synthetic(num_envs=4, num_steps=8, **{"env.synthetic.step_sleep_s": 0.01,
                                                 "run.total_env_steps": 10_000_000})


@pytest.mark.timeout(180)
def test_sigterm_to_one_rank_stops_all_ranks_at_the_same_update_with_one_checkpoint(tmp_path: Path):
    from ddppo import checkpoint as ckpt

    with start_torchrun(2, tmp_path / "run", LONG_RUN + ["dist.timeout_s=60"], tmp_path) as job:
        job.wait_for_updates(1, timeout_s=120)
        victim = job.rank_pid(1)
        job.wait_for_updates(2, timeout_s=60)
        os.kill(victim, signal.SIGTERM)
        codes = job.wait(timeout_s=90)
        log = job.log_text()
    assert codes == [0], log  # torchrun exits 0 only when every rank did
    rows = job.metrics()
    last = rows[-1]["update"]
    assert [r["update"] for r in rows] == list(range(1, last + 1))
    files = checkpoints(job.run_dir)
    assert [f.name for f in files] == [f"ckpt-{last}.pt"], "exactly one checkpoint, at the stop update"
    saved = ckpt.load(files[0])
    assert saved["counters"]["update"] == last and saved["counters"]["env_steps"] == rows[-1]["env_steps"]
    assert len(saved["rank_states"]) == 2  # both ranks took part in the save
    assert re.search(rf"stopping at update {last} \(SIGTERM/SIGINT\); checkpoint saved", log), log


def _wait_exit(proc: subprocess.Popen, timeout_s: float) -> tuple[int | None, float]:
    start = time.monotonic()
    try:
        return proc.wait(timeout=timeout_s), time.monotonic() - start
    except subprocess.TimeoutExpired:
        return None, time.monotonic() - start


@pytest.mark.timeout(300)
@pytest.mark.parametrize("victim", [1, 0], ids=["rank1", "rank0-store-host"])
def test_killed_rank_makes_the_survivor_exit_nonzero_within_the_timeout(tmp_path: Path, victim: int):
    timeout_s = 20
    with start_ranks(2, tmp_path / "run", LONG_RUN + [f"dist.timeout_s={timeout_s}"], tmp_path) as job:
        job.wait_for_updates(2, timeout_s=120)  # past the first update: the training timeout applies
        survivor = job.procs[1 - victim]
        job.procs[victim].send_signal(signal.SIGKILL)
        # detection (a closed connection, or at worst the collective timeout) + the survivors' check-in probe;
        # the wait (6 x dist.timeout_s) only catches a hang: the log says what ended the survivor
        code, took = _wait_exit(survivor, 6 * timeout_s)
        log = job.log_text()
    assert code is not None, f"survivor still running {took:.0f} s after the kill (a hang)\n{log}"
    assert code != 0, log
    assert re.search(r"peer rank.* lost|peer rank was lost", log), log
    if victim == 1:
        assert "peer rank(s) [1] lost" in log, log  # names the rank that died


@pytest.mark.timeout(300)
def test_hung_store_host_makes_the_survivor_exit_nonzero_within_the_timeout(tmp_path: Path):
    """Rank 0 stopped (not dead): its sockets stay open, so only timeouts can free rank 1."""
    timeout_s = 10
    with start_ranks(2, tmp_path / "run", LONG_RUN + [f"dist.timeout_s={timeout_s}"], tmp_path) as job:
        job.wait_for_updates(2, timeout_s=120)
        stop_process(job.procs[0].pid)
        # collective timeout + the store probe's own bound (10 s + 5 s); the wait (6 x dist.timeout_s) only
        # catches a hang: the log says what ended rank 1
        code, took = _wait_exit(job.procs[1], 6 * timeout_s)
        log = job.log_text()
    assert code is not None, f"rank 1 still running {took:.0f} s after rank 0 hung\n{log}"
    assert code != 0 and "peer rank was lost" in log, log


def test_store_calls_fail_within_the_timeout_when_the_store_host_hangs(tmp_path: Path):
    """The preemption counter must not block a rank forever on a stopped store host. The client's own timeout
    is 600 s, so an error that names dist.timeout_s=2 within the test is the context's bound; the 60 s bounds
    only catch a hang (30 x dist.timeout_s, a tenth of the client's timeout)."""
    import torch
    import torch.distributed as dist

    from ddppo.distributed import DistContext, Launch, PeerLostError

    port = free_port()
    host = subprocess.Popen([PY, "-c", "import datetime, sys, time, torch.distributed as d; "
                             f"s = d.TCPStore('127.0.0.1', {port}, 2, True, wait_for_workers=False); "
                             "print('up', flush=True); time.sleep(300)"],
                            env=subprocess_env(), stdout=subprocess.PIPE, text=True)
    try:
        assert host.stdout.readline().strip() == "up"
        client = dist.TCPStore("127.0.0.1", port, 2, False, timeout=datetime.timedelta(seconds=600),
                               wait_for_workers=False)
        ctx = DistContext(Launch(1, 2, 1, 2, "127.0.0.1", port, "torchrun"), torch.device("cpu"), "gloo",
                          dist.PrefixStore("ddppo/0/", client), run_seed=0, timeout_s=2)
        assert ctx.add_to_counter("preempt/done/1", 1) == 1
        stop_process(host.pid)
        start = time.monotonic()
        with pytest.raises(PeerLostError, match="did not answer within dist.timeout_s=2"):
            ctx.add_to_counter("preempt/done/1", 0)
        assert time.monotonic() - start < 60
        start = time.monotonic()
        assert "store is unreachable" in ctx._lost_ranks()
        assert time.monotonic() - start < 60
    finally:
        host.send_signal(signal.SIGCONT)
        host.kill()
        host.wait(timeout=10)


@pytest.mark.timeout(300)
def test_torchrun_max_restarts_resumes_from_the_newest_checkpoint_after_a_killed_rank(tmp_path: Path):
    per_update = 2 * 4 * 8
    total_updates = 30  # ~0.3 s each: the kill lands long before the end
    overrides = synthetic(num_envs=4, num_steps=8, **{
        "env.synthetic.step_sleep_s": 0.03, "run.total_env_steps": total_updates * per_update,
        "checkpoint.interval_updates": 2, "dist.timeout_s": 20})
    with start_torchrun(2, tmp_path / "run", overrides, tmp_path, torchrun_args=["--max-restarts", "1"]) as job:
        job.wait_for_updates(1, timeout_s=120)
        victim = job.rank_pid(1)
        deadline = time.monotonic() + 60
        while not checkpoints(job.run_dir) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert checkpoints(job.run_dir), job.log_text()
        os.kill(victim, signal.SIGKILL)  # once: the restarted attempt's rank 1 is another process
        killed_after = job.metrics()[-1]["update"]
        codes = job.wait(timeout_s=200)
        log = job.log_text()
    assert killed_after < total_updates, "the run finished before the kill; make it longer"
    assert codes == [0], log
    resumed = re.findall(r"resumed from \S+ckpt-(\d+)\.pt at update (\d+)", log)
    assert resumed, f"the restarted attempt did not resume from a checkpoint\n{log}"
    assert int(resumed[-1][1]) >= 2 and int(resumed[-1][1]) % 2 == 0
    rows = job.metrics()
    assert [r["update"] for r in rows] == list(range(1, total_updates + 1)), "metrics hold every update once"
    assert [r["env_steps"] for r in rows] == [per_update * u for u in range(1, total_updates + 1)]
    assert checkpoints(job.run_dir)[-1].name == f"ckpt-{total_updates}.pt"
