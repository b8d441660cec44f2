"""The rendezvous port of a SLURM job: derived from the job id, below Linux's ephemeral port range.

The kernel hands out the ports of outgoing connections (every TCP client on the node, gloo's and NCCL's own
sockets) from net.ipv4.ip_local_port_range (32768-60999 by default). A store port inside that range is taken
now and then by some connection of another job: EADDRINUSE at start-up. So the port lies in a window below the
range, [PORT_BASE, low), at PORT_BASE + job id modulo the window's size: the same on every rank and on every
restart of the job. Where the range starts too low for such a window, the window above it, (high, 65535], is
used; where neither is wide enough, the ports below the range from 1024.

`main([JOB_ID])` (slurm/train.sbatch, on the allocation's first node, where rank 0
hosts the store) prints that port, or, when something on this host already listens there, the next free one
of the window (at most RETRIES tries, then the job's own port: the rendezvous names the port in use).
"""

from __future__ import annotations

import socket
import sys
from pathlib import Path

RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
DEFAULT_RANGE = (32768, 60999)  # Linux's default, where the file cannot be read (not Linux, a container)
PORT_BASE = 20000  # above the ports services commonly use (TensorBoard 6006, Jupyter 8888, ...)
MIN_WINDOW = 1000
RETRIES = 50


def ephemeral_range(path: Path = RANGE_FILE) -> tuple[int, int]:
    """(low, high) of the kernel's ephemeral port range; Linux's default where it cannot be read."""
    try:
        low, high = (int(x) for x in path.read_text().split()[:2])
    except (OSError, ValueError):
        return DEFAULT_RANGE
    return (low, high) if 1 <= low <= high <= 65535 else DEFAULT_RANGE


def port_window(ephemeral: tuple[int, int]) -> tuple[int, int]:
    """[first, end) of the ports a job's port is chosen from, none of them in `ephemeral`."""
    low, high = ephemeral
    if low - PORT_BASE >= MIN_WINDOW:
        return PORT_BASE, low
    if 65536 - (high + 1) >= MIN_WINDOW:
        return high + 1, 65536
    return 1024, max(low, 1025)


def job_port(job_id: int, ephemeral: tuple[int, int] | None = None) -> int:
    """The job's own port: the same for every rank and every restart."""
    first, end = port_window(ephemeral or ephemeral_range())
    return first + job_id % (end - first)


def listening(port: int, host: str = "") -> bool:
    """Whether a listening socket on this host holds `port` (a bind of our own would fail)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return True
    return False


def free_job_port(job_id: int, ephemeral: tuple[int, int] | None = None, retries: int = RETRIES,
                  in_use=listening) -> int:
    """`job_port`, or the next port of its window (wrapping) that nothing listens on."""
    ephemeral = ephemeral or ephemeral_range()
    first, end = port_window(ephemeral)
    start = job_port(job_id, ephemeral)
    for step in range(min(retries, end - first)):
        port = first + (start - first + step) % (end - first)
        if not in_use(port):
            return port
    return start


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not argv[0].isdigit():
        sys.stderr.write("usage: python -m ddppo.distributed.port JOB_ID\n")
        return 2
    print(free_job_port(int(argv[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
