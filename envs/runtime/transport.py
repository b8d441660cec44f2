"""A worker step's hand-over at memory speed: counters in shared memory, a pipe byte only to wake a sleeper.

Each env worker has a control row in shared memory (one cache line of uint64 words). The trainer writes a step's
actions beside it and bumps the row's CMD; the worker writes the step's outputs and sets DONE to the same number
(with STATUS 1 where a message follows on its command pipe: finished episodes, an error). The side that waits
spins on the other's word for up to `spin_s`, giving up the core at every turn (`os.sched_yield`: with more
processes than cores a spinner must never starve the trainer), then marks itself asleep and blocks on a pipe; the
other side writes one byte to that pipe only when it finds the waiter asleep. While both sides keep up, a step
costs no system call and no pickling; when one falls behind, one wake-up through the kernel. A side spins only
while its waits end within `spin_s`: after a longer one (an env step or a policy forward of milliseconds) it
blocks at once, until a wait is short again; spinning through such waits would only burn a core.

Memory order: x86-64 shows every store in program order to other cores (TSO), so outputs written before DONE
are seen with it; the one reordering it allows (a store passing a later load) could let both sides miss each
other's asleep flag, which a full fence (`fence`: a lock's atomic instruction) between storing one's own word and
reading the other's closes. On other machines (aarch64's weaker order) `default_spin_s()` is 0: every post rings,
and a waiter trusts a counter only after reading the byte rung after it (the pipe's lock in the kernel orders the
memory). A blocked waiter also looks again every `BACKSTOP_S`.

Why a pipe byte to block on (measured on a 2-core VM, `ddppo bench env-fps --transport`): an eventfd wakes no
faster (both are one kernel wake-up, a few microseconds when a core is free) and needs Python 3.10; a semaphore
cannot be waited on together with the workers' process sentinels, so a dead worker would be seen only at the
timeout; faster-fifo is a queue of pickled messages woken through a futex (the same kind of kernel wake-up;
an int's round trip took a median 44-47 us there, more than a whole worker step), and a step needs no queue: its
actions and outputs already sit in the shared block. A pipe's ends also travel to forkserver workers as
they are, on every Python this package supports. SPIN_S: there, with 7 other engineers' work on its 2 cores, a
worker step's round trip (an env doing nothing) gained from spinning from 50 us of spin on (median 29-33 us against
44-47 us blocking at once); MiniGrid and gridnav steps/s in 2 workers moved within the noise of that load.
"""

from __future__ import annotations

import os
import platform
import select
import threading
import time
from typing import Any, Iterable, Sequence

import numpy as np

CMD, DONE, STATUS, WORKER_ASLEEP, TRAINER_ASLEEP = range(5)  # words of a control row
ROW_WORDS = 8  # one 64-byte cache line per worker
SPIN_S = 50e-6  # how long a waiter spins before it blocks (x86-64)
BACKSTOP_S = 0.05  # a blocked waiter looks at its counter at least this often
_IN = select.POLLIN | select.POLLHUP | select.POLLERR
_fence_lock = threading.Lock()


def default_spin_s() -> float:
    """SPIN_S where stores are seen in order (x86-64), else 0 (wake through the pipe only; see the docstring)."""
    return SPIN_S if platform.machine().lower() in ("x86_64", "amd64") else 0.0


def control_rows(buffer: Any, offset: int, num_workers: int) -> np.ndarray:
    """The (num_workers, ROW_WORDS) uint64 control rows in `buffer` at `offset` (64-byte aligned)."""
    return np.ndarray((num_workers, ROW_WORDS), dtype=np.uint64, buffer=buffer, offset=offset)


def fence() -> None:
    """A full memory fence on x86-64: acquiring and releasing a lock runs an atomic (locked) instruction."""
    _fence_lock.acquire()
    _fence_lock.release()


def ring(fd: int) -> None:
    """Wake the side blocked on the pipe whose write end is `fd`: never blocks (a full pipe is already rung), and a
    reader that is gone is found dead by its sentinel, not here."""
    try:
        os.write(fd, b"\0")
    except (BlockingIOError, BrokenPipeError):
        pass


def drain(fd: int) -> None:
    """Read every byte rung on the (non-blocking) read end `fd`."""
    try:
        while len(os.read(fd, 4096)) == 4096:
            pass
    except BlockingIOError:
        pass


def post(row: np.ndarray, word: int, value: int, asleep: int, bell: int, spin_s: float) -> None:
    """Set `row[word]` to `value` (after everything written before it) and wake the other side if it sleeps."""
    row[word] = value
    if spin_s:
        fence()
        if not row[asleep]:
            return
    ring(bell)


