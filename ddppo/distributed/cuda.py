"""What a rank settles before CUDA and NCCL start: its GPU, whether ranks share one, NCCL's failure handling,
and the cuBLAS workspace of deterministic mode.

- GPUs: rank `r` of a node takes `cuda:(LOCAL_RANK % visible GPUs)`. Ranks then publish the UUID of that GPU
  through the rendezvous store, so ranks that landed on one physical GPU are found however the GPUs were
  made visible (all to every rank, or one per task by SLURM's `--gpus-per-task`). NCCL refuses two ranks on
  one GPU ("Duplicate GPU detected"): an explicit request for NCCL (`dist.backend=nccl`, or `dist.device=cuda`
  with `dist.backend=auto`) is then a config error (exit 2); under `dist.device=auto dist.backend=auto` every
  rank falls back to gloo on the GPUs as they are (see `decide_backend`).
- NCCL failures: `WorkNCCL::wait()` only makes the current CUDA stream wait, so a lost peer surfaced as a stall
  in some later host read, and after the timeout NCCL's watchdog aborted the process (no rank named, a core
  dump). With TORCH_NCCL_BLOCKING_WAIT=1 every wait (context.py gives every collective a work to wait for)
  blocks this thread until the collective is done, and a collective not done within the group's timeout
  (dist.timeout_s, as for gloo) or failed raises DistBackendError there, inside DistContext.guard, which names
  the lost rank. torch 2.13 then starts no watchdog (and no heartbeat monitor) for the group at all, so
  TORCH_NCCL_ASYNC_ERROR_HANDLING is not read by anything; older releases ran the watchdog with its tear-down
  off instead, and its flight-recorder dump on timeout aborted the process once it had dumped, so
  TORCH_NCCL_DUMP_ON_TIMEOUT=0 is set beside blocking wait.
- The same under every launcher (see `nccl_failure_env`): blocking wait unless the user set a blocking-wait
  variable. torchrun's agent puts TORCH_NCCL_ASYNC_ERROR_HANDLING=1 into every worker's environment
  (launch.launcher_injected); that is not the user's choice and changes nothing here; srun injects nothing.
"""

from __future__ import annotations

import json
import logging
import os
import socket
from collections import defaultdict
from typing import Any, Mapping, MutableMapping, Sequence

import torch

from ddppo.errors import ConfigError
from ddppo.distributed.launch import Launch, launcher_injected
from ddppo.distributed.torch_env import ASYNC_ERROR_HANDLING, BLOCKING_WAIT, check_nccl_env, cvar_bool

log = logging.getLogger("ddppo.distributed")

DUMP_ON_TIMEOUT = "TORCH_NCCL_DUMP_ON_TIMEOUT"
CUBLAS_WORKSPACE = "CUBLAS_WORKSPACE_CONFIG"
CUBLAS_DETERMINISTIC = ":4096:8"  # 8 buffers of 4 MiB per stream: cuBLAS's documented deterministic setting


def nccl_failure_env(environ: Mapping[str, str]) -> tuple[dict[str, str], str | None]:
    """(variables to set before the first NCCL process group, a warning or None) for `environ`.

    TORCH_NCCL_BLOCKING_WAIT=1 unless the user set a blocking-wait variable (either name; torch reads the new
    name first), and then TORCH_NCCL_DUMP_ON_TIMEOUT=0 unless set. A warning only about the user's own
    settings: a blocking-wait variable that turns it off, or an async-error-handling variable the user set
    (not one the launcher injected: launch.launcher_injected), which blocking wait makes unused. Values are
    read as torch reads them (torch_env); one torch would refuse is a ConfigError naming it."""
    check_nccl_env(environ)
    blocking = cvar_bool(environ, BLOCKING_WAIT, True)
    settings: dict[str, str] = {}
    user_wait = [n for n in BLOCKING_WAIT if n in environ]
    injected = launcher_injected(environ)
    user_async = [n for n in ASYNC_ERROR_HANDLING if n in environ and n not in injected]
    named = "/".join(f"{n}={environ[n]}" for n in user_async)
    warning = None
    if not user_wait:
        settings[BLOCKING_WAIT[0]] = "1"
        if user_async:
            warning = (f"{named} (set in your environment) is not used: ddppo sets TORCH_NCCL_BLOCKING_WAIT=1, "
                       f"under which NCCL runs no watchdog (a lost or hung peer: one line naming it, exit 1); "
                       f"set TORCH_NCCL_BLOCKING_WAIT=0 to keep NCCL's own error handling")
    elif not blocking:
        chosen = [f"{n}={environ[n]}" for n in user_wait] + ([named] if named else [])
        warning = (f"{'/'.join(chosen)} set: a lost or hung peer ends this rank as NCCL's watchdog decides (after "
                   f"the collective timeout, no rank named, exit by abort); unset {'/'.join(user_wait)} for "
                   f"ddppo's one-line error naming the lost rank (exit 1)")
    if blocking and DUMP_ON_TIMEOUT not in environ:
        settings[DUMP_ON_TIMEOUT] = "0"
    return settings, warning


