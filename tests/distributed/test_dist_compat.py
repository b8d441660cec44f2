"""The distributed context across supported Python and torch versions.

A wait that runs out becomes PeerLostError (and so exit code 1), on every supported Python.

Before Python 3.11, `Future.result(timeout)` raises concurrent.futures.TimeoutError, which is
neither the builtin TimeoutError nor a RuntimeError: caught as either, it escaped the lost-peer
handling. These tests raise that class itself into the guard and the store path, so they check
the handling on 3.11+ too, where it is an alias of the builtin. (tests/distributed/test_faults.py
runs the same path against a real stopped store host.)

Process-group creation keeps stdout clean (torch 2.8's gloo prints "[Gloo] Rank 0 is connected...").

A single-node job's store host takes over a socket listening on MASTER_ADDR only. torch 2.4-2.7's
default (libuv) store refuses one with NotImplementedError, so there the legacy store is used.
"""

from __future__ import annotations

import concurrent.futures
import datetime
import os
import socket
import threading
import time

import pytest
import torch
import torch.distributed as dist

from ddppo.distributed import DistContext, Launch, PeerLostError
from ddppo.distributed.context import native_stdout_to_stderr
from ddppo.distributed.startup import _store_backend_kwargs, _store_listen_fd
from testutil import gloo_context
from ddppo.distributed.store import BoundedCaller


def _context(world_size: int, store=None, timeout_s: float = 0.3) -> DistContext:
    launch = Launch(0, world_size, 0, world_size, "127.0.0.1", 0, "torchrun")
    return DistContext(launch, torch.device("cpu"), "gloo", store or dist.HashStore(), run_seed=0,
                       timeout_s=timeout_s)


class _HungStore:
    """A store whose `add` blocks until released, like a TCPStore whose host is stopped."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def add(self, key: str, amount: int) -> int:
        self.release.wait(30)
        return amount


def test_bounded_caller_raises_the_futures_timeout():
    # the class the store path must catch; before 3.11 it is not the builtin TimeoutError
    release = threading.Event()
    try:
        with pytest.raises(concurrent.futures.TimeoutError):
            BoundedCaller()(lambda: release.wait(30), 0.05)
    finally:
        release.set()


@pytest.mark.parametrize("error", [concurrent.futures.TimeoutError, TimeoutError],
                         ids=["futures.TimeoutError", "builtin-TimeoutError"])
def test_guard_turns_a_timeout_into_peer_lost(error):
    ctx = _context(world_size=2, timeout_s=0.3)  # rank 1 never checks in: it is named as lost
    with pytest.raises(PeerLostError, match=r"stats all-gather failed: peer rank\(s\) \[1\] lost"):
        with ctx.guard("stats all-gather"):
            raise error("no answer")


def test_guard_leaves_single_process_errors_alone():
    with pytest.raises(concurrent.futures.TimeoutError):
        with _context(world_size=1).guard("stats all-gather"):
            raise concurrent.futures.TimeoutError("no answer")


def test_hung_store_counter_is_peer_lost_within_the_timeout():
    store = _HungStore()
    ctx = _context(world_size=2, store=store, timeout_s=0.2)
    try:
        with pytest.raises(PeerLostError, match=r"did not answer within dist.timeout_s=0.2 s"):
            ctx.add_to_counter("preempt/done/1", 1)
    finally:
        store.release.set()


def test_single_node_store_host_takes_over_the_listening_socket_on_this_torch():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    launch = Launch(0, 2, 0, 2, "127.0.0.1", port, "torchrun")  # one node: listen on MASTER_ADDR only
    fd = _store_listen_fd(launch)
    assert fd is not None
    timeout = datetime.timedelta(seconds=10)
    host = dist.TCPStore("127.0.0.1", port, 2, True, timeout=timeout, wait_for_workers=False,
                         master_listen_fd=fd, **_store_backend_kwargs(fd))
    client = dist.TCPStore("127.0.0.1", port, 2, False, timeout=timeout, wait_for_workers=False)
    client.set("k", "v")
    assert host.get("k") == b"v"


@pytest.mark.parametrize("version, kwargs", [("2.4.0", {"use_libuv": False}), ("2.7.1+cu126", {"use_libuv": False}),
                                             ("2.8.0", {}), ("2.13.0+cpu", {})])
def test_legacy_store_only_for_a_listen_fd_before_torch_2_8(monkeypatch, version, kwargs):
    from torch.torch_version import TorchVersion

    monkeypatch.setattr(torch, "__version__", TorchVersion(version))
    assert _store_backend_kwargs(7) == kwargs
    assert _store_backend_kwargs(None) == {}  # no socket handed over: torch's own default


def test_native_stdout_goes_to_stderr_while_a_group_is_created(capfd):
    with native_stdout_to_stderr():
        os.write(1, b"[Gloo] native chatter\n")
    os.write(1, b"result\n")
    out, err = capfd.readouterr()
    assert out == "result\n" and "[Gloo] native chatter" in err


def test_joining_a_process_group_writes_nothing_to_stdout(capfd):
    ctx = gloo_context(timeout_s=30.0, startup_timeout_s=30.0)
    try:
        ctx.mark_started()
    finally:
        ctx.close()
    out, _ = capfd.readouterr()
    assert out == ""


def test_waiting_for_ranks_that_never_arrive_is_bounded():
    """The wait ends at the deadline it is given (named in the error); the store (in memory) answers every call,
    however loaded the machine, within its 30 s bound. The 60 s bound only catches a hang (120 x the deadline)."""
    ctx = _context(world_size=3, timeout_s=30.0)  # ranks 1 and 2 never arrive
    start = time.monotonic()
    with pytest.raises(PeerLostError, match=r"waiting for episodes: rank\(s\) \[1, 2\] did not arrive within 0.5 s"):
        ctx.wait_for_ranks("eval/1", 0.5, "waiting for episodes")
    assert time.monotonic() - start < 60


def test_waiting_for_ranks_returns_once_all_arrived():
    store = dist.HashStore()
    for r in (1, 2):
        store.set(f"eval/1/{r}", "1")
    _context(world_size=3, store=store, timeout_s=30.0).wait_for_ranks("eval/1", 5.0, "waiting for episodes")


class _HungCheckStore(_HungStore):
    def set(self, key: str, value: str) -> None:
        pass

    def check(self, keys) -> bool:
        self.release.wait(30)
        return True


def test_waiting_for_ranks_on_a_hung_store_is_peer_lost():
    store = _HungCheckStore()
    ctx = _context(world_size=2, store=store, timeout_s=0.2)
    try:
        with pytest.raises(PeerLostError, match=r"did not answer within dist.timeout_s=0.2 s"):
            ctx.wait_for_ranks("eval/1", 60.0, "waiting for episodes")
    finally:
        store.release.set()
