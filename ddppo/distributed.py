"""The distributed context: rank discovery, process groups, and every collective.

One code path: a single process is a process group of size 1 (backed by an
in-memory store), so the trainer never branches on "distributed or not".

Collectives per update, identical on every rank and in the same order:
  1. `rollout_barrier`         - end of collection (its wait time is the straggler wait)
  2. `all_reduce_sums`         - advantage statistics (sum, sum of squares, count), once, before the
                                 epochs (when ppo.normalize_advantage with GAE, the same on every rank)
  3. `all_reduce_async`        - gradient buckets, once per minibatch (epochs x num_mini_batch), launched
                                 from autograd hooks as backward fills them, in bucket order (gradsync.py)
  4. `all_gather_stats`        - episode stats, losses, timings and the stop flag
(+ `gather_objects` on checkpoint updates, which every rank knows in advance).
Waits that are not collectives (ranks arriving minutes apart, e.g. evaluation's `wait_for_ranks`) go through
the store, every call bounded by dist.timeout_s and the whole wait by a deadline.
What the launcher says (rank, world, rendezvous address) is read in launch.py.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import datetime
import logging
import os
import queue
import signal
import socket
import sys
import threading
import time
from typing import Any, Callable, Iterator

import numpy as np
import torch
import torch.distributed as dist

from ddppo import rendezvous
from ddppo.launch import Launch, expand_first_host, read_launch  # noqa: F401  (re-exported)

log = logging.getLogger(__name__)


class PeerLostError(RuntimeError):
    """A collective failed because another rank died or stopped answering."""


# What a wait that ran out raises. Before Python 3.11 `Future.result(timeout)` raises
# concurrent.futures.TimeoutError, which is neither the builtin TimeoutError nor a RuntimeError;
# from 3.11 on both names are the builtin. Catch this tuple, never one of them alone.
WAIT_TIMEOUT_ERRORS = (TimeoutError, concurrent.futures.TimeoutError)


def rank_seed(seed: int, rank: int) -> int:
    """A well-mixed per-rank seed derived from the run seed."""
    return int(np.random.SeedSequence([seed, rank]).generate_state(1)[0])


class _BoundedCaller:
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
                 run_seed: int, timeout_s: float):
        self.launch = launch
        self.rank = launch.rank
        self.world_size = launch.world_size
        self.local_rank = launch.local_rank
        self.device = device
        self.backend = backend
        self.store = store
        self.seed = rank_seed(run_seed, launch.rank)
        self._timeout_s = timeout_s
        self._group: Any = None  # default group (start-up timeout) until `mark_started`
        self._store_call = _BoundedCaller()
        # collectives go through CPU tensors on gloo, device tensors on nccl
        self.comm_device = device if backend == "nccl" else torch.device("cpu")

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    # ------------------------------------------------------------------ setup
    def mark_started(self) -> None:
        """Switch to the shorter training timeout once the first update has run."""
        if self._group is None:
            with _native_stdout_to_stderr():
                self._group = dist.new_group(backend=self.backend,
                                             timeout=datetime.timedelta(seconds=self._timeout_s))

    def broadcast_module(self, module: torch.nn.Module) -> None:
        """Copy every parameter and buffer from rank 0 (at start and after resume)."""
        with self.guard("broadcast of the parameters"):
            for tensor in list(module.parameters()) + list(module.buffers()):
                buf = tensor.data.to(self.comm_device)
                dist.broadcast(buf, src=0, group=self._group)
                tensor.data.copy_(buf)

    # ------------------------------------------------------------ collectives
    def rollout_barrier(self, steps_collected: int) -> torch.Tensor:
        """End of collection on every rank; returns each rank's collected step count."""
        t = torch.tensor([float(steps_collected)], device=self.comm_device)
        return self._gather(t, "end-of-rollout sync")[:, 0]

    def all_reduce_async(self, buf: torch.Tensor, what: str) -> tuple[Any, torch.Tensor]:
        """Start a sum all-reduce of `buf` over all ranks; (work handle, buffer) for `wait_async`.

        The gradient buckets of ddppo/gradsync.py go through here, launched in the same order on every rank.
        """
        buf = buf.to(self.comm_device)
        with self.guard(what):
            return dist.all_reduce(buf, group=self._group, async_op=True), buf

    def wait_async(self, handle: tuple[Any, torch.Tensor], what: str) -> torch.Tensor:
        """The summed buffer of an `all_reduce_async`, once it has arrived."""
        work, buf = handle
        with self.guard(what):
            work.wait()
        return buf

    def all_reduce_sums(self, values: torch.Tensor, what: str) -> torch.Tensor:
        """Element-wise sum over all ranks of a small 1-D vector, in float64, on every rank (CPU).

        One all-reduce; with one rank the vector itself (nothing to send).
        """
        t = values.detach().to(self.comm_device, torch.float64)
        if self.world_size > 1:
            with self.guard(what):
                dist.all_reduce(t, group=self._group)
        return t.cpu()

    def all_gather_stats(self, values: torch.Tensor) -> torch.Tensor:
        """Every rank's 1-D float64 stats vector, stacked (world_size, K), on every rank."""
        return self._gather(values.to(self.comm_device, torch.float64), "stats all-gather").cpu()

    def broadcast_object(self, obj: Any) -> Any:
        """Rank 0's picklable `obj`, on every rank (start-up decisions such as which checkpoint)."""
        box = [obj]
        with self.guard("broadcast of a start-up decision"):
            dist.broadcast_object_list(box, src=0, group=self._group)
        return box[0]

    def gather_objects(self, obj: Any) -> list[Any] | None:
        """Picklable per-rank objects gathered on rank 0 (None elsewhere)."""
        out = [None] * self.world_size if self.is_main else None
        with self.guard("gather of per-rank state"):
            dist.gather_object(obj, out, dst=0, group=self._group)
        return out

    def _gather(self, t: torch.Tensor, what: str) -> torch.Tensor:
        if self.world_size == 1:  # nothing to exchange
            return t.unsqueeze(0)
        out = [torch.empty_like(t) for _ in range(self.world_size)]
        with self.guard(what):
            dist.all_gather(out, t, group=self._group)
        return torch.stack(out)

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
        """Turn a failed collective into PeerLostError naming the lost rank(s) when it can."""
        try:
            yield
        except PeerLostError:
            raise
        except (RuntimeError, dist.DistError, *WAIT_TIMEOUT_ERRORS) as err:  # DistBackendError, timeouts, closed
            if self.world_size == 1:
                raise
            raise PeerLostError(f"rank {self.rank}: {what} failed: {self._lost_ranks()} "
                                f"({str(err).splitlines()[0][:300]})") from err

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