def prepare_nccl(environ: MutableMapping[str, str] | None = None) -> None:
    """Apply `nccl_failure_env` to the process environment (before the first NCCL group is created)."""
    env = os.environ if environ is None else environ
    settings, warning = nccl_failure_env(env)
    env.update(settings)
    if warning:
        log.warning("%s", warning)


def prepare_deterministic(environ: MutableMapping[str, str] | None = None) -> None:
    """cuBLAS's deterministic workspace, unless the user set one; cuBLAS reads it when its first handle is
    made, so this runs before anything touches CUDA (run.deterministic=true)."""
    env = os.environ if environ is None else environ
    env.setdefault(CUBLAS_WORKSPACE, CUBLAS_DETERMINISTIC)


def rank_device(setting: str, local_rank: int, device_count: int) -> torch.device:
    """The device of a rank: cpu, or cuda:(local_rank % device_count); ConfigError for cuda without CUDA."""
    if setting == "cpu" or (setting == "auto" and device_count == 0):
        return torch.device("cpu")
    if device_count == 0:
        raise ConfigError("dist.device=cuda but torch sees no CUDA device (torch.cuda.is_available() is False); "
                          "use dist.device=auto or cpu, or install a CUDA build of torch")
    return torch.device("cuda", local_rank % device_count)


def choose_device(setting: str, local_rank: int) -> torch.device:
    """`rank_device` with this process's CUDA devices; a CUDA device becomes the current one."""
    count = torch.cuda.device_count() if setting != "cpu" and torch.cuda.is_available() else 0
    device = rank_device(setting, local_rank, count)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    return device


def choose_device_or_why(setting: str, local_rank: int, world_size: int) -> tuple[torch.device, str]:
    """`choose_device`, except that in a job of several ranks a rank without the GPU dist.device=cuda asks for
    (no CUDA, or CUDA failing to start) gets the CPU and the reason, which it publishes in the rendezvous
    (`agree_backend`) so every rank leaves with the ranks named, instead of leaving alone while its peers wait
    dist.startup_timeout_s for it. Alone, it raises."""
    try:
        return choose_device(setting, local_rank), ""
    except (ConfigError, RuntimeError) as err:
        if world_size == 1 or setting != "cuda":
            raise
        return torch.device("cpu"), str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__


def gpu_identity(device: torch.device) -> str:
    """What names a physical GPU across processes (its UUID); "" for the CPU."""
    if device.type != "cuda":
        return ""
    return str(torch.cuda.get_device_properties(device).uuid)


def shared_gpus(identities: Sequence[str]) -> list[list[int]]:
    """Groups (of 2 or more ranks) whose published GPU identities are equal."""
    by_gpu: dict[str, list[int]] = defaultdict(list)
    for rank, ident in enumerate(identities):
        if ident:
            by_gpu[ident].append(rank)
    return [ranks for ranks in by_gpu.values() if len(ranks) > 1]


def mixed_gpus(identities: Sequence[str], hosts: Sequence[str] | None = None) -> str | None:
    """A one-line ConfigError message when some ranks have a GPU and others none (None when all agree): the
    ranks without one, and their hosts."""
    without = [r for r, ident in enumerate(identities) if not ident]
    if not without or len(without) == len(identities):
        return None
    hosts = list(hosts) if hosts is not None else [""] * len(identities)
    shown = ", ".join(f"{r}" + (f" ({hosts[r]})" if hosts[r] else "") for r in without[:16])
    more = f" and {len(without) - 16} more" if len(without) > 16 else ""
    no_gpu_hosts = sorted({hosts[r] for r in without if hosts[r]})
    on = f" on host(s) {', '.join(no_gpu_hosts)}" if no_gpu_hosts else ""
    return (f"ranks disagree on the backend: rank(s) {shown}{more}{on} have no GPU (torch sees no CUDA device "
            f"there) while {len(identities) - len(without)} rank(s) have one, and NCCL needs a GPU on every rank: "
            f"fix the GPU driver or allocation of those hosts, or set dist.device=cpu (gloo on every rank)")


