"""Joining the job: device choice, the store, the process group, torch threads, and leaving cleanly."""

from __future__ import annotations

import dataclasses
import datetime
import logging
import os
import signal
import socket
import sys
from typing import Any

import torch
import torch.distributed as dist

import ddppo.distributed.rendezvous as rendezvous
import ddppo.distributed.deadline as deadline
from ddppo import watchdog
from ddppo.distributed.cuda import agree_backend, choose_device_or_why, prepare_deterministic, prepare_nccl
from ddppo.distributed.context import DistContext, PeerLostError, native_stdout_to_stderr
from ddppo.distributed.launch import Launch, read_launch
from ddppo.distributed.placement import Placement, resolve
from ddppo.distributed.torch_env import check_nccl_env

log = logging.getLogger("ddppo.distributed")


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


def _store_backend_kwargs(listen_fd: int | None) -> dict[str, Any]:
    """torch 2.4-2.7's libuv store (their default) refuses a listening socket with NotImplementedError;
    their legacy store takes it, and from torch 2.8 on the libuv store does too."""
    if listen_fd is not None and torch.__version__ < (2, 8):
        return {"use_libuv": False}
    return {}


def init_distributed(backend: str, device_setting: str, timeout_s: float, startup_timeout_s: float,
                     run_seed: int, launch: Launch | None = None, placement: Placement | None = None) -> DistContext:
    """Rendezvous and create the process group; returns this rank's context, whose named groups are the
    `placement`'s roles (None: colocated, `train` on every rank).

    The backend is settled once every rank's GPU is known (cuda.agree_backend), before the group is made: a
    rank without the GPU dist.device=cuda asks for joins anyway and says so there, so every rank leaves (exit 2)
    naming it, not its peers after dist.startup_timeout_s;
    NCCL's failure handling is set up before the first NCCL group (cuda.prepare_nccl)."""
    launch = launch or read_launch()
    device, missing = choose_device_or_why(device_setting, launch.local_rank, launch.world_size)
    if device.type == "cuda" and backend != "gloo":
        check_nccl_env(os.environ)  # torch would refuse it once the group is made, after the rendezvous
    startup = datetime.timedelta(seconds=startup_timeout_s)

    def build_store() -> dist.Store:
        if launch.world_size == 1:
            return dist.HashStore()
        is_server = launch.rank == 0 and not launch.agent_store
        listen_fd = _store_listen_fd(launch) if is_server else None
        return dist.TCPStore(launch.master_addr, launch.master_port, launch.world_size, is_server,
                             timeout=startup, wait_for_workers=False, master_listen_fd=listen_fd,
                             **_store_backend_kwargs(listen_fd))

    side: dict[str, Any] = {}

    def settle_backend(store: dist.Store) -> None:
        nonlocal backend  # what join() creates the group with, and the context is given
        backend = agree_backend(launch, store, backend, device_setting, device, missing)
        if backend == "nccl":
            prepare_nccl()

    def join(store: dist.Store) -> dist.Store:  # `store`: namespaced by this start's generation
        if launch.world_size > 1:
            rendezvous.choose_socket_interface(launch, backend, store)
        settle_backend(store)
        kwargs: dict[str, Any] = {"device_id": device} if backend == "nccl" else {}
        with native_stdout_to_stderr():
            dist.init_process_group(backend, store=dist.PrefixStore("pg/", store), rank=launch.rank,
                                    world_size=launch.world_size, timeout=startup, **kwargs)
            if backend == "nccl" and launch.world_size > 1:  # pickled objects go through gloo (context.py)
                side["objects"] = dist.new_group(backend="gloo", timeout=startup)
        return store

    # store and group are made on a helper thread, watched from here (signals, lost ranks, one-line errors)
    store = rendezvous.watched(launch, timeout_s, startup_timeout_s, build_store, join)
    log.info("rank %d/%d (local %d) up via %s: backend=%s device=%s", launch.rank, launch.world_size,
             launch.local_rank, launch.source, backend, device)
    return DistContext(launch, device, backend, store, run_seed, timeout_s, side.get("objects"), startup_timeout_s,
                       placement)


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
    torchrun --max-restarts or a SLURM requeue then resumes from the last checkpoint. Once `body` has ended
    (returned or raised), the rank is gone within dist.timeout_s + deadline.EXIT_MARGIN_S with its exit code
    if `close` hangs in native code (deadline.py); once `close` has returned the bound is lifted.
    """
    placement = resolve(dataclasses.asdict(cfg.placement), launch.world_size)  # every rank: one ConfigError, exit 2
    if cfg.run.deterministic:
        prepare_deterministic()  # before anything touches CUDA
        torch.use_deterministic_algorithms(True)
    torch.set_num_threads(torch_threads(cfg.run.torch_threads, launch))
    try:
        ctx = init_distributed(cfg.dist.backend, cfg.dist.device, cfg.dist.timeout_s, cfg.dist.startup_timeout_s,
                               cfg.run.seed, launch, placement)
    except (rendezvous.RendezvousError, rendezvous.RendezvousInterrupted) as err:
        _leave_during_startup(launch, err)
    deadline.enable()
    try:
        try:
            rc = body(ctx)
        finally:
            watchdog.disarm()  # armed per update by the loop; the way out has its own bound (deadline)
    except PeerLostError as err:
        log.error("%s; exiting (torchrun --max-restarts or a SLURM requeue resumes from the last checkpoint)", err)
        logging.shutdown()
        os._exit(1)
    except BaseException as err:
        deadline.arm_exit(ctx.rank, cfg.dist.timeout_s, deadline.exit_code(err), f"{type(err).__name__}: {err}")
        raise
    else:
        deadline.arm_exit(ctx.rank, cfg.dist.timeout_s, rc if isinstance(rc, int) else 0, f"finished with {rc}")
        return rc
    finally:
        ctx.close()
        deadline.disable()  # the group is closed: nothing native is left to bound
