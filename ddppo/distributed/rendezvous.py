"""Rendezvous that works where users start it, and fails in one line when it cannot.

- The socket interface: gloo picks an address by resolving this host's name unless told otherwise; Debian's
  /etc/hosts maps that name to 127.0.1.1, so every rank advertises a loopback address and no host can reach
  another. Unless the user set GLOO_SOCKET_IFNAME, the interface is the one that owns the source address of the
  route to MASTER_ADDR (learnt from a UDP connect, which sends nothing). NCCL is left to choose its own
  (it skips loopback and docker interfaces and prefers InfiniBand); NCCL_SOCKET_IFNAME is the user's.
- Watched: the store and the process group are created on a helper thread; the main thread stays in Python, so
  SIGTERM/SIGINT/SIGUSR1 end the process within a fraction of a second (a native wait would hold them off for
  dist.startup_timeout_s), and it watches the store: every rank bumps a heartbeat counter there, so a rank that
  joined and then died or hung is named after dist.timeout_s, a rank that failed its part of the rendezvous
  (`failed/<rank>`) is named at once, and a store that went away (its host died) is reported at once.
- The namespace: the store's keys of one start of the job live under its generation, which every rank agrees on
  (ddppo.distributed.generation), so a restarted start never reads a crashed one's heartbeats or failure notes.
- Every failure becomes RendezvousError: one line naming MASTER_ADDR, MASTER_PORT and the likely cause; a
  ConfigError found while joining (ranks sharing a GPU under NCCL) stays one, for exit code 2.
"""

from __future__ import annotations

import concurrent.futures
import datetime
import logging
import os
import re
import socket
import threading
import time
from typing import Any, Callable

import torch.distributed as dist

import ddppo.distributed.generation as generation
from ddppo import signals
from ddppo.errors import ConfigError
from ddppo.distributed.launch import Launch

log = logging.getLogger(__name__)

HEARTBEAT_S = 1.0
NOTE_EVERY_S = 30.0


class RendezvousError(RuntimeError):
    """The rendezvous failed; the message is one line naming the address, the port and the likely cause."""


