"""DistContext: this rank's place in the job and the only door to collectives; every failure names the rank.

gloo and NCCL fail alike: every collective is waited for inside `guard`, on this thread, for at most the
group's timeout (dist.startup_timeout_s until the first update has run, then dist.timeout_s). On NCCL that
holds because each rank creates its groups under TORCH_NCCL_BLOCKING_WAIT=1 (cuda.prepare_nccl): a work's
wait() then blocks until the collective is done and raises DistBackendError when it failed or ran out of time,
instead of only queueing a stream wait whose stall would surface later in some host read, outside every guard.
Two more things make every NCCL wait such a wait: each collective here is issued with async_op=True and its
work waited for (from torch 2.8 on a synchronous NCCL collective returns no work at all, so nothing would
block), and pickled objects (start-up decisions, per-rank checkpoint state) go through a gloo group on the
host (torch's object collectives are synchronous ones), made next to the NCCL group with the same timeouts.

Native calls with no bound of their own (NCCL's abort inside a timed-out wait, the communicator split of
`mark_started`) run under a last-resort deadline of the group's timeout + deadline.EXIT_MARGIN_S, and a rank
whose guard has named a lost peer is gone within dist.timeout_s + that margin (ddppo/distributed/deadline.py).

Every collective runs on a named group: a role's ranks (ddppo/distributed/placement.py), `train` unless the call
names another. Under the colocated default `train` is every rank, and its group is made as the one group was
before roles existed: the default group until `mark_started`, then a new group over every rank.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import datetime
import logging
import os
import sys
import time
from typing import Any, Callable, Iterator

import numpy as np
import torch
import torch.distributed as dist

import ddppo.distributed.deadline as deadline
from ddppo.distributed.launch import Launch
from ddppo.distributed.placement import TRAIN, Group, Placement
from ddppo.distributed.store import WAIT_TIMEOUT_ERRORS, BoundedCaller

log = logging.getLogger("ddppo.distributed")


class PeerLostError(RuntimeError):
    """A collective failed because another rank died or stopped answering."""


def rank_seed(seed: int, rank: int) -> int:
    """A well-mixed per-rank seed derived from the run seed."""
    return int(np.random.SeedSequence([seed, rank]).generate_state(1)[0])


@contextlib.contextmanager
def native_stdout_to_stderr() -> Iterator[None]:
    """Send what native code writes to stdout (file descriptor 1) to stderr while creating a group.

    torch 2.8's gloo (the newest torch for Python 3.9) prints "[Gloo] Rank r is connected to n peer
    ranks..." on stdout for every group it creates; stdout is for results (`ddppo eval`, `ddppo config`),
    diagnostics go to stderr."""
    sys.stdout.flush()
    try:
        saved = os.dup(1)
    except OSError:  # no stdout at all: nothing to keep clean
        yield
        return
    try:
        os.dup2(2, 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


class PendingRead:
    """A store read running on the store thread while this rank goes on working.

    `value()` is None while the store has not answered, the counter once it has; a read still unanswered
    after dist.timeout_s, or a failed one, is a PeerLostError, as for a blocking store call."""

    def __init__(self, ctx: DistContext, future: concurrent.futures.Future, what: str):
        self._ctx, self._future, self._what = ctx, future, what
        self._deadline = time.monotonic() + ctx._timeout_s

    def value(self) -> int | None:
        if not self._future.done():
            if time.monotonic() > self._deadline:
                raise self._ctx.silent_store_error(f"{self._what} failed")
            return None
        with self._ctx.guard(self._what):
            return int(self._future.result())


class DistContext:
    """This rank's place in the job and the collectives it takes part in."""

    def __init__(self, launch: Launch, device: torch.device, backend: str, store: dist.Store,
                 run_seed: int, timeout_s: float, object_group: Any = None, startup_timeout_s: float | None = None,
                 placement: Placement | None = None):
        self.launch = launch
        self.rank = launch.rank
        self.world_size = launch.world_size
        self.local_rank = launch.local_rank
        self.device = device
        self.backend = backend
        self.store = store
        self.seed = rank_seed(run_seed, launch.rank)
        self._timeout_s = timeout_s
        self._startup_timeout_s = timeout_s if startup_timeout_s is None else startup_timeout_s
        self._store_call = BoundedCaller()
        # collectives go through CPU tensors on gloo, device tensors on nccl
        self.comm_device = device if backend == "nccl" else torch.device("cpu")
        self.placement = placement or Placement.colocated(self.world_size)
        if self.placement.world_size != self.world_size:
            raise ValueError(f"a placement for {self.placement.world_size} ranks in a job of {self.world_size}")
        self.role = self.placement.role_of(self.rank)
        self._seen = {name: self.placement.group(name, self.rank) for name in self.placement.roles}
        self._started = False  # `mark_started`: the groups with the training timeout exist
        self._object_side = object_group is not None  # NCCL: pickled objects go through a gloo twin of each group
        self._groups = self._startup_groups(object_group)  # role -> (collectives' group, objects' group or None)

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def group(self, name: str = TRAIN) -> Group:
        """The named group (a role's ranks) as this rank sees it: its ranks, its size, this rank's place in it."""
        return self._seen[name] if name in self._seen else self.placement.group(name, self.rank)  # the latter raises

    # ------------------------------------------------------------------ setup
    def _startup_groups(self, object_group: Any) -> dict[str, tuple[Any, Any]]:
        """The groups until `mark_started`: a role on every rank uses the default group (and the objects' group
        init_distributed made), with the start-up timeout; a role on some ranks gets groups of its own now."""
        if all(self.placement.spans_world(name) for name in self.placement.roles):
            return {name: (None, object_group) for name in self.placement.roles}
        what = "creation of the start-up groups"
        with self.guard(what), self._native(what), native_stdout_to_stderr():
            return {name: (None, object_group) if self.placement.spans_world(name)
                    else self._new_group(name, self._startup_timeout_s) for name in self.placement.roles}

    def _new_group(self, name: str, timeout_s: float) -> tuple[Any, Any]:
        """Role `name`'s (collectives' group, objects' group or None) with `timeout_s`. Every rank makes every
        role's groups, in the placement's order (torch's rule for new_group), members or not."""
        timeout = datetime.timedelta(seconds=timeout_s)
        members = None if self.placement.spans_world(name) else list(self.placement.ranks(name))
        group = dist.new_group(members, backend=self.backend, timeout=timeout)
        return group, dist.new_group(members, backend="gloo", timeout=timeout) if self._object_side else None

    def mark_started(self) -> None:
        """Switch to the shorter training timeout once the first update has run: every role's groups anew."""
        if not self._started:
            what = "creation of the training group"
            with self.guard(what), self._native(what, self._timeout_s), native_stdout_to_stderr():
                self._groups = {name: self._new_group(name, self._timeout_s) for name in self.placement.roles}
            self._started = True

    def broadcast_module(self, module: torch.nn.Module, group: str = TRAIN) -> None:
        """Copy every parameter and buffer from the group's first rank (at start and after resume)."""
        pg, src = self._handles(group)[0], self.group(group).ranks[0]
        with self.guard("broadcast of the parameters"), self._native("broadcast of the parameters"):
            sent = []
            for tensor in list(module.parameters()) + list(module.buffers()):
                buf = tensor.data.to(self.comm_device)
                sent.append((tensor, buf, dist.broadcast(buf, src=src, group=pg, async_op=True)))
            for tensor, buf, work in sent:
                work.wait()
                tensor.data.copy_(buf)

    # ------------------------------------------------------------ collectives
    def rollout_barrier(self, steps_collected: int, group: str = TRAIN) -> torch.Tensor:
        """End of collection on every rank of the group; returns each one's collected step count."""
        t = torch.tensor([float(steps_collected)], device=self.comm_device)
        return self._gather(t, "end-of-rollout sync", group)[:, 0]

    def all_reduce_async(self, buf: torch.Tensor, what: str, group: str = TRAIN) -> tuple[Any, torch.Tensor]:
        """Start a sum all-reduce of `buf` over the group's ranks; (work handle, buffer) for `wait_async`.

        The gradient buckets of ddppo/distributed/buckets.py go through here, launched in the same order on every rank.
        """
        buf = buf.to(self.comm_device)
        pg = self._handles(group)[0]
        with self.guard(what), self._native(what):
            return dist.all_reduce(buf, group=pg, async_op=True), buf

    def wait_async(self, handle: tuple[Any, torch.Tensor], what: str) -> torch.Tensor:
        """The summed buffer of an `all_reduce_async`, once it has arrived (on NCCL the wait blocks this
        thread: see the module docstring)."""
        work, buf = handle
        with self.guard(what), self._native(what):
            work.wait()
        return buf

    def all_reduce_sums(self, values: torch.Tensor, what: str, group: str = TRAIN) -> torch.Tensor:
        """Element-wise sum over the group's ranks of a small 1-D vector, in float64, on each of them (CPU).

        One all-reduce; with one rank the vector itself (nothing to send).
        """
        t = values.detach().to(self.comm_device, torch.float64)
        if self.group(group).size > 1:
            pg = self._handles(group)[0]
            with self.guard(what), self._native(what):
                dist.all_reduce(t, group=pg, async_op=True).wait()
        return t.cpu()

    def all_gather_stats(self, values: torch.Tensor, group: str = TRAIN) -> torch.Tensor:
        """Each of the group's ranks' 1-D float64 stats vector, stacked (group size, K), on each of them."""
        return self._gather(values.to(self.comm_device, torch.float64), "stats all-gather", group).cpu()

    def broadcast_object(self, obj: Any, group: str = TRAIN) -> Any:
        """The group's first rank's picklable `obj`, on each of its ranks (start-up decisions such as which
        checkpoint)."""
        box, src = [obj], self.group(group).ranks[0]
        objects = self._objects(group)
        with self.guard("broadcast of a start-up decision"), self._native("broadcast of a start-up decision"):
            dist.broadcast_object_list(box, src=src, group=objects)
        return box[0]

    def decide_on_main(self, decide: Callable[[], Any] | None, errors: tuple[type[Exception], ...] = (),
                       group: str = TRAIN) -> Any:
        """The group's first rank calls `decide` (None elsewhere); each of its ranks returns its picklable value, or
        raises the same error of one of the `errors` types, with that rank's message, where `decide` raised it.
        One broadcast."""
        outcome = None
        if self.group(group).is_main:
            try:
                outcome = ("ok", decide())
            except errors as err:
                outcome = ("error", next(i for i, e in enumerate(errors) if isinstance(err, e)), str(err))
        outcome = self.broadcast_object(outcome, group)
        if outcome[0] == "error":
            raise errors[outcome[1]](outcome[2])
        return outcome[1]

    def gather_objects(self, obj: Any, group: str = TRAIN) -> list[Any] | None:
        """Picklable per-rank objects of the group gathered on its first rank (None elsewhere)."""
        g = self.group(group)
        out = [None] * g.size if g.is_main else None
        objects = self._objects(group)
        with self.guard("gather of per-rank state"), self._native("gather of per-rank state"):
            dist.gather_object(obj, out, dst=g.ranks[0], group=objects)
        return out

    def _gather(self, t: torch.Tensor, what: str, group: str) -> torch.Tensor:
        size = self.group(group).size
        if size == 1:  # nothing to exchange
            return t.unsqueeze(0)
        pg = self._handles(group)[0]
        out = [torch.empty_like(t) for _ in range(size)]
        with self.guard(what), self._native(what):
            dist.all_gather(out, t, group=pg, async_op=True).wait()
        return torch.stack(out)

    def _handles(self, group: str) -> tuple[Any, Any]:
        """The group's (collectives' group, objects' group or None); only its own ranks may call its collectives."""
        if self.group(group).rank < 0:
            raise RuntimeError(f"rank {self.rank} ({self.role}) called a collective of the group {group!r}, which "
                               f"it is not in (ranks {list(self.placement.ranks(group))})")
        return self._groups[group]

    def _objects(self, group: str = TRAIN) -> Any:
        collectives, objects = self._handles(group)
        return objects if objects is not None else collectives

    # ------------------------------------------------------- preemption store
    def add_to_counter(self, key: str, amount: int) -> int:
        what = f"store counter {key}"
        with self.guard(what):
            return int(self._bounded_store(lambda: self.store.add(key, amount), f"{what} failed"))

    def start_counter_read(self, key: str) -> PendingRead:
        """Read a store counter without waiting for the answer (see PendingRead)."""
        what = f"store counter {key}"
        return PendingRead(self, self._store_call.submit(lambda: self.store.add(key, 0)), what)

    def _bounded_store(self, fn: Callable[[], Any], what: str) -> Any:
        """`fn()` (a store call) bounded by dist.timeout_s; a store that does not answer is a PeerLostError."""
        try:
            return self._store_call(fn, self._timeout_s)
        except WAIT_TIMEOUT_ERRORS:
            raise self.silent_store_error(what) from None

    def silent_store_error(self, what: str) -> PeerLostError:
        return PeerLostError(f"rank {self.rank}: {what}: the rendezvous store did not answer within "
                             f"dist.timeout_s={self._timeout_s:g} s (its host, rank 0 or the launcher, may be hung)")

    def wait_for_ranks(self, key: str, deadline_s: float, what: str, note_every_s: float = 300.0) -> None:
        """Return once every rank has called this with `key`. The wait runs through the store, not a
        collective, since ranks may arrive minutes apart (longer than a collective's timeout); each store call
        is bounded by dist.timeout_s and the whole wait by `deadline_s`: past it, PeerLostError names the
        ranks that never arrived (a hung or dead rank cannot block the others forever)."""
        if self.world_size == 1:
            return

        with self.guard(what):
            self._bounded_store(lambda: self.store.set(f"{key}/{self.rank}", "1"), what)
            start = last_note = time.monotonic()
            while True:
                missing = self._bounded_store(
                    lambda: [r for r in range(self.world_size) if not self.store.check([f"{key}/{r}"])], what)
                if not missing:
                    return
                now = time.monotonic()
                if now - start > deadline_s:
                    raise PeerLostError(f"rank {self.rank}: {what}: rank(s) {missing} did not arrive within "
                                        f"{deadline_s:g} s (hung or lost)")
                if now - last_note > note_every_s:
                    log.info("%s: waiting for rank(s) %s", what, missing)
                    last_note = now
                time.sleep(0.2)

    def delete_key(self, key: str) -> None:
        with contextlib.suppress(Exception):
            self._store_call(lambda: self.store.delete_key(key), self._timeout_s)

    # ----------------------------------------------------------------- faults
    @contextlib.contextmanager
    def guard(self, what: str) -> Iterator[None]:
        """Turn a failed collective into PeerLostError naming the lost rank(s) when it can; from then on this
        rank is leaving, within dist.timeout_s + deadline.EXIT_MARGIN_S (deadline.arm_exit)."""
        try:
            yield
        except PeerLostError as err:
            deadline.arm_exit(self.rank, self._timeout_s, 1, str(err))
            raise
        except (RuntimeError, dist.DistError, *WAIT_TIMEOUT_ERRORS) as err:  # DistBackendError, timeouts, closed
            if self.world_size == 1:
                raise
            lost = PeerLostError(f"rank {self.rank}: {what} failed: {self._lost_ranks()} "
                                 f"({str(err).splitlines()[0][:300]})")
            deadline.arm_exit(self.rank, self._timeout_s, 1, str(lost))
            raise lost from err

    def _native(self, what: str, timeout_s: float | None = None) -> Any:
        """The last-resort bound of a blocking native call: the group's timeout (the start-up one until
        `mark_started`) + deadline.EXIT_MARGIN_S, then exit 1 naming `what`."""
        if timeout_s is None:
            timeout_s = self._timeout_s if self._started else self._startup_timeout_s
        bound = timeout_s + deadline.EXIT_MARGIN_S
        return deadline.bounded(bound, 1, f"rank {self.rank}: {what} did not return within {bound:g} s (the "
                                          f"group's timeout + {deadline.EXIT_MARGIN_S:g} s): a native call hangs "
                                          f"(a lost peer); exiting with code 1")

    def _lost_ranks(self) -> str:
        """Ask the survivors to check in through the store; whoever does not is lost."""
        wait_s = min(10.0, self._timeout_s)
        try:
            missing = self._store_call(lambda: self._check_in(wait_s), wait_s + 1.0)
        except Exception:  # unreachable (dead host) or not answering (hung host)
            return ("a peer rank was lost, and the rendezvous store is unreachable "
                    "(rank 0, which hosts it, may be the one that died or hangs)")
        if missing:
            return f"peer rank(s) {missing} lost (they did not check in after the failure)"
        return "a peer rank failed"

    def _check_in(self, wait_s: float) -> list[int]:
        """Check in under this 10 s window and the next; ranks that do not within `wait_s` are returned.

        Survivors whose failures straddle a window boundary still meet in the later window.
        """
        window = time.time_ns() // 10**10
        keys = (f"alive/{window}", f"alive/{window + 1}")
        for key in keys:
            self.store.set(f"{key}/{self.rank}", "1")
        deadline = time.monotonic() + wait_s
        missing = list(range(self.world_size))
        while missing:
            missing = [r for r in missing if not any(self.store.check([f"{k}/{r}"]) for k in keys)]
            if not missing or time.monotonic() >= deadline:
                break
            time.sleep(0.2)
        return missing

    def close(self) -> None:
        if dist.is_initialized():
            with contextlib.suppress(Exception):
                dist.destroy_process_group()


