"""The generation: the store namespace of one start of the job, which every rank of that start agrees on.

Keys of a crashed start (its rendezvous heartbeats and failure notes, its preemption counters) must never be read
by the next. The store can outlive a start: torchrun's agent hosts it across restarts. The start cannot be told
from TORCHELASTIC_RESTART_COUNT, which each node's agent counts for itself: when a rank on node B dies, B's agent
counts a restart and node A's restarts its workers as a membership change without counting, so one start would
run on two namespaces, and its rendezvous waits for peers that are on the other one.

So rank 0 of every start takes the next generation from a counter in the store and hands it to each other rank
in reply to a greeting that only the greeter can have written (a fresh random nonce): a reply to it comes from
the rank 0 that is alive now, never from a crashed start's. (Every process of a start has exited before torchrun,
or SLURM, starts the next.) The other ranks greet, then wait for the reply; rank 0 answers every greeting from
its own store client on a thread, until its process group is up (every rank has then had its reply).
"""

from __future__ import annotations

import datetime
import logging
import threading
import uuid
from typing import Any, Callable

import torch.distributed as dist

from ddppo.distributed.launch import Launch

log = logging.getLogger(__name__)

COUNTER = "ddppo/generation"
GREETINGS = "ddppo/greeting"  # GREETINGS/count: how many were written; GREETINGS/<i>: the i-th greeter's nonce
SERVED = "ddppo/greeting/served"  # how many greetings an earlier rank 0 had answered: the next starts there
REPLY = "ddppo/generation/reply/"  # REPLY + nonce: the generation, for the one greeter who wrote that nonce
POLL_S = 0.05


def namespace(generation: int) -> str:
    return f"ddppo/{generation}/"


def agree(launch: Launch, store: Any, timeout_s: float) -> tuple[int, Callable[[], None]]:
    """(this start's generation, a function to call once the process group is up, or on failure).

    Blocks a rank other than 0 until rank 0 has answered (or `timeout_s`: TimeoutError)."""
    if launch.world_size == 1:
        return 0, lambda: None
    if launch.rank == 0:
        generation = int(store.add(COUNTER, 1))
        host = _Host(launch, generation, timeout_s)
        return generation, host.stop
    nonce = uuid.uuid4().hex
    index = int(store.add(f"{GREETINGS}/count", 1))
    store.set(f"{GREETINGS}/{index}", nonce)
    try:
        store.wait([REPLY + nonce], datetime.timedelta(seconds=timeout_s))
    except Exception as err:  # the rendezvous reports it in one line (a store gone away: as it is)
        if "timeout" not in str(err).lower() and "timed out" not in str(err).lower():
            raise
        raise TimeoutError(f"rank 0 did not hand out this start's generation within {timeout_s:g} s "
                           f"(dist.startup_timeout_s): {err}".splitlines()[0]) from None
    generation = int(store.get(REPLY + nonce))
    store.delete_key(REPLY + nonce)
    return generation, lambda: None


class _Host:
    """Rank 0's side: answers every greeting with the generation, on a thread with its own store client (the
    rendezvous thread's client is held by the process group's long waits)."""

    def __init__(self, launch: Launch, generation: int, timeout_s: float):
        self.generation = generation
        self._stop = threading.Event()
        self._client = dist.TCPStore(launch.master_addr, launch.master_port, is_master=False,
                                     timeout=datetime.timedelta(seconds=timeout_s))
        self._thread = threading.Thread(target=self._serve, name="ddppo-generation", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        store = self._client
        served = int(store.get(SERVED)) if store.check([SERVED]) else 0
        waiting: set[int] = set()  # greeters that took an index but have not written their nonce yet
        try:
            while not self._stop.is_set():
                count = int(store.add(f"{GREETINGS}/count", 0))
                waiting.update(range(served + 1, count + 1))
                served = max(served, count)
                for index in sorted(waiting):
                    if store.check([f"{GREETINGS}/{index}"]):
                        nonce = store.get(f"{GREETINGS}/{index}").decode()
                        store.set(REPLY + nonce, str(self.generation))
                        store.delete_key(f"{GREETINGS}/{index}")
                        waiting.discard(index)
                self._stop.wait(POLL_S)
            store.set(SERVED, str(min(waiting, default=served + 1) - 1))
        except Exception as err:  # the store went away: the rendezvous reports it
            log.debug("generation host stopped: %s", err)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5.0)
