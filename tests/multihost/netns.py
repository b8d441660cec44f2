"""Test hosts as Linux network namespaces: N hosts on a private bridge, each with its own address, host name and
/etc/hosts; commands run inside them; faults (link cut, loss, delay, rate) injected on their links.

Layout of one network (TAG: 6 random hex digits, unique per network):

    root namespace:  bridge ddt<TAG>br  (no address: the root namespace's routing is never touched)
                       |-- veth ddt<TAG>p0 <-> lan0 in namespace ddt-<TAG>-h0  (10.231.7.10/24, host name h0)
                       |-- veth ddt<TAG>p1 <-> lan0 in namespace ddt-<TAG>-h1  (10.231.7.11/24, host name h1)

Every host has only `lo` and `lan0`; separate networks are separate bridges, so two test runs never see each
other even with the same addresses. Commands run as `ip netns exec NS unshare --uts`, so each host has its own
host name; `ip netns exec` bind-mounts /etc/netns/NS/hosts over /etc/hosts, which makes the names resolve the
way the test asks: "cluster" (every name to its host's address, as cluster DNS does) or "debian" (a host's own
name to 127.0.1.1, as Debian's installer writes /etc/hosts, the other hosts' names to their addresses).

Only objects of this module's naming are ever touched: its own namespaces, veths, bridge and /etc/netns dirs.
`close()` kills the processes it started (by process group, each its own session) and removes everything; a
network left behind by a killed test run (its bridge's alias names the owning pid, which is gone) is removed by
`remove_stale()`.
"""

from __future__ import annotations

import contextlib
import fcntl
import heapq
import json
import os
import random
import secrets
import select
import shutil
import signal
import struct
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

PREFIX = "ddt"
ALIAS = "ddppo-netns-test pid="
SUBNET = "10.231.7"  # /24; hosts .10, .11, ... (private, and only ever inside the test namespaces)
SLOW_SUBNET = "10.231.8"  # the delay line's /24 (see DelayLine)
ETC_NETNS = Path("/etc/netns")


class NetnsUnavailable(RuntimeError):
    """Network namespaces cannot be built here; the message says why."""


def _ip(*args: str, ns: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    cmd = ["ip", *(["-n", ns] if ns else []), *args]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    if check and res.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed (rc={res.returncode}): {res.stderr.strip()}")
    return res


def _tc(ns: str | None, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    cmd = ([*("ip", "netns", "exec", ns)] if ns else []) + ["tc", *args]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    if check and res.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed (rc={res.returncode}): {res.stderr.strip()}")
    return res


def why_unavailable() -> str | None:
    """None when namespaces can be built here, else the one reason why not."""
    if not os.uname().sysname == "Linux":
        return f"needs Linux, this is {os.uname().sysname}"
    if os.geteuid() != 0:
        return "creating network namespaces needs root"
    missing = [b for b in ("ip", "tc", "unshare") if not shutil.which(b)]
    if missing:
        return f"{', '.join(missing)} not found (Debian: apt-get install iproute2 util-linux)"
    return None


def install_packages(timeout: float = 300) -> None:
    """apt-get install iproute2 (ip, tc) when missing, as tests/slurm does for slurm-wlm."""
    if shutil.which("ip") and shutil.which("tc"):
        return
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        return  # why_unavailable() says what is missing
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    lock = ["-o", "DPkg::Lock::Timeout=120"]
    for cmd in (["apt-get", *lock, "update", "-qq"],
                ["apt-get", *lock, "install", "-y", "-qq", "--no-install-recommends", "iproute2"]):
        res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
        if res.returncode != 0:
            raise NetnsUnavailable(f"{' '.join(cmd)} failed (rc={res.returncode}): {res.stderr.strip()[-500:]}")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale() -> list[str]:
    """Remove the networks of this module whose owning process is gone; returns their tags."""
    res = _ip("-j", "link", "show", "type", "bridge", check=False)
    removed = []
    for link in json.loads(res.stdout or "[]"):
        name, alias = link.get("ifname", ""), link.get("ifalias", "")
        if not (name.startswith(PREFIX) and name.endswith("br") and alias.startswith(ALIAS)):
            continue
        with contextlib.suppress(ValueError):
            if _pid_alive(int(alias[len(ALIAS):])):
                continue
        tag = name[len(PREFIX):-2]
        _remove_network(tag)
        removed.append(tag)
    return removed


def _remove_network(tag: str) -> None:
    names = _ip("netns", "list", check=False).stdout.split()
    for ns in [n for n in names if n.startswith(f"{PREFIX}-{tag}-h")]:
        _kill_namespace_processes(ns)
        _ip("netns", "del", ns, check=False)
        shutil.rmtree(ETC_NETNS / ns, ignore_errors=True)
    links = json.loads(_ip("-j", "link", "show", check=False).stdout or "[]")
    for link in links:
        if link.get("ifname", "").startswith(f"{PREFIX}{tag}"):
            _ip("link", "del", link["ifname"], check=False)


def _kill_namespace_processes(ns: str) -> None:
    """SIGKILL whatever still runs inside namespace `ns` (only processes of this test network live there)."""
    res = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True, timeout=30)
    for pid in res.stdout.split():
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), signal.SIGKILL)


