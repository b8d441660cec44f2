"""Two torchrun agents (`--nnodes=2`, one rank each, a c10d rendezvous on 127.0.0.1) with `--max-restarts`:
one rank is killed mid-run; both agents restart their workers, the restarted round rendezvouses on its first
try and resumes from the newest checkpoint, and the run finishes.

The node whose worker died counts a restart (TORCHELASTIC_RESTART_COUNT=1), the other restarts its worker as
a membership change and does not (still 0), so the attempt cannot come from that count: before the ranks
agreed on a generation in the store, rank 0 and rank 1 rendezvoused under different prefixes and the round
failed (reported as "a peer advertised the loopback address").
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

import testutil
from testutil import as_overrides

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "distributed"))
import dist_harness  # noqa: E402

OVERRIDES = as_overrides({**testutil.TINY, "rollout.num_steps": 8, "checkpoint.interval_updates": 1,
                          "log.interval_s": 1, "dist.timeout_s": 30, "run.total_env_steps": 2 * 4 * 8 * 60})


def start_agent(node: int, port: int, run_dir: Path, log: Path) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes=2", "--nproc-per-node=1", "--rdzv-backend=c10d",
           f"--rdzv-endpoint=127.0.0.1:{port}", "--rdzv-id=restart-test", "--max-restarts=2", "--monitor-interval=0.5",
           "-m", "ddppo", "train", "configs/gridnav.yaml", f"run.dir={run_dir}", *OVERRIDES]
    with open(log, "wb") as out:
        return subprocess.Popen(cmd, cwd=REPO, env=dist_harness.subprocess_env(), stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)


def worker_of_rank(agents: list[subprocess.Popen], rank: int) -> psutil.Process | None:
    for agent in agents:
        for child in psutil.Process(agent.pid).children(recursive=True):
            try:
                if "ddppo" in child.cmdline() and child.environ().get("RANK") == str(rank):
                    return child
            except psutil.Error:
                continue
    return None


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_a_killed_rank_restarts_both_agents_into_one_round_that_resumes(tmp_path: Path):
    run_dir, port = tmp_path / "run", dist_harness.free_port()
    logs = [tmp_path / f"agent{n}.log" for n in range(2)]
    agents = [start_agent(n, port, run_dir, logs[n]) for n in range(2)]
    try:
        deadline = time.monotonic() + 150
        while len(dist_harness.checkpoints(run_dir)) < 3 and time.monotonic() < deadline:
            assert all(a.poll() is None for a in agents), "\n".join(p.read_text()[-3000:] for p in logs)
            time.sleep(0.2)
        victim = worker_of_rank(agents, 1)
        assert victim is not None, "no worker with RANK=1"
        victim.kill()
        victim.wait(30)
        newest = int(dist_harness.checkpoints(run_dir)[-1].stem.split("-")[1])  # no update completes without rank 1
        for agent in agents:
            agent.wait(timeout=240)
    finally:
        for agent in agents:
            if agent.poll() is None:
                os.killpg(agent.pid, signal.SIGKILL)
                agent.wait()
    text = "\n".join(f"--- agent {n}\n{p.read_text(errors='replace')}" for n, p in enumerate(logs))
    assert [a.returncode for a in agents] == [0, 0], text[-8000:]
    # two rounds, each up on its first try: rank 0 came up twice, nobody waited for a peer or failed to join
    assert len(re.findall(r"rank 0/2 \(local 0\) up via torchrun", text)) == 2, text[-8000:]
    assert not re.search(r"waiting for rank|rendezvous at .* failed|ddppo: ", text), text[-8000:]
    resumed = re.findall(r"resumed from \S*ckpt-(\d+)\.pt at update (\d+)", text)
    assert resumed == [(str(newest), str(newest))], text[-8000:]
    rows = dist_harness.read_metrics(run_dir)
    assert [r["update"] for r in rows] == list(range(1, 61)), text[-8000:]
