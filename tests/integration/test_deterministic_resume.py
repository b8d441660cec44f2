"""Deterministic resume: N updates in one go == stop (SIGTERM) part-way + resume, bit for bit.

Parameters, optimiser state and every non-timing metric of every update must be
identical. This needs the RNG states (torch, numpy, python), the environments'
episode state, the observation and recurrent state carried between rollouts,
and the windowed episode statistics: all of them are in the checkpoint.
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
import torch

REPO = Path(__file__).resolve().parents[2]
UPDATES = 40
ARGS = ["env.num_envs=8", "rollout.num_steps=16", "ppo.num_mini_batch=2", "ppo.epochs=2",
        f"run.total_env_steps={UPDATES * 8 * 16}", "env.gridnav.num_maps=8", "log.tensorboard=false",
        "checkpoint.interval_updates=1000", "run.seed=7"]


# gridnav's camera through the CNN, and the memory task, whose per-env step counter decides what is observed; an LSTM
# core (the scan case's is gridnav's GRU), whose memory holds h and c
CAMERA_MEMORY = ["env.gridnav.camera=depth", "env.gridnav.camera_size=[8,16]", "env.gridnav.goal_visible_steps=3",
                 "policy.rnn_type=lstm"]


def _cmd(run: Path, extra: list[str] = ()) -> list[str]:
    return [sys.executable, "-m", "ddppo", "train", str(REPO / "configs" / "gridnav.yaml"), f"run.dir={run}", *ARGS,
            *extra]


def _metrics(run: Path) -> list[dict]:
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    timing = ("perf/", "preempt/straggler_wait", "fps", "wall_time")  # wall-clock figures differ by nature
    return [{k: v for k, v in r.items() if not k.startswith(timing)} for r in rows]


def _final(run: Path) -> dict:
    return torch.load(sorted((run / "checkpoints").glob("ckpt-*.pt"))[-1], weights_only=True)


@pytest.mark.parametrize("extra", [[], CAMERA_MEMORY], ids=["scan-gru", "camera-memory-lstm"])
def test_stop_and_resume_is_bit_identical(tmp_path, extra):
    straight = tmp_path / "straight"
    subprocess.run(_cmd(straight, extra), cwd=REPO, check=True, capture_output=True, timeout=300)

    split = tmp_path / "split"
    proc = subprocess.Popen(_cmd(split, extra), cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    metrics = split / "metrics.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # stop it once a few updates are done
        if metrics.exists() and len(metrics.read_text().splitlines()) >= 3:
            break
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err[-2000:]
    stopped_at = len(metrics.read_text().splitlines())
    assert 3 <= stopped_at < UPDATES, f"the SIGTERM came too late to test a resume (update {stopped_at})"
    assert "stopping at update" in err
    res = subprocess.run(_cmd(split, extra), cwd=REPO, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "resumed from" in res.stderr

    a, b = _metrics(straight), _metrics(split)
    assert [r["update"] for r in b] == list(range(1, UPDATES + 1))
    assert a == b  # every loss/*, train/*, preempt/* value of every update
    ca, cb = _final(straight), _final(split)
    assert ca["counters"]["update"] == cb["counters"]["update"] == UPDATES
    for key, value in ca["model"].items():
        assert torch.equal(value, cb["model"][key]), key
    for pid, state in ca["optimizer"]["state"].items():
        for name, value in state.items():
            assert torch.equal(torch.as_tensor(value), torch.as_tensor(cb["optimizer"]["state"][pid][name])), name
    # the RNG states too (python's random is seeded like torch's and numpy's, not left to OS entropy)
    assert ca["rank_states"][0]["rng"]["python"] == cb["rank_states"][0]["rng"]["python"]