def netem_available() -> str | None:
    """None when `tc qdisc ... netem` works in this kernel, else why not (probed on a throwaway veth)."""
    tag = secrets.token_hex(3)
    a, b = f"{PREFIX}{tag}x0", f"{PREFIX}{tag}x1"
    try:
        _ip("link", "add", a, "type", "veth", "peer", "name", b)
        res = _tc(None, "qdisc", "add", "dev", a, "root", "netem", "delay", "1ms", check=False)
        if res.returncode != 0:
            return (f"tc netem does not work here ({res.stderr.strip()}): the kernel lacks sch_netem "
                    f"(CONFIG_NET_SCH_NETEM)")
        return None
    finally:
        _ip("link", "del", a, check=False)


@dataclass
class Host:
    index: int
    ns: str
    name: str  # host name inside the namespace (h0, h1, ...)
    addr: str
    port_link: str  # the veth end on the bridge (root namespace): cutting it cuts this host off


class Network:
    """N hosts on a private bridge. Use as a context manager (or call close()): everything is always removed."""

    def __init__(self, n_hosts: int, resolve: str = "cluster"):
        if n_hosts < 1 or n_hosts > 200:
            raise ValueError(f"n_hosts={n_hosts} must be in 1..200")
        if resolve not in ("cluster", "debian"):
            raise ValueError(f"resolve={resolve!r} must be 'cluster' or 'debian'")
        self.tag = secrets.token_hex(3)
        self.bridge = f"{PREFIX}{self.tag}br"
        self.hosts = [Host(i, f"{PREFIX}-{self.tag}-h{i}", f"h{i}", f"{SUBNET}.{10 + i}", f"{PREFIX}{self.tag}p{i}")
                      for i in range(n_hosts)]
        self.resolve = resolve
        self._procs: list[subprocess.Popen] = []
        self._delay_line: DelayLine | None = None
        self._closed = False
        try:
            self._build()
        except BaseException:
            self.close()
            raise

    # ---------------------------------------------------------------- build / tear down
    def _build(self) -> None:
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("link", "set", self.bridge, "alias", f"{ALIAS}{os.getpid()}")
        _ip("link", "set", self.bridge, "up")
        for h in self.hosts:
            _ip("netns", "add", h.ns)
            _ip("link", "add", h.port_link, "type", "veth", "peer", "name", f"{PREFIX}{self.tag}q{h.index}")
            _ip("link", "set", f"{PREFIX}{self.tag}q{h.index}", "netns", h.ns)
            _ip("link", "set", f"{PREFIX}{self.tag}q{h.index}", "name", "lan0", ns=h.ns)
            _ip("addr", "add", f"{h.addr}/24", "dev", "lan0", ns=h.ns)
            _ip("link", "set", "lan0", "up", ns=h.ns)
            _ip("link", "set", "lo", "up", ns=h.ns)
            _ip("link", "set", h.port_link, "master", self.bridge, "up")
            self._write_hosts_file(h)

    def _write_hosts_file(self, h: Host) -> None:
        lines = ["127.0.0.1 localhost"]
        for other in self.hosts:
            if other is h and self.resolve == "debian":
                lines.append(f"127.0.1.1 {other.name}")
            else:
                lines.append(f"{other.addr} {other.name}")
        (ETC_NETNS / h.ns).mkdir(parents=True, exist_ok=True)
        (ETC_NETNS / h.ns / "hosts").write_text("\n".join(lines) + "\n")

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for proc in self._procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
        for proc in self._procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)
        if self._delay_line is not None:
            self._delay_line.close()
        _remove_network(self.tag)

    def __enter__(self) -> "Network":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---------------------------------------------------------------- running commands
    def command(self, host: int, argv: Sequence[str]) -> list[str]:
        """`argv` as run inside host `host` (its namespace, its own host name)."""
        h = self.hosts[host]
        return ["ip", "netns", "exec", h.ns, "unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"',
                h.name, *argv]

    def popen(self, host: int, argv: Sequence[str], env: Mapping[str, str] | None = None,
              **kwargs) -> subprocess.Popen:
        """Start `argv` inside host `host`, in its own session (so close() can kill it with everything it
        started, by its process group)."""
        proc = subprocess.Popen(self.command(host, argv), env=None if env is None else dict(env),
                                start_new_session=True, **kwargs)
        self._procs.append(proc)
        return proc

    def run(self, host: int, argv: Sequence[str], timeout: float = 60, **kwargs) -> subprocess.CompletedProcess:
        return subprocess.run(self.command(host, argv), capture_output=True, text=True, timeout=timeout, **kwargs)

    # ---------------------------------------------------------------- faults
    def cut(self, host: int) -> None:
        """Unplug host `host` from the bridge: its packets are silently lost (no reset), as with a cut cable."""
        _ip("link", "set", self.hosts[host].port_link, "down")

    def reconnect(self, host: int) -> None:
        _ip("link", "set", self.hosts[host].port_link, "up")

    def impair(self, host: int, delay_ms: float = 0.0, loss_pct: float = 0.0) -> None:
        """Added delay and random loss on host `host`'s link, both directions (tc netem on both veth ends)."""
        spec = ["netem", "delay", f"{delay_ms:g}ms", *(["loss", f"{loss_pct:g}%"] if loss_pct else [])]
        _tc(self.hosts[host].ns, "qdisc", "replace", "dev", "lan0", "root", *spec)
        _tc(None, "qdisc", "replace", "dev", self.hosts[host].port_link, "root", *spec)

    def limit_rate(self, host: int, kbit: int, burst_bytes: int = 16384, latency_ms: int = 400) -> None:
        """A bandwidth limit on host `host`'s link, both directions (tc tbf; works where netem does not)."""
        spec = ["tbf", "rate", f"{kbit}kbit", "burst", str(burst_bytes), "latency", f"{latency_ms}ms"]
        _tc(self.hosts[host].ns, "qdisc", "replace", "dev", "lan0", "root", *spec)
        _tc(None, "qdisc", "replace", "dev", self.hosts[host].port_link, "root", *spec)

    def clear_impairment(self, host: int) -> None:
        _tc(self.hosts[host].ns, "qdisc", "del", "dev", "lan0", "root", check=False)
        _tc(None, "qdisc", "del", "dev", self.hosts[host].port_link, "root", check=False)

    def traffic_bytes(self, host: int) -> int:
        """Bytes through host `host`'s link so far (both directions, counted at the bridge port)."""
        stats = Path("/sys/class/net") / self.hosts[host].port_link / "statistics"
        return sum(int((stats / f).read_text()) for f in ("rx_bytes", "tx_bytes"))

    def delay_line(self) -> "DelayLine":
        """A second network between the hosts through a userspace relay with settable delay and loss (works
        where the kernel has no sch_netem)."""
        if self._delay_line is None:
            if not Path("/dev/net/tun").exists():
                raise NetnsUnavailable("/dev/net/tun is missing (the delay line needs TUN devices)")
            self._delay_line = DelayLine(self)
        return self._delay_line

    def listening(self, host: int) -> list[str]:
        """Local addresses of the TCP sockets listening inside host `host` (`ss -ltnH`)."""
        res = self.run(host, ["ss", "-ltnH"])
        return [line.split()[3] for line in res.stdout.splitlines() if line.strip()]