def choose_device(setting: str, local_rank: int) -> torch.device:
    if setting == "cpu" or (setting == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise RuntimeError("dist.device=cuda but CUDA is not available; use dist.device=auto or cpu")
    device = torch.device("cuda", local_rank % torch.cuda.device_count())
    torch.cuda.set_device(device)
    return device


def _store_listen_fd(launch: Launch) -> int | None:
    """A single-node job's store listens only on the address MASTER_ADDR resolves to (every rank, on this
    one host, resolves it alike), not on all interfaces as TCPStore does by itself; a multi-node job's
    store keeps listening everywhere, since other hosts must reach it (None), and so does a job started by
    hand without LOCAL_WORLD_SIZE (its ranks may be anywhere)."""
    if not launch.single_node:
        return None
    try:
        family, _, _, _, addr = socket.getaddrinfo(launch.master_addr, launch.master_port,
                                                   type=socket.SOCK_STREAM)[0]
    except OSError:
        return None  # TCPStore reports the unresolvable address itself
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(addr)
        sock.listen(max(128, launch.world_size))
    except OSError as err:
        sock.close()
        raise RuntimeError(f"cannot host the rendezvous store at MASTER_ADDR={launch.master_addr} "
                           f"MASTER_PORT={launch.master_port}: {err}") from None
    return sock.detach()  # the store owns the socket from here


@contextlib.contextmanager
def _native_stdout_to_stderr() -> Iterator[None]:
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


def _store_backend_kwargs(listen_fd: int | None) -> dict[str, Any]:
    """torch 2.4-2.7's libuv store (their default) refuses a listening socket with NotImplementedError;
    their legacy store takes it, and from torch 2.8 on the libuv store does too."""
    if listen_fd is not None and torch.__version__ < (2, 8):
        return {"use_libuv": False}
    return {}


def init_distributed(backend: str, device_setting: str, timeout_s: float, startup_timeout_s: float,
                     run_seed: int, launch: Launch | None = None) -> DistContext:
    """Rendezvous and create the process group; returns this rank's context."""
    launch = launch or read_launch()
    device = choose_device(device_setting, launch.local_rank)
    if backend == "auto":
        backend = "nccl" if device.type == "cuda" else "gloo"
    if backend == "nccl" and device.type != "cuda":
        raise RuntimeError("dist.backend=nccl needs CUDA devices; use dist.backend=auto or gloo on CPU")
    startup = datetime.timedelta(seconds=startup_timeout_s)

    def build_store() -> dist.Store:
        if launch.world_size == 1:
            return dist.HashStore()
        is_server = launch.rank == 0 and not launch.agent_store
        listen_fd = _store_listen_fd(launch) if is_server else None
        return dist.TCPStore(launch.master_addr, launch.master_port, launch.world_size, is_server,
                             timeout=startup, wait_for_workers=False, master_listen_fd=listen_fd,
                             **_store_backend_kwargs(listen_fd))

    def join(base: dist.Store) -> dist.Store:
        # namespaced per attempt: keys of a crashed attempt can never be read by the next
        store = dist.PrefixStore(f"ddppo/{launch.attempt}/", base)
        if launch.world_size > 1:
            rendezvous.choose_socket_interface(launch, backend, store)
        kwargs: dict[str, Any] = {"device_id": device} if backend == "nccl" else {}
        with _native_stdout_to_stderr():
            dist.init_process_group(backend, store=dist.PrefixStore("pg/", store), rank=launch.rank,
                                    world_size=launch.world_size, timeout=startup, **kwargs)
        return store

    # store and group are made on a helper thread, watched from here (signals, lost ranks, one-line errors)
    store = rendezvous.watched(launch, f"ddppo/{launch.attempt}/rdzv/", timeout_s, build_store, join)
    log.info("rank %d/%d (local %d) up via %s: backend=%s device=%s", launch.rank, launch.world_size,
             launch.local_rank, launch.source, backend, device)
    return DistContext(launch, device, backend, store, run_seed, timeout_s)


def _leave_during_startup(launch: Launch, err: Exception) -> None:
    """One line on stderr, then exit at once: the rendezvous thread may still be blocked in native code.
    A failed rendezvous exits 1; a signal 128 + its number, as if it had killed the process."""
    if isinstance(err, rendezvous.RendezvousInterrupted):
        name = signal.Signals(err.signum).name
        line = (f"rank {launch.rank}: {name} during the rendezvous at MASTER_ADDR={launch.master_addr} "
                f"MASTER_PORT={launch.master_port}; exiting (nothing to save yet)")
        code = 128 + err.signum
    else:
        line, code = str(err), 1
    logging.shutdown()
    sys.stderr.write(f"ddppo: {line}\n")
    sys.stderr.flush()
    os._exit(code)


def torch_threads(setting: int, launch: Launch, environ: dict[str, str] | None = None,
                  usable_cpus: int | None = None) -> int:
    """Intra-op threads for this rank: `setting` if > 0, else the cores this rank owns.

    The cores a rank owns: the CPUs this process may run on (its affinity mask: a SLURM or cgroup cpuset,
    taskset), shared by the ranks of this node (torchrun, by hand) unless SLURM gave each task its own
    (SLURM_CPUS_PER_TASK): cpus // ranks per node, or min(cpus, cpus per task). At least 1.
    """
    env = os.environ if environ is None else environ
    if setting > 0:
        return setting
    if usable_cpus is None:
        usable_cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    per_task = env.get("SLURM_CPUS_PER_TASK", "")
    if launch.source == "slurm" and per_task.isdigit() and int(per_task) > 0:
        return max(1, min(usable_cpus, int(per_task)))
    return max(1, usable_cpus // launch.local_world_size)


def run_in_process_group(cfg, launch: Launch, body) -> int:
    """Set threads, join the process group, run `body(ctx) -> exit code`, always leave the group.

    A lost peer ends the process at once with exit code 1 (never waiting on a group whose peer is gone);
    torchrun --max-restarts or a SLURM requeue then resumes from the last checkpoint.
    """
    torch.set_num_threads(torch_threads(cfg.run.torch_threads, launch))
    if cfg.run.deterministic:
        torch.use_deterministic_algorithms(True)
    try:
        ctx = init_distributed(cfg.dist.backend, cfg.dist.device, cfg.dist.timeout_s, cfg.dist.startup_timeout_s,
                               cfg.run.seed, launch)
    except (rendezvous.RendezvousError, rendezvous.RendezvousInterrupted) as err:
        _leave_during_startup(launch, err)
    try:
        return body(ctx)
    except PeerLostError as err:
        log.error("%s; exiting (torchrun --max-restarts or a SLURM requeue resumes from the last checkpoint)", err)
        logging.shutdown()
        os._exit(1)
    finally:
        ctx.close()
