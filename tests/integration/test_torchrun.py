"""The real CLI under torchrun: `torchrun --standalone --nproc_per_node=2 -m ddppo train configs/gridnav.yaml`.

A tiny budget (overrides) finishes and writes metrics.jsonl with consecutive
updates, TensorBoard events and checkpoints; rerunning with a larger budget
resumes from the newest checkpoint and continues the counters.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import testutil
from testutil import as_overrides

REPO = Path(__file__).resolve().parents[2]
PER_UPDATE = 2 * 4 * 8  # ranks x env.num_envs x rollout.num_steps
TINY = as_overrides({**testutil.TINY, "rollout.num_steps": 8, "checkpoint.interval_updates": 2, "log.interval_s": 1,
                     "dist.timeout_s": 60})


def torchrun(run_dir: Path, total_env_steps: int, timeout_s: float = 240) -> str:
    script = Path(sys.executable).parent / "torchrun"
    head = [str(script)] if script.exists() else [sys.executable, "-m", "torch.distributed.run"]
    cmd = [*head, "--standalone", "--nproc_per_node=2", "-m", "ddppo", "train", "configs/gridnav.yaml",
           f"run.dir={run_dir}", f"run.total_env_steps={total_env_steps}", *TINY]
    env = testutil.cli_env(no_slurm=True)
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # torchrun and its workers: the group this test started
        out, _ = proc.communicate()
        pytest.fail(f"torchrun did not finish within {timeout_s:.0f} s\n{out[-6000:]}")
    assert proc.returncode == 0, out[-6000:]
    return out


def metrics(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def tensorboard_scalars(run_dir: Path) -> dict[str, list[int]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run_dir / "tb"), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [e.step for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_torchrun_two_ranks_gridnav_finishes_then_resumes(tmp_path: Path):
    run_dir = tmp_path / "run"
    out = torchrun(run_dir, total_env_steps=4 * PER_UPDATE)
    assert re.search(r"training gridnav on 2 rank\(s\) x 4 envs, from update 0", out), out[-4000:]
    rows = metrics(run_dir)
    assert [r["update"] for r in rows] == [1, 2, 3, 4]
    assert [r["env_steps"] for r in rows] == [PER_UPDATE * u for u in (1, 2, 3, 4)]
    assert all(r["preempt/steps_fraction_min"] == 1.0 for r in rows)  # 2 ranks, sync_frac 0.6: no preemption
    assert sorted(p.name for p in (run_dir / "checkpoints").glob("ckpt-*.pt")) == ["ckpt-2.pt", "ckpt-4.pt"]
    assert (run_dir / "config.yaml").is_file()
    assert list((run_dir / "tb").glob("events.out.tfevents.*")), "no TensorBoard events"
    scalars = tensorboard_scalars(run_dir)
    for tag in ("perf/fps", "loss/total", "loss/grad_norm", "preempt/num_preempted", "train/reward"):
        if tag == "train/reward" and tag not in scalars:
            continue  # no gridnav episode may have ended in 32 steps
        assert scalars.get(tag) == [PER_UPDATE * u for u in (1, 2, 3, 4)], (tag, sorted(scalars))

    out = torchrun(run_dir, total_env_steps=8 * PER_UPDATE)
    assert re.search(r"resumed from \S+ckpt-4\.pt at update 4 \(256 env steps\)", out), out[-4000:]
    rows = metrics(run_dir)
    assert [r["update"] for r in rows] == list(range(1, 9)), "counters continue; no update logged twice"
    assert [r["env_steps"] for r in rows] == [PER_UPDATE * u for u in range(1, 9)]
    assert "ckpt-8.pt" in {p.name for p in (run_dir / "checkpoints").glob("ckpt-*.pt")}
    assert tensorboard_scalars(run_dir)["perf/fps"] == [PER_UPDATE * u for u in range(1, 9)]
