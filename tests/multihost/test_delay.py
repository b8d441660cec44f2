"""Training continues over a slow network: 2 hosts x 1 rank talking over a delay line (50 ms each way, so
100 ms round trips; MASTER_ADDR is host 0's delay-line address, so the automatic interface choice must pick
slow0 over lan0). The all-reduce share and what preemption does at 20-100 ms come from
tests/multihost/delay_figures.py (printed figures, no timed asserts)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mh_util import by_hand, train_argv


@pytest.mark.timeout(240)
def test_training_continues_with_100ms_round_trips(network, tmp_path: Path):
    from ddppo.rundir import RunDir

    net = network(2)
    line = net.delay_line()
    line.delay_ms = 50
    run = tmp_path / "run"
    argv = train_argv(run, **{"run.total_env_steps": 3 * 2 * 128, "dist.timeout_s": 30,
                              "preemption.enabled": "true"})
    job = by_hand(net, [0, 1], argv, 29600, tmp_path / "logs", master=line.addrs[0],
                  extra={"LOCAL_WORLD_SIZE": "1"})
    assert job.wait(200) == [0, 0], job.describe()
    assert [m["update"] for m in RunDir(run).metrics()] == [1, 2, 3]
    assert "socket interface slow0" in job.output(0), job.describe()
