"""Helper processes leave the job's signals to the rank that started them.

SLURM (scancel, preemption, the time limit, `scancel -s USR1`), `timeout` and `kill -TERM -PGID` signal every
process of the job, not only the rank. multiprocessing's helpers die of SIGTERM or SIGUSR1 (the default
action): the forkserver (every env worker then reads as dead to the rank, exit code 255, before it could save)
and the resource tracker (SIGUSR1; the next shared-memory call starts a new one, which prints a KeyError
traceback). So the rank starts them with these signals blocked: the resource tracker ignores SIGINT/SIGTERM
itself and keeps SIGUSR1 blocked for good; the forkserver imports `ddppo.envs.runtime.forkserver_init` first,
which ignores all three before unblocking them, and the env workers it forks inherit that from their first
instruction.

A signal that arrives at the rank meanwhile stays pending and reaches the rank's handler once unblocked.
"""

from __future__ import annotations

import contextlib
import signal
from multiprocessing import forkserver, resource_tracker
from typing import Iterator

JOB_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1)


@contextlib.contextmanager
def blocked_job_signals() -> Iterator[None]:
    old = signal.pthread_sigmask(signal.SIG_BLOCK, JOB_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def start_sheltered_helpers(start_method: str) -> None:
    """Start (if not running) the resource tracker and, for "forkserver", the forkserver, with JOB_SIGNALS
    blocked. Two steps: Python 3.12+'s tracker start unblocks SIGINT/SIGTERM when it is done."""
    with blocked_job_signals():
        resource_tracker.ensure_running()
    if start_method == "forkserver":
        with blocked_job_signals():
            forkserver.ensure_running()


def ignore_job_signals() -> None:
    """This process (a helper) ignores JOB_SIGNALS, then unblocks them (pending ones are discarded)."""
    for sig in JOB_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, JOB_SIGNALS)
