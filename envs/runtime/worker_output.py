"""Env worker output, relayed whole lines at a time.

Simulators print from C++ (habitat-sim, Magnum, Mesa) as well as from Python,
and several workers share the parent's terminal: written straight to it, their
lines interleave mid-line. Each worker's stdout and stderr therefore go into a
pipe of its own; one thread in the parent reads all of them and writes every
complete line, prefixed with the worker's name, to the parent's stderr in a
single write. What a worker printed before it died is still in its pipe, so a
crash message (an abort, a segfault report) is relayed too.
"""

from __future__ import annotations

import os
import selectors
import sys
import threading
from typing import Any

MAX_LINE = 4096  # longer lines are cut into pieces of this size (one atomic pipe write each)


def redirect_output_to(conn: Any) -> None:
    """In a worker: send fd 1 and fd 2 (Python's and C's output alike) into the relay's pipe."""
    sys.stdout.flush()
    sys.stderr.flush()
    fd = conn.fileno()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    conn.close()


class OutputRelay:
    """Reads the output pipes of named workers and writes their lines to this process's stderr."""

    def __init__(self, out_fd: int | None = None):
        self._out = sys.stderr.fileno() if out_fd is None else out_fd
        self._sel = selectors.DefaultSelector()
        self._pending: dict[int, bytes] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def add(self, conn: Any, name: str) -> None:
        """Relay what is written into the other end of `conn` (a read-only Connection) as `name: line`."""
        with self._lock:
            self._sel.register(conn, selectors.EVENT_READ, (f"{name}: ".encode(), conn))
            self._pending[conn.fileno()] = b""
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="env-worker-output", daemon=True)
                self._thread.start()

    def join(self, timeout: float) -> None:
        """Wait (at most `timeout` s) until every worker's pipe is closed and drained."""
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            with self._lock:
                if not self._sel.get_map():
                    self._thread = None
                    return
            for key, _ in self._sel.select(timeout=0.5):
                prefix, conn = key.data
                fd = conn.fileno()
                try:
                    data = os.read(fd, 65536)
                except OSError:
                    data = b""
                buf = self._pending[fd] + data
                *lines, rest = buf.split(b"\n")
                if not data and rest:  # the worker is gone: its last, unterminated line too
                    lines.append(rest)
                    rest = b""
                for line in lines:
                    for k in range(0, max(len(line), 1), MAX_LINE):
                        self._write(prefix + line[k:k + MAX_LINE] + b"\n")
                self._pending[fd] = rest
                if not data:
                    with self._lock:
                        self._sel.unregister(conn)
                        del self._pending[fd]
                    conn.close()

    def _write(self, line: bytes) -> None:
        try:
            os.write(self._out, line)
        except OSError:  # the terminal is gone: nothing sensible to do with a worker's line
            pass
