"""The rendezvous helpers without test hosts (tests/multihost runs them between network namespaces): the
interface that routes to MASTER_ADDR, the one-line explanations, signals ending a watched rendezvous."""

from __future__ import annotations

import dataclasses
import os
import signal
import threading

import pytest
from torch.distributed import HashStore

from ddppo import signals
from ddppo.distributed import rendezvous
from ddppo.distributed.launch import Launch
from testutil import DictStore

LAUNCH = Launch(rank=1, world_size=2, local_rank=0, local_world_size=1, master_addr="10.0.0.1", master_port=29555,
                source="torchrun")


def test_route_to_loopback_is_lo_and_unknown_names_are_none():
    name, addr = rendezvous.route_interface("127.0.0.1", 29500)
    assert addr == "127.0.0.1" and name == "lo"
    assert rendezvous.route_interface("no-such-host.invalid", 29500) is None


def test_interface_choice_respects_the_user_and_publishes_the_source(monkeypatch):
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "mine0")
    store = DictStore()
    rendezvous.choose_socket_interface(dataclasses.replace(LAUNCH, master_addr="127.0.0.1"), "gloo", store)
    assert os.environ["GLOO_SOCKET_IFNAME"] == "mine0" and store.data["net/source/1"] == b"127.0.0.1"
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "")  # empty counts as unset; monkeypatch restores it afterwards
    monkeypatch.delenv("NCCL_SOCKET_IFNAME", raising=False)
    single = dataclasses.replace(LAUNCH, master_addr="127.0.0.1", local_world_size=2)
    rendezvous.choose_socket_interface(single, "gloo", DictStore())
    assert os.environ["GLOO_SOCKET_IFNAME"] == "lo" and "NCCL_SOCKET_IFNAME" not in os.environ


@pytest.mark.parametrize("error, cause", [
    (RuntimeError("Gloo connectFullMesh failed with [pair.cc:152] timed out connecting: SO_ERROR: Connection "
                  "refused, remote=[127.0.1.1]:3459$1"), "loopback address 127.0.1.1"),
    (RuntimeError("Gloo connectFullMesh failed: Connection refused, remote=[10.0.0.2]:40000"),
     "cannot connect to a peer at 10.0.0.2:40000"),
    (RuntimeError("Failed to recv, got 0 bytes. Connection was likely closed. Did the remote server shutdown?"),
     "the store went away"),
    (RuntimeError("cannot host the rendezvous store: [Errno 98] Address already in use"), "port 29555 is already"),
    (TimeoutError("The client socket has timed out after 1800000ms while trying to connect to (10.0.0.1, 29555)"),
     "no answer in time"),
])
def test_failures_are_one_line_naming_address_port_and_cause(error, cause):
    line = rendezvous.explain_failure(LAUNCH, error)
    assert "\n" not in line and "MASTER_ADDR=10.0.0.1 MASTER_PORT=29555" in line and cause in line, line


def test_a_signal_ends_a_watched_rendezvous_that_hangs():
    """The rendezvous thread blocks (as a native wait does); SIGTERM still ends the wait at once: while the
    blocked call has not returned (it would after 300 s; the test releases it), whatever the machine's load."""
    saved = {sig: signal.getsignal(sig) for sig in signals.HANDLED}
    signals.install()
    hang, returned = threading.Event(), threading.Event()

    def build_store():
        hang.wait(300)
        returned.set()

    try:
        threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGTERM)).start()
        with pytest.raises(rendezvous.RendezvousInterrupted) as err:
            rendezvous.watched(LAUNCH, 5.0, 30.0, build_store, lambda store: None)
        assert err.value.signum == signal.SIGTERM and not returned.is_set()
    finally:
        hang.set()
        signals.clear()
        for sig, handler in saved.items():
            signal.signal(sig, handler)


def test_a_rank_without_a_store_says_so_while_it_waits(monkeypatch, caplog):
    """The store is not there yet (rank 0 not started, or a wrong MASTER_ADDR): a warning names the address
    every NOTE_EVERY_S instead of silence until dist.startup_timeout_s."""
    monkeypatch.setattr(rendezvous, "NOTE_EVERY_S", 0.2)
    monkeypatch.setattr(rendezvous.generation, "agree", lambda *_: (1, lambda: None))  # no rank 0 to answer
    launch = dataclasses.replace(LAUNCH, master_addr="127.0.0.1", master_port=9)  # nothing listens on port 9
    arrives = threading.Event()
    threading.Timer(1.0, arrives.set).start()
    with caplog.at_level("WARNING", logger="ddppo.distributed.rendezvous"):
        assert rendezvous.watched(launch, 5.0, 30.0, lambda: arrives.wait(30) and HashStore(), lambda store: "in") == "in"
    notes = [r.getMessage() for r in caplog.records if "no rendezvous store" in r.getMessage()]
    assert notes and "MASTER_ADDR=127.0.0.1 MASTER_PORT=9" in notes[0], caplog.text
