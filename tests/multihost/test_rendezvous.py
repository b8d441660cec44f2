"""Rendezvous between test hosts as users start it: without GLOO_SOCKET_IFNAME on hosts whose name resolves to
a loopback address; failures as one line on every rank; signals and lost ranks during start-up."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from mh_util import by_hand, connected_to, loaded_torch, train_argv, wait_until

PORT = 29400
TRACEBACK = "Traceback (most recent call last)"


def _ddppo_lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.startswith("ddppo: ")]


@pytest.mark.timeout(120)
def test_wrong_interface_fails_in_one_line_on_every_rank(network, tmp_path: Path):
    """The issue's first failure, forced: the user pins gloo to `lo`, so every rank advertises a loopback
    address. Before: a raw traceback on rank 0 and rank 1 hung for dist.startup_timeout_s."""
    net = network(2, resolve="debian")
    job = by_hand(net, [0, 1], train_argv(tmp_path / "run", **{"dist.timeout_s": 10}), PORT, tmp_path / "logs",
                  extra={"GLOO_SOCKET_IFNAME": "lo"})
    codes = job.wait(90)
    assert codes == [1, 1], job.describe()
    for i in range(2):
        out = job.output(i)
        assert TRACEBACK not in out, job.describe()
        lines = _ddppo_lines(out)
        assert len(lines) == 1, job.describe()
        assert f"MASTER_ADDR={net.hosts[0].addr} MASTER_PORT={PORT}" in lines[0], lines[0]
        assert "loopback address 127.0.0.1" in lines[0] and "GLOO_SOCKET_IFNAME" in lines[0], lines[0]
    assert not (tmp_path / "run" / "checkpoints").exists()


@pytest.mark.timeout(120)
def test_signals_during_rendezvous_end_the_rank_at_once(network, tmp_path: Path):
    """Ranks waiting for a peer that never comes (rank 0 absent) get SIGTERM, SIGINT, SIGUSR1: each exits at
    once, 128 + the signal, with one line. Before: SIGTERM was ignored until dist.startup_timeout_s."""
    net = network(2)
    sigs = [signal.SIGTERM, signal.SIGINT, signal.SIGUSR1]
    jobs = []
    for i, _ in enumerate(sigs):  # each a rank 1 of its own job (own port), none with a rank 0
        job = by_hand(net, [0, 1], train_argv(tmp_path / f"run{i}"), PORT + 1 + i, tmp_path / f"logs{i}")
        job.procs[0].kill()  # rank 0 never arrives
        jobs.append(job)
    for job in jobs:  # past interpreter start-up (handlers in place), on the way to the rendezvous
        wait_until(lambda: loaded_torch(job.procs[1]), 60, "torch imported")
    time.sleep(0.5)
    for job, sig in zip(jobs, sigs):
        assert job.procs[1].poll() is None, job.describe()
        job.procs[1].send_signal(sig)
    for job, sig in zip(jobs, sigs):
        job.wait(30)
        assert job.procs[1].returncode == 128 + sig, job.describe()
        out = job.output(1)
        assert TRACEBACK not in out
        lines = _ddppo_lines(out)
        assert len(lines) == 1 and f"{sig.name} during the rendezvous" in lines[0], job.describe()
        assert f"MASTER_ADDR={net.hosts[0].addr} MASTER_PORT={PORT + 1 + jobs.index(job)}" in lines[0]


@pytest.mark.timeout(120)
def test_a_rank_lost_during_rendezvous_is_named_after_timeout_s(network, tmp_path: Path):
    """World 3 with rank 2 not yet started: rank 1 joins, then its process dies. Rank 0 names it after
    dist.timeout_s (5 s) instead of waiting dist.startup_timeout_s (3600 s here). Then rank 0 is killed while
    rank 1 of a second job waits on its store: that rank says the store went away, at once.

    No wall time is asserted: that rank 0 exits at all within the 60 s wait (a hang check, 12 x dist.timeout_s
    and a sixtieth of dist.startup_timeout_s) with the line naming dist.timeout_s is what shows which bound
    ended the wait."""
    net = network(2)
    argv = train_argv(tmp_path / "run", **{"dist.timeout_s": 5, "dist.startup_timeout_s": 3600})
    job = by_hand(net, [0, 1, 1], argv, PORT + 10, tmp_path / "logs")
    job.procs[2].kill()  # rank 2 never arrives
    wait_until(lambda: connected_to(net, 1, PORT + 10), 60, "rank 1 connected to the store")
    time.sleep(3)  # its first heartbeats
    job.procs[1].kill()  # rank 1 joined (it heartbeats through the store) and dies
    job.wait(60)
    assert job.procs[0].returncode == 1, job.describe()
    lines = _ddppo_lines(job.output(0))
    assert len(lines) == 1 and "rank(s) [1] joined and then stopped answering for 5 s (dist.timeout_s)" in lines[0], \
        job.describe()

    job2 = by_hand(net, [0, 1, 1], argv, PORT + 11, tmp_path / "logs2")
    job2.procs[2].kill()
    wait_until(lambda: connected_to(net, 1, PORT + 11), 60, "rank 1 connected to the store")
    time.sleep(1)
    job2.procs[0].kill()  # the store's host dies
    job2.wait(60)
    assert job2.procs[1].returncode == 1, job2.describe()
    lines = _ddppo_lines(job2.output(1))
    assert len(lines) == 1 and "the store went away" in lines[0], job2.describe()
    assert TRACEBACK not in job.output(0) + job2.output(1)