class RendezvousInterrupted(RuntimeError):
    """A signal (scancel, Ctrl-C, a SLURM warning) arrived during the rendezvous."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def route_interface(master_addr: str, port: int) -> tuple[str, str] | None:
    """(interface name, its address) of the route from this host to `master_addr`, or None when unknown."""
    import psutil

    try:
        family, _, _, _, sockaddr = socket.getaddrinfo(master_addr, port or 1, type=socket.SOCK_DGRAM)[0]
        with socket.socket(family, socket.SOCK_DGRAM) as sock:
            sock.connect(sockaddr)  # picks the route and source address; no packet is sent
            source = sock.getsockname()[0]
    except OSError:
        return None  # unresolvable or unroutable: the store's own error says so
    for name, addrs in psutil.net_if_addrs().items():
        if any(a.family == family and a.address.split("%")[0] == source for a in addrs):
            return name, source
    return None


def _is_loopback(addr: str) -> bool:
    return addr.startswith("127.") or addr == "::1"


def choose_socket_interface(launch: Launch, backend: str, store: Any) -> None:
    """Set GLOO_SOCKET_IFNAME to the interface that routes to MASTER_ADDR, unless the user set it (gloo also
    carries the pickled objects of an NCCL job). NCCL_SOCKET_IFNAME is never set: forcing it would put NCCL's
    traffic (`backend`, as configured, only names it in the log) on the route to MASTER_ADDR, often a management
    network, where NCCL itself would choose InfiniBand or the fastest interface.

    Every rank publishes the source address of its route to MASTER_ADDR. Where MASTER_ADDR is a name that
    resolves to a loopback address on its own host (Debian's 127.0.1.1) while ranks run on other hosts, the
    ranks of that host take the route to a peer host's published address instead."""
    unset = [n for n in ["GLOO_SOCKET_IFNAME"] if not os.environ.get(n)]
    found = route_interface(launch.master_addr, launch.master_port)
    store.set(f"net/source/{launch.rank}", found[1] if found else "")
    if not unset or found is None:
        return
    via = f"the route to MASTER_ADDR={launch.master_addr}"
    if _is_loopback(found[1]) and not launch.single_node:
        peer = _peer_address(store, launch)
        if peer is not None:
            found = route_interface(peer, 1) or found
            via = f"the route to a peer host at {peer}; MASTER_ADDR={launch.master_addr} is loopback here"
    for name in unset:
        os.environ[name] = found[0]
    log.info("rank %d: socket interface %s (%s, %s) for gloo%s; set %s to choose another", launch.rank, found[0],
             found[1], via, "" if backend == "gloo" else " (NCCL picks its own: NCCL_SOCKET_IFNAME)",
             "/".join(unset))


def _peer_address(store: Any, launch: Launch) -> str | None:
    """The first non-loopback route source another rank published; None once all published only loopback.
    (Waits as long as ranks are missing: the watcher ends the wait for lost ranks and signals.)"""
    while True:
        ready = [r for r in range(launch.world_size) if r != launch.rank and store.check([f"net/source/{r}"])]
        for r in ready:
            addr = store.get(f"net/source/{r}").decode()
            if addr and not _is_loopback(addr):
                return addr
        if len(ready) == launch.world_size - 1:
            return None
        time.sleep(0.1)


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return re.sub(r"\s+", " ", text[0] if text else type(err).__name__)[:300]


def explain_failure(launch: Launch, err: BaseException) -> str:
    """One line: where the rendezvous was, what failed, the likely cause and what to do."""
    where = f"rank {launch.rank}: rendezvous at MASTER_ADDR={launch.master_addr} MASTER_PORT={launch.master_port}"
    msg = str(err)
    remote = re.search(r"remote=\[([^\]]+)\]:(\d+)", msg)
    if remote:
        ip = remote.group(1)
        if _is_loopback(ip):
            cause = (f"a peer advertised the loopback address {ip} (its host name resolves to a loopback address, "
                     f"as Debian's /etc/hosts does); unset GLOO_SOCKET_IFNAME so ddppo picks the interface that "
                     f"routes to MASTER_ADDR, or set it (and NCCL_SOCKET_IFNAME with NCCL) to that interface")
        else:
            cause = (f"cannot connect to a peer at {ip}:{remote.group(2)}: a firewall blocks the ports gloo picks "
                     f"between hosts, or GLOO_SOCKET_IFNAME={os.environ.get('GLOO_SOCKET_IFNAME', '')} is an "
                     f"interface the other hosts cannot reach")
        return f"{where} failed: {cause} ({_first_line(err)})"
    if any(k in msg for k in ("Connection was likely closed", "Connection reset", "Broken pipe")):
        return (f"{where} failed: the store went away (rank 0 or the torchrun agent hosting it has exited, or its "
                f"host is unreachable) ({_first_line(err)})")
    if "Address already in use" in msg or "EADDRINUSE" in msg:
        return (f"{where} failed: port {launch.master_port} is already in use on this host (another job or a "
                f"leftover process): choose another MASTER_PORT ({_first_line(err)})")
    if "unknown host" in msg.lower() or "name or service not known" in msg.lower() or "getaddrinfo" in msg:
        return f"{where} failed: MASTER_ADDR={launch.master_addr} does not resolve on this host ({_first_line(err)})"
    if isinstance(err, (TimeoutError, dist.DistStoreError)) or "timed out" in msg.lower() or "timeout" in msg.lower():
        return (f"{where} failed: no answer in time: rank 0 (or the torchrun agent hosting the store) is not "
                f"running, MASTER_ADDR/MASTER_PORT differ between ranks, or a firewall blocks port "
                f"{launch.master_port} ({_first_line(err)})")
    return f"{where} failed: {_first_line(err)}"


class _Watcher:
    """The main thread's view of the rendezvous through its own store client: heartbeats, failures, joins."""

    def __init__(self, launch: Launch, prefix: str, lost_after_s: float):
        self.launch = launch
        self.prefix = prefix
        self.lost_after_s = lost_after_s
        self._client: Any = None
        self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="ddppo-rdzv-watch")
        self._pending: concurrent.futures.Future | None = None
        self._pending_since = 0.0
        self._seen: dict[int, tuple[int, float]] = {}  # rank -> (heartbeat count, when it last changed)
        self._last_note = time.monotonic()

    def _call(self, fn: Callable[[], Any]) -> Any:
        """Run `fn` (store calls) on the watcher's thread without ever blocking the main thread: returns its
        result once ready, None while it runs; raises RendezvousError when the store stopped answering."""
        now = time.monotonic()
        if self._pending is None:
            self._pending, self._pending_since = self._pool.submit(fn), now
        if not self._pending.done():
            if now - self._pending_since > self.lost_after_s:
                raise RendezvousError(f"rank {self.launch.rank}: rendezvous at MASTER_ADDR={self.launch.master_addr}"
                                      f" MASTER_PORT={self.launch.master_port} failed: the store did not answer for "
                                      f"{self.lost_after_s:g} s (dist.timeout_s): its host is unreachable or hung")
            return None
        future, self._pending = self._pending, None
        try:
            return future.result()
        except Exception as err:
            raise RendezvousError(
                f"rank {self.launch.rank}: rendezvous at MASTER_ADDR={self.launch.master_addr} MASTER_PORT="
                f"{self.launch.master_port} failed: the store went away (rank 0 or the torchrun agent hosting it "
                f"has exited, or its host is unreachable) ({_first_line(err)})") from None

    def _connect(self) -> Any:
        """The watcher's own store client (the rendezvous thread's may be blocked in a long wait). A plain
        connect first: a refused one means the store is gone, and TCPStore would only retry it, noisily."""
        addr = (self.launch.master_addr, self.launch.master_port)
        with socket.create_connection(addr, timeout=min(5.0, self.lost_after_s / 2)):
            pass
        return dist.PrefixStore(self.prefix, dist.TCPStore(
            self.launch.master_addr, self.launch.master_port, is_master=False,
            timeout=datetime.timedelta(seconds=min(5.0, self.lost_after_s / 2))))

    def _look(self) -> dict[str, Any]:
        if self._client is None:
            self._client = self._connect()
        store, world = self._client, self.launch.world_size
        store.add(f"hb/{self.launch.rank}", 1)
        failed = [r for r in range(world) if store.check([f"failed/{r}"])]
        return {"failed": {r: store.get(f"failed/{r}").decode(errors="replace") for r in failed},
                "beats": {r: store.add(f"hb/{r}", 0) for r in range(world)},
                "done": [r for r in range(world) if store.check([f"done/{r}"])]}

    def poll(self) -> None:
        seen = self._call(self._look)
        if seen is None:
            return
        now = time.monotonic()
        if seen["failed"]:
            rank, why = next(iter(seen["failed"].items()))
            why = why[len(f"rank {rank}: "):] if why.startswith(f"rank {rank}: ") else why
            raise RendezvousError(f"rank {self.launch.rank}: rendezvous failed on rank {rank}: {why}")
        for r, count in seen["beats"].items():
            if count and self._seen.get(r, (None,))[0] != count:
                self._seen[r] = (count, now)
        lost = [r for r, (_, t) in self._seen.items()
                if r not in seen["done"] and r != self.launch.rank and now - t > self.lost_after_s]
        if lost:
            raise RendezvousError(f"rank {self.launch.rank}: rendezvous at MASTER_ADDR={self.launch.master_addr} "
                                  f"MASTER_PORT={self.launch.master_port} failed: rank(s) {lost} joined and then "
                                  f"stopped answering for {self.lost_after_s:g} s (dist.timeout_s): lost")
        if now - self._last_note > NOTE_EVERY_S:
            waiting = [r for r, c in seen["beats"].items() if not c]
            if waiting:
                log.warning("rank %d: rendezvous at %s:%d: waiting for rank(s) %s to join", self.launch.rank,
                            self.launch.master_addr, self.launch.master_port, waiting)
            self._last_note = now

    def mark(self, key: str, value: str, timeout_s: float = 3.0) -> None:
        """Best effort: `key/<rank>` = value in the store (done, failed), waiting at most `timeout_s`."""
        def put() -> None:
            if self._client is None:
                self._client = self._connect()
            self._client.set(f"{key}/{self.launch.rank}", value)

        try:
            if self._pending is not None:
                self._pending.result(timeout=timeout_s)
            self._pool.submit(put).result(timeout=timeout_s)
        except Exception:  # the store is gone or hung: nothing to tell it
            pass

    def wait_for_others(self, timeout_s: float) -> None:
        """Rank 0, whose process hosts the store: return once every other rank has marked done or failed (has
        read why, or failed itself), at most `timeout_s`. A fixed pause was too short on a loaded machine: a rank
        that had not looked yet saw only that the store went away."""
        others = [r for r in range(self.launch.world_size) if r != self.launch.rank]

        def settled() -> bool:
            return all(self._client.check([f"failed/{r}"]) or self._client.check([f"done/{r}"]) for r in others)

        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                if self._client is None or self._pool.submit(settled).result(timeout=timeout_s):
                    return
            except Exception:  # the store is hung or gone: nobody left to wait for
                return
            time.sleep(0.1)

    def close(self) -> None:
        self._pool.shutdown(wait=False)


