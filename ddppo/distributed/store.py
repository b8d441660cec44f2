"""Bounded store calls: every call to the rendezvous store runs on one thread and is waited on with a limit.

A TCPStore client blocks without limit on a store host that is alive but hung; waiting on a helper thread
keeps such a host from hanging this rank. Calls can also be queued without waiting (`submit`).
"""

from __future__ import annotations

import concurrent.futures
import queue
import threading
from typing import Any, Callable

# What a wait that ran out raises. Before Python 3.11 `Future.result(timeout)` raises
# concurrent.futures.TimeoutError, which is neither the builtin TimeoutError nor a RuntimeError;
# from 3.11 on both names are the builtin. Catch this tuple, never one of them alone.
WAIT_TIMEOUT_ERRORS = (TimeoutError, concurrent.futures.TimeoutError)


class BoundedCaller:
    """Runs calls on one daemon thread and waits at most `timeout_s` for each.

    A TCPStore client blocks without limit on a store host that is alive but
    hung (stopped, swapping, stuck on NFS): its socket reads ignore the store's
    timeout. Waiting here instead keeps such a host from hanging this rank.
    """

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def __call__(self, fn: Callable[[], Any], timeout_s: float) -> Any:
        return self.submit(fn).result(timeout=timeout_s)  # one of WAIT_TIMEOUT_ERRORS when the store is silent

    def submit(self, fn: Callable[[], Any]) -> concurrent.futures.Future:
        """Queue `fn` on the store thread (calls run one at a time, in order) and return at once."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, name="ddppo-store", daemon=True)
            self._thread.start()
        future: concurrent.futures.Future = concurrent.futures.Future()
        self._jobs.put((fn, future))
        return future

    def _work(self) -> None:
        while True:
            fn, future = self._jobs.get()
            try:
                future.set_result(fn())
            except BaseException as err:  # handed to the waiting caller
                future.set_exception(err)