class DelayLine:
    """Each host gets a TUN interface `slow0` (SLOW_SUBNET.10+i/24); a thread of this process relays the IP
    packets between them, each held `delay_ms` (one way: the round trip grows by twice that) and dropped with
    probability `loss_pct` %. The kernel's own path (veth, bridge) stays as it is; a host reaches the others'
    slow addresses through slow0. Settable at any time; closed with the network."""

    TUNSETIFF, IFF_TUN, IFF_NO_PI = 0x400454CA, 0x0001, 0x1000

    def __init__(self, net: Network):
        self.delay_ms = 0.0
        self.loss_pct = 0.0
        self.addrs = [f"{SLOW_SUBNET}.{10 + h.index}" for h in net.hosts]
        self._fds: list[int] = []
        self._route: dict[bytes, int] = {}
        self._stop = threading.Event()
        self._rand = random.Random(0)
        for h, addr in zip(net.hosts, self.addrs):
            name = f"{PREFIX}{net.tag}s{h.index}"
            fd = os.open("/dev/net/tun", os.O_RDWR)
            fcntl.ioctl(fd, self.TUNSETIFF, struct.pack("16sH", name.encode(), self.IFF_TUN | self.IFF_NO_PI))
            self._fds.append(fd)
            _ip("link", "set", name, "netns", h.ns)
            _ip("link", "set", name, "name", "slow0", ns=h.ns)
            _ip("addr", "add", f"{addr}/24", "dev", "slow0", ns=h.ns)
            _ip("link", "set", "slow0", "up", ns=h.ns)
            self._route[bytes(int(x) for x in addr.split("."))] = fd
        self._thread = threading.Thread(target=self._relay, name="delay-line", daemon=True)
        self._thread.start()

    def _relay(self) -> None:
        due: list[tuple[float, int, int, bytes]] = []
        seq = 0
        while not self._stop.is_set():
            wait = 0.2 if not due else max(0.0, due[0][0] - time.monotonic())
            ready, _, _ = select.select(self._fds, [], [], wait)
            now = time.monotonic()
            for fd in ready:
                try:
                    pkt = os.read(fd, 65536)
                except OSError:
                    continue
                out = self._route.get(pkt[16:20]) if len(pkt) >= 20 and pkt[0] >> 4 == 4 else None
                if out is None or self._rand.random() * 100 < self.loss_pct:
                    continue
                seq += 1
                heapq.heappush(due, (now + self.delay_ms / 1000, seq, out, pkt))
            while due and due[0][0] <= time.monotonic():
                _, _, out, pkt = heapq.heappop(due)
                with contextlib.suppress(OSError):
                    os.write(out, pkt)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        for fd in self._fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._fds = []


def wait_exit(procs: Sequence[subprocess.Popen], timeout: float) -> list[float | None]:
    """Wait for every process at most `timeout` s in all; each one's exit time (s from now), None if it still
    runs."""
    start = time.monotonic()
    out: list[float | None] = [None] * len(procs)
    while time.monotonic() - start < timeout:
        for i, p in enumerate(procs):
            if out[i] is None and p.poll() is not None:
                out[i] = time.monotonic() - start
        if all(t is not None for t in out):
            break
        time.sleep(0.1)
    return out
