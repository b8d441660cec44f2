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
  blocks this thread until the collective is done, and a
  collective not done within the group's timeout (dist.timeout_s, as for gloo) or failed raises
  DistBackendError there, inside DistContext.guard, which names the lost rank; torch then also turns the
  watchdog's tear-down off (ProcessGroupNCCL's constructor sets NoHandling under blocking wait). The
  flight-recorder dump on timeout is turned off too: its monitor thread aborts the process once it has dumped.
  Settings the user made are never changed (see `nccl_failure_env`).
"""

from __future__ import annotations

import logging
import os
from collections import defaultdict
from typing import Any, Mapping, MutableMapping, Sequence

import torch

from ddppo.config import ConfigError
from ddppo.distributed.launch import Launch

log = logging.getLogger("ddppo.distributed")

# what NCCL's failure handling reads when a process group is created (torch 2.13's ProcessGroupNCCL.hpp)
BLOCKING_WAIT = ("TORCH_NCCL_BLOCKING_WAIT", "NCCL_BLOCKING_WAIT")
ASYNC_ERROR_HANDLING = ("TORCH_NCCL_ASYNC_ERROR_HANDLING", "NCCL_ASYNC_ERROR_HANDLING")
DUMP_ON_TIMEOUT = "TORCH_NCCL_DUMP_ON_TIMEOUT"
CUBLAS_WORKSPACE = "CUBLAS_WORKSPACE_CONFIG"
CUBLAS_DETERMINISTIC = ":4096:8"  # 8 buffers of 4 MiB per stream: cuBLAS's documented deterministic setting


def _truthy(value: str) -> bool:
    return value.strip().lower() in {"1", "true", "yes", "y", "on"}


def nccl_failure_env(environ: Mapping[str, str]) -> tuple[dict[str, str], str | None]:
    """(variables to set before the first NCCL process group, a warning or None) for `environ`.

    TORCH_NCCL_BLOCKING_WAIT=1 unless the user chose NCCL's error handling (either blocking-wait or
    async-error-handling variable, under either name); TORCH_NCCL_DUMP_ON_TIMEOUT=0 unless set."""
    settings: dict[str, str] = {}
    chosen = [n for n in BLOCKING_WAIT + ASYNC_ERROR_HANDLING if n in environ]
    warning = None
    if not chosen:
        settings[BLOCKING_WAIT[0]] = "1"
    elif not any(_truthy(environ[n]) for n in BLOCKING_WAIT if n in environ):
        warning = (f"{'/'.join(f'{n}={environ[n]}' for n in chosen)} set: a lost or hung peer ends this rank as "
                   f"NCCL's watchdog decides (after the collective timeout, no rank named, exit by abort); unset "
                   f"{'/'.join(chosen)} for ddppo's one-line error naming the lost rank (exit 1)")
    if DUMP_ON_TIMEOUT not in environ:
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


def decide_backend(backend: str, device_setting: str, device: torch.device, identities: Sequence[str]) -> str:
    """The backend every rank uses, from the settings and every rank's GPU identity (alike on every rank).

    auto: nccl on CUDA, gloo on the CPU. Ranks sharing a GPU cannot use NCCL: with dist.backend=nccl or
    dist.device=cuda that is a ConfigError (exit 2); with both on auto every rank uses gloo (the policy and the
    learner stay on the GPUs; gradient buckets and stats go through host memory). gloo on the CPU instead
    would leave the GPUs idle and run the networks on the cores the simulators need."""
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


def agree_backend(launch: Launch, store: Any, backend: str, device_setting: str, device: torch.device) -> str:
    """Every rank publishes its GPU's identity under `gpu/<rank>` and reads all of them (the store's own
    timeout bounds the wait; the rendezvous watcher names a rank that never publishes); `decide_backend`."""
    ident = gpu_identity(device)
    if launch.world_size == 1:
        return decide_backend(backend, device_setting, device, [ident])
    store.set(f"gpu/{launch.rank}", ident)
    keys = [f"gpu/{r}" for r in range(launch.world_size)]
    store.wait(keys)
    return decide_backend(backend, device_setting, device, [store.get(k).decode() for k in keys])