def watched(launch: Launch, lost_after_s: float, startup_timeout_s: float, build_store: Callable[[], Any],
            join: Callable[[Any], Any]) -> Any:
    """On a helper thread, build the store, agree on this start's generation (ddppo.distributed.generation) and
    `join(store namespaced by it)`; watched from this (main) thread; returns what `join` returns.

    Raises RendezvousInterrupted on a signal, RendezvousError (one line) on any failure, of this rank or another.
    With one rank (no store to watch) the calls run here directly.
    """
    if launch.world_size == 1:
        return join(dist.PrefixStore(generation.namespace(0), build_store()))
    future: concurrent.futures.Future = concurrent.futures.Future()
    stage: dict[str, Any] = {"store": None, "namespace": None}

    def work() -> None:
        done = None
        try:
            stage["store"] = build_store()
            number, done = generation.agree(launch, stage["store"], startup_timeout_s)
            stage["namespace"] = generation.namespace(number)
            future.set_result(join(dist.PrefixStore(stage["namespace"], stage["store"])))
        except BaseException as err:  # handed to the main thread
            future.set_exception(err)
        finally:
            if done is not None:
                done()

    threading.Thread(target=work, name="ddppo-rendezvous", daemon=True).start()
    try:
        return _watch(launch, lost_after_s, future, stage)
    finally:
        if stage.get("watcher") is not None:
            stage["watcher"].close()


