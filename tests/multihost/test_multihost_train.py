"""Training across test hosts, started as clusters start it: SLURM-style variables (2 hosts x 1 rank) and
torchrun multi-node with the c10d rendezvous (2 hosts x 2 ranks), host names resolving as Debian's /etc/hosts
makes them (a host's own name -> 127.0.1.1) and no GLOO_SOCKET_IFNAME. Each trains 2 updates, checkpoints,
resumes to 4, and ends with the same parameters as the same world size launched the same way on one
host; the store is reachable from the other host
in a multi-node job and bound to MASTER_ADDR alone in a single-node one."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from mh_util import (PER_RANK_UPDATE, by_hand, newest_params, slurm_style, torchrun_multinode, train_argv,
                     wait_until)


def _equal(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def _train(launch, tmp: Path, world: int, name: str, stops: tuple[int, ...]):
    """Train to each update count of `stops` in turn (checkpoint every update), each a new launch (as a requeue
    does); returns the newest checkpoint's update and parameters."""
    run = tmp / name
    for total in stops:
        values = {"run.total_env_steps": total * world * PER_RANK_UPDATE, "checkpoint.interval_updates": 1,
                  "dist.timeout_s": 30}
        job = launch(train_argv(run, **values), tmp / f"{name}-{total}")
        codes = job.wait(150)
        assert all(c == 0 for c in codes), job.describe()
    if len(stops) > 1:
        logs = "".join(job.output(i) for i in range(len(job.procs)))
        assert "resumed from" in logs and f"at update {stops[-2]}" in logs, job.describe()
    return newest_params(run)


@pytest.mark.timeout(400)
def test_two_hosts_one_rank_each_slurm_style(network, tmp_path: Path):
    net = network(2, resolve="debian")
    update, multi = _train(lambda argv, logs: slurm_style(net, [0, 1], argv, 4242, logs), tmp_path, 2, "multi",
                           (2, 4))
    assert update == 4
    # the same world size on one host, the same launches (2 ranks on h0, MASTER_ADDR loopback, single-node store;
    # the same stops, since the learning-rate schedule follows run.total_env_steps)
    _, single = _train(lambda argv, logs: by_hand(net, [0, 0], argv, 29460, logs, master="127.0.0.1"),
                       tmp_path, 2, "single", (2, 4))
    assert _equal(multi, single)


@pytest.mark.timeout(500)
def test_two_hosts_two_ranks_each_torchrun_c10d(network, tmp_path: Path):
    net = network(2, resolve="debian")
    counter = iter(range(100))
    update, multi = _train(
        lambda argv, logs: torchrun_multinode(net, [0, 1], 2, argv, 29470, logs, f"job{next(counter)}"),
        tmp_path, 4, "multi", (2, 4))
    assert update == 4
    _, single = _train(lambda argv, logs: by_hand(net, [0, 0, 0, 0], argv, 29480, logs, master="127.0.0.1"),
                       tmp_path, 4, "single", (2, 4))
    assert _equal(multi, single)


@pytest.mark.timeout(120)
def test_store_reachable_from_other_host_only_when_multinode(network, tmp_path: Path):
    """While ranks wait for a missing peer: a multi-node job's store (rank 0 on h0, one more rank expected on
    h1) accepts a connection from h1; a single-node job's store (every rank on h0, MASTER_ADDR 127.0.0.1)
    listens on 127.0.0.1 only."""
    net = network(2)
    argv = train_argv(tmp_path / "run", **{"dist.timeout_s": 30})
    multi = by_hand(net, [0, 1], argv, 29490, tmp_path / "multi", extra={"LOCAL_WORLD_SIZE": "1"})
    multi.procs[1].kill()  # rank 0 now waits for rank 1 with its store up
    single = by_hand(net, [0, 0], argv, 29491, tmp_path / "single", master="127.0.0.1")
    single.procs[1].kill()
    probe = ("import socket,sys,time\n"
             "for _ in range(100):\n"
             "    try:\n"
             "        socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=2).close()\n"
             "        print('open'); break\n"
             "    except OSError as e: err = e; time.sleep(0.2)\n"
             "else: print('closed', err)\n")
    res = net.run(1, [sys.executable, "-c", probe, net.hosts[0].addr, "29490"], timeout=60)
    assert res.stdout.strip() == "open", res
    wait_until(lambda: any(a.endswith(":29491") for a in net.listening(0)), 60, "the single-node store")
    listening = net.listening(0)
    assert "127.0.0.1:29491" in listening, listening
    assert not any(a.endswith(":29491") and not a.startswith("127.0.0.1") for a in listening), listening
    res = net.run(1, [sys.executable, "-c", probe.replace("range(100)", "range(3)"), net.hosts[0].addr, "29491"])
    assert res.stdout.startswith("closed"), res
    assert multi.procs[0].poll() is None and single.procs[0].poll() is None, multi.describe() + single.describe()