def decide_backend(backend: str, device_setting: str, device: torch.device, identities: Sequence[str],
                   hosts: Sequence[str] | None = None) -> str:
    """The backend every rank uses, from the settings and every rank's GPU identity (alike on every rank).

    auto: nccl on CUDA, gloo on the CPU. Ranks with a GPU and ranks without one (a node whose driver failed)
    would choose differently and wait on each other until dist.startup_timeout_s: unless dist.backend=gloo,
    that is a ConfigError on every rank naming the ranks and hosts without a GPU. Ranks sharing a GPU cannot
    use NCCL: with dist.backend=nccl or dist.device=cuda that is a ConfigError (exit 2); with both on auto
    every rank uses gloo (the policy and the learner stay on the GPUs; gradient buckets and stats go through
    host memory). gloo on the CPU instead would leave the GPUs idle and run the networks on the cores the
    simulators need."""
    mixed = mixed_gpus(identities, hosts) if backend != "gloo" else None
    if mixed:
        raise ConfigError(f"dist.device={device_setting} dist.backend={backend}: {mixed}")
    shared = shared_gpus(identities)
    asked = "dist.backend=nccl" if backend == "nccl" else "dist.device=cuda with dist.backend=auto (NCCL)"
    if backend == "auto":
        backend = "nccl" if device.type == "cuda" and not (shared and device_setting == "auto") else "gloo"
        if shared and device.type == "cuda" and backend == "gloo":
            log.warning("ranks %s share a GPU (more ranks on a node than visible GPUs): all ranks use gloo, "
                        "through host memory, not NCCL; start one rank per GPU for NCCL",
                        "; ".join(str(g) for g in shared))
    if backend == "nccl" and device.type != "cuda":
        raise ConfigError("dist.backend=nccl needs CUDA devices; use dist.backend=auto or gloo on CPU")
    if backend == "nccl" and shared:
        groups = "; ".join(f"ranks {g} on one GPU" for g in shared)
        raise ConfigError(f"{asked} needs one GPU per rank, but {groups} (more ranks on a node than visible "
                          f"GPUs): start at most one rank per GPU (torchrun --nproc-per-node, sbatch "
                          f"--ntasks-per-node), or set dist.backend=gloo to share GPUs, or dist.device=cpu")
    return backend


def missing_gpus(device_setting: str, published: Sequence[Mapping[str, str]]) -> str | None:
    """A one-line ConfigError message when ranks lack the GPU dist.device=cuda asks for (None when none do):
    the ranks, their hosts and the first reason."""
    lacking = [r for r, p in enumerate(published) if p.get("missing")]
    if not lacking:
        return None
    shown = ", ".join(f"{r} ({published[r]['host']})" for r in lacking[:16])
    more = f" and {len(lacking) - 16} more" if len(lacking) > 16 else ""
    return (f"dist.device={device_setting}: rank(s) {shown}{more} of {len(published)} have no usable GPU "
            f"({published[lacking[0]]['missing']}): fix the GPU driver or allocation of those hosts, or set "
            f"dist.device=auto or cpu")


def agree_backend(launch: Launch, store: Any, backend: str, device_setting: str, device: torch.device,
                  missing: str = "") -> str:
    """Every rank publishes its GPU's identity, its host and why it has no GPU where dist.device=cuda asked
    for one (`missing`, from choose_device_or_why) under `gpu/<rank>`, and reads all of them (the store's own
    timeout bounds the wait; the rendezvous watcher names a rank that never publishes); a rank without its GPU
    is a ConfigError on every rank alike (`missing_gpus`); else `decide_backend`."""
    ident = gpu_identity(device)
    if launch.world_size == 1:
        return decide_backend(backend, device_setting, device, [ident])
    store.set(f"gpu/{launch.rank}", json.dumps({"gpu": ident, "host": socket.gethostname(), "missing": missing}))
    keys = [f"gpu/{r}" for r in range(launch.world_size)]
    store.wait(keys)
    published = [json.loads(store.get(k).decode()) for k in keys]
    lacking = missing_gpus(device_setting, published)
    if lacking:
        raise ConfigError(lacking)
    return decide_backend(backend, device_setting, device, [p["gpu"] for p in published],
                          [p["host"] for p in published])