class TrainerEnd:
    """The trainer's side of every worker's control row: `post` a step, `wait` for steps to finish."""

    def __init__(self, rows: np.ndarray, to_workers: Sequence[int], from_workers: Sequence[int], spin_s: float,
                 backstop_s: float = BACKSTOP_S):
        self.rows, self.spin_s, self._backstop_s = rows, spin_s, backstop_s
        self._to, self._from = list(to_workers), list(from_workers)  # pipe ends: ring a worker, be rung
        for fd in self._from:
            os.set_blocking(fd, False)
        for fd in self._to:
            os.set_blocking(fd, False)
        self._seq = [0] * len(self._to)
        self._waited_s = 0.0  # the last wait's length: it spins next time only if that was within spin_s

    def post(self, w: int) -> None:
        """Start worker `w`'s next step (its actions already written)."""
        self._seq[w] += 1
        post(self.rows[w], CMD, self._seq[w], WORKER_ASLEEP, self._to[w], self.spin_s)

    def has_message(self, w: int) -> bool:
        """Whether worker `w`'s finished step left a message on its command pipe."""
        return bool(self.rows[w, STATUS])

    def wait(self, workers: Iterable[int], want: int, timeout_s: float,
             sentinels: Sequence[int]) -> tuple[list[int], list[int]]:
        """(finished, dead): the workers of `workers` whose step finished, once `want` have, `timeout_s` passed or
        a worker's process `sentinels[w]` fired (those not finished are `dead`)."""
        start = time.monotonic()
        try:
            return self._wait(list(workers), want, start + timeout_s, sentinels)
        finally:
            self._waited_s = time.monotonic() - start

    def _wait(self, pending: list[int], want: int, deadline: float,
              sentinels: Sequence[int]) -> tuple[list[int], list[int]]:
        done: list[int] = []
        if self.spin_s and self._waited_s <= self.spin_s:
            end = min(deadline, time.monotonic() + self.spin_s)
            while not self._collect(pending, pending, done, want) and time.monotonic() < end:
                os.sched_yield()
        while len(done) < want:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            poller = select.poll()
            for w in pending:
                poller.register(self._from[w], _IN)
                poller.register(sentinels[w], _IN)
            try:
                if self.spin_s:
                    self.rows[pending, TRAINER_ASLEEP] = 1
                    fence()
                    if self._collect(pending, pending, done, want):
                        break
                ready = {fd for fd, _ in poller.poll(min(remaining, self._backstop_s) * 1000)}
            finally:  # also when a signal handler raises in the poll
                self.rows[:, TRAINER_ASLEEP] = 0
            rung = [w for w in pending if self._from[w] in ready]
            for w in rung:
                drain(self._from[w])
            self._collect(pending, pending if self.spin_s else rung, done, want)
            dead = [w for w in pending if sentinels[w] in ready]
            if dead:
                return done, dead
        return done, []

    def _collect(self, pending: list[int], candidates: list[int], done: list[int], want: int) -> bool:
        """Move the finished `candidates` from `pending` to `done`; True once `want` are done."""
        for w in list(candidates):
            if self.rows[w, DONE] == self._seq[w]:
                pending.remove(w)
                done.append(w)
        return len(done) >= want


class WorkerEnd:
    """A worker's side of its control row: wait for the next step (or a command on the pipe), publish a result."""

    def __init__(self, row: np.ndarray, from_trainer: int, to_trainer: int, conn: Any, spin_s: float,
                 backstop_s: float = BACKSTOP_S):
        self.row, self.spin_s, self._backstop_s = row, spin_s, backstop_s
        self._from, self._to = from_trainer, to_trainer
        os.set_blocking(from_trainer, False)
        os.set_blocking(to_trainer, False)
        self._seen = int(row[CMD])
        self._waited_s = 0.0  # as TrainerEnd's
        self._poller = select.poll()
        self._poller.register(from_trainer, _IN)
        self._poller.register(conn.fileno(), _IN)
        self._conn = conn

    def next(self) -> bool:
        """Wait for the trainer's next step (True) or a command on the pipe (False; the pipe is readable)."""
        start = time.monotonic()
        try:
            return self._next()
        finally:
            self._waited_s = time.monotonic() - start

    def _next(self) -> bool:
        if self.spin_s and self._waited_s <= self.spin_s:
            end = time.monotonic() + self.spin_s
            while time.monotonic() < end:
                if self.row[CMD] != self._seen:
                    return self._take()
                os.sched_yield()
        while True:
            if self.spin_s:
                self.row[WORKER_ASLEEP] = 1
                fence()
                if self.row[CMD] != self._seen:
                    self.row[WORKER_ASLEEP] = 0
                    return self._take()
            ready = {fd for fd, _ in self._poller.poll(self._backstop_s * 1000)}
            self.row[WORKER_ASLEEP] = 0
            if self._from in ready:
                drain(self._from)
            if (self.spin_s or self._from in ready) and self.row[CMD] != self._seen:
                return self._take()
            if self._conn.fileno() in ready:
                return False

    def publish(self, has_message: bool) -> None:
        """The step taken by `next` is done (its outputs written); STATUS says whether a message follows."""
        self.row[STATUS] = int(has_message)
        post(self.row, DONE, self._seen, TRAINER_ASLEEP, self._to, self.spin_s)

    def _take(self) -> bool:
        self._seen += 1
        return True