def _watch(launch: Launch, lost_after_s: float, future: concurrent.futures.Future, stage: dict[str, Any]) -> Any:
    """The main thread's loop of `watched`: signals, the outcome, notes while waiting, and the watcher's looks
    once the generation is known (its keys live in the generation's namespace)."""
    next_poll = 0.0
    start = last_note = time.monotonic()
    while True:
        sig = signals.pending()
        if sig:
            raise RendezvousInterrupted(sig)
        watcher = stage.get("watcher")
        if watcher is None and stage["namespace"] is not None:
            watcher = stage["watcher"] = _Watcher(launch, stage["namespace"] + "rdzv/", lost_after_s)
        if future.done():
            err = future.exception()
            if err is None:
                if watcher is not None:
                    watcher.mark("done", "1")
                return future.result()
            if isinstance(err, ConfigError):  # a setting every rank finds wrong alike (cuda.decide_backend)
                if launch.rank == 0 and not launch.agent_store:
                    time.sleep(2 * HEARTBEAT_S)  # the store dies with this process: let the others decide
                raise err
            line = explain_failure(launch, err)
            if watcher is not None:
                watcher.mark("failed", line)
                if launch.rank == 0 and not launch.agent_store:  # the store dies with this process: let the
                    watcher.wait_for_others(max(2 * HEARTBEAT_S, min(lost_after_s, 15.0)))  # others read why
            raise RendezvousError(line) from None
        if watcher is None and time.monotonic() - last_note > NOTE_EVERY_S:
            last_note = time.monotonic()
            if stage["store"] is None:
                log.warning("rank %d: no rendezvous store at MASTER_ADDR=%s MASTER_PORT=%d after %.0f s: is rank 0 "
                            "(or torchrun's agent) running, and is that address right from this host?",
                            launch.rank, launch.master_addr, launch.master_port, last_note - start)
            else:
                log.warning("rank %d: rendezvous at %s:%d: waiting for rank 0 to hand out this start's generation "
                            "(%.0f s)", launch.rank, launch.master_addr, launch.master_port, last_note - start)
        if watcher is not None and time.monotonic() >= next_poll:
            try:
                watcher.poll()
            except RendezvousError as err:  # another rank failed: say so, which also frees rank 0 to exit
                watcher.mark("failed", str(err))
                raise
            # a store call per rank per look: large jobs look less often (the store serves every rank)
            next_poll = time.monotonic() + HEARTBEAT_S * max(1.0, launch.world_size / 16)
        time.sleep(0.05)
