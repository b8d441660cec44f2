"""Training continues over a slow, lossy network: 2 hosts x 1 rank, 50 ms each way (100 ms round trips) and 1 %
packet loss. Through the userspace delay line (MASTER_ADDR is host 0's delay-line address, so the automatic
interface choice must pick slow0 over lan0), and through tc netem on lan0 where the kernel has sch_netem (it
skips with the reason where not). The all-reduce share and what preemption does at 20-100 ms come from
tests/multihost/delay_figures.py (printed figures, no timed asserts)."""

from __future__ import annotations

from pathlib import Path

import netns
import pytest

from mh_util import by_hand, train_argv


@pytest.mark.timeout(300)
@pytest.mark.parametrize("how", ["delay_line", "netem"])
def test_training_continues_with_100ms_round_trips_and_loss(network, tmp_path: Path, request, how: str):
    from ddppo.rundir import RunDir

    if how == "netem":
        request.getfixturevalue("netem")  # skips where the kernel has no sch_netem
    net = network(2)
    if how == "netem":
        net.impair(1, delay_ms=50, loss_pct=1)
        master, interface = net.hosts[0].addr, "lan0"
    else:
        try:
            line = net.delay_line()
        except netns.NetnsUnavailable as err:
            pytest.skip(str(err))  # a kernel/container feature, like sch_netem
        line.delay_ms, line.loss_pct = 50, 1
        master, interface = line.addrs[0], "slow0"
    run = tmp_path / "run"
    argv = train_argv(run, **{"run.total_env_steps": 3 * 2 * 128, "dist.timeout_s": 60,
                              "preemption.enabled": "true"})
    job = by_hand(net, [0, 1], argv, 29600, tmp_path / "logs", master=master, extra={"LOCAL_WORLD_SIZE": "1"})
    assert job.wait(240) == [0, 0], job.describe()
    assert [m["update"] for m in RunDir(run).metrics()] == [1, 2, 3]
    assert f"socket interface {interface}" in job.output(0), job.describe()
