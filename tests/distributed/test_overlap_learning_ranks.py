"""rollout.overlap_learning with real gloo ranks: the learner thread's all-reduces and the main thread's
collectives never mix, so ranks stay bit-identical (with a preempted straggler collecting while the learner
runs), stop together on SIGTERM with one checkpoint, and a killed peer ends the survivor with a named loss."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import pytest
from dist_harness import (checkpoints, digest, read_metrics, spawn_ranks, start_ranks, start_torchrun, synthetic,
                          train_and_digest)

OVERLAP = ["rollout.overlap_learning=true"]
AGREE = synthetic(num_envs=4, num_steps=16, **{
    "env.synthetic.step_sleep_s": 0.002, "env.synthetic.slow_ranks": "[1]", "env.synthetic.slow_factor": 20,
    "preemption.sync_frac": 0.5, "preemption.min_rollout_fraction": 0.25, "run.total_env_steps": 400,
    "checkpoint.interval_updates": 2, "dist.timeout_s": 60, "dist.backend": "gloo", "dist.device": "cpu",
}) + OVERLAP  # in-process envs: a spawned rank is daemonic, it cannot start env workers
LONG_RUN = synthetic(num_envs=4, num_steps=8, **{"env.synthetic.step_sleep_s": 0.01,
                                                 "run.total_env_steps": 10_000_000}) + OVERLAP


@pytest.mark.timeout(240)
def test_ranks_stay_identical_with_a_preempted_straggler(tmp_path: Path):
    from ddppo import checkpoint as ckpt

    r0, r1 = spawn_ranks(train_and_digest, 2, AGREE, str(tmp_path / "run"), timeout_s=200)
    assert r0["code"] == r1["code"] == 0
    assert (r0["update"], r0["env_steps"]) == (r1["update"], r1["env_steps"])
    assert r0["model"] == r1["model"] and r0["model"] != r0["initial"]
    assert r0["acting"] == r1["acting"] == r0["model"]  # refreshed after the last update on both ranks
    _, data = ckpt.newest_valid(tmp_path / "run")
    assert digest(data["model"]) == r0["model"]
    rows = read_metrics(tmp_path / "run")
    assert any(r["preempt/num_preempted"] >= 1 for r in rows), rows  # the collection that overlaps learning


@pytest.mark.timeout(180)
def test_sigterm_to_one_rank_stops_all_ranks_at_the_same_update_with_one_checkpoint(tmp_path: Path):
    from ddppo import checkpoint as ckpt

    with start_torchrun(2, tmp_path / "run", LONG_RUN + ["dist.timeout_s=60"], tmp_path) as job:
        job.wait_for_updates(2, timeout_s=120)
        os.kill(job.rank_pid(1), signal.SIGTERM)
        codes = job.wait(timeout_s=90)
        log = job.log_text()
    assert codes == [0], log
    rows = job.metrics()
    last = rows[-1]["update"]
    assert [r["update"] for r in rows] == list(range(1, last + 1))
    files = checkpoints(job.run_dir)
    assert [f.name for f in files] == [f"ckpt-{last}.pt"], log
    saved = ckpt.load(files[0])
    assert saved["counters"]["update"] == last and len(saved["rank_states"]) == 2
    assert re.search(rf"stopping at update {last} \(SIGTERM/SIGINT\); checkpoint saved", log), log


@pytest.mark.timeout(300)
def test_killed_rank_makes_the_survivor_exit_nonzero_within_the_timeout(tmp_path: Path):
    timeout_s = 20
    with start_ranks(2, tmp_path / "run", LONG_RUN + [f"dist.timeout_s={timeout_s}"], tmp_path) as job:
        job.wait_for_updates(2, timeout_s=120)
        job.procs[1].send_signal(signal.SIGKILL)
        start = time.monotonic()
        try:
            code = job.procs[0].wait(timeout=6 * timeout_s)  # only catches a hang: the log says what ended it
        except Exception:  # subprocess.TimeoutExpired: a hang
            code = None
        log = job.log_text()
    assert code is not None, f"survivor still running {time.monotonic() - start:.0f} s after the kill\n{log}"
    assert code == 1, log
    assert "PeerLostError" in log or "peer rank(s) [1] lost" in log, log
