"""run.precision: the number format of the policy's forward passes, the one home of its autocast context.

    fp32  as built: every forward in float32 (the default)
    auto  bf16 where the rank's device computes bf16 natively, fp32 elsewhere: decided once when a run starts
          (`resolve_precision`), logged, and the value it picked is what config.yaml and the checkpoints record
          (and `ddppo eval`'s results: it resolves auto on its own device)
    bf16  torch.autocast(bfloat16) over the policy's forward passes, acting (rollout/acting.py) and learning
          (ppo/update.py, ppo/reference.py), on CPU and CUDA alike. Only the forward runs in bf16: the weights
          (the optimizer's master copy) and the optimizer state stay float32, and what leaves a forward (log-probs,
          values, entropy, distribution parameters) is cast back to float32 at once (`to_fp32`), so the rollout
          storage, the losses, advantages, returns and normalisation statistics are all float32.

`autocast(precision, device)` is the context every forward pass runs under; `resolve_precision` turns auto into
fp32 or bf16 and refuses, with one line naming run.precision and the fix, bf16 asked on a device whose hardware
has no bf16 (it would run emulated, slower than fp32). Native bf16: CUDA's own check
(torch.cuda.is_bf16_supported without emulation), and on the CPU torch's capability report
(torch.cpu.get_capabilities: avx512_bf16 or amx_bf16 on x86, bf16 on Arm). Precision is a run setting, not a
shape: a checkpoint resumes and evaluates under either.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import platform
from typing import TYPE_CHECKING, Any, ContextManager, Mapping

import torch

from ddppo.errors import ConfigError

if TYPE_CHECKING:
    from ddppo.config import Config

log = logging.getLogger(__name__)

PRECISIONS = ("fp32", "bf16")  # what a forward runs in; run.precision also takes "auto" (resolve_precision)
CHOICES = ("fp32", "bf16", "auto")
_CPU_BF16 = ("avx512_bf16", "amx_bf16", "bf16")  # x86 AVX512-BF16 and AMX-BF16, Arm's FEAT_BF16


def capabilities_have_bf16(capabilities: Mapping[str, Any]) -> bool:
    """Whether torch.cpu.get_capabilities()' report names a native bf16 instruction set."""
    return any(capabilities.get(flag) is True for flag in _CPU_BF16)


@functools.lru_cache(maxsize=None)
def cpu_has_bf16() -> bool:
    """Whether this CPU computes bf16 natively, as torch's CPU capability report says (a torch without the
    public report: its private x86 checks, and oneDNN's on other machines)."""
    report = getattr(torch.cpu, "get_capabilities", None)
    if report is not None:
        return capabilities_have_bf16(report())
    if platform.machine().lower() in ("x86_64", "amd64"):
        return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())
    return bool(torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported())


def bf16_problem(device: torch.device) -> str | None:
    """Why `device` cannot run run.precision=bf16 (one line naming the key and the fix), or None."""
    if device.type == "cuda":
        if torch.cuda.is_bf16_supported(including_emulation=False):
            return None
        name = torch.cuda.get_device_name(device)
        return (f"run.precision=bf16: {name} has no bf16 support (compute capability 8.0 or later has it); "
                f"set run.precision=fp32")
    if device.type == "cpu":
        if cpu_has_bf16():
            return None
        return ("run.precision=bf16: this CPU has no native bf16 (no avx512_bf16, amx_bf16 or bf16 in torch's "
                "CPU capabilities), so bf16 would run emulated and slower than fp32; set run.precision=fp32 (or auto: "
                "bf16 only where it is native)")
    return f"run.precision=bf16 is not supported on device {device.type!r}; set run.precision=fp32"


def resolve_precision(precision: str, device: torch.device, announce: bool = True) -> str:
    """run.precision as `device` runs it: fp32 or bf16 (auto: bf16 where the hardware computes it natively, logged
    when `announce`); ConfigError (one line: run.precision and the fix) when bf16 is asked of a device without it."""
    if precision not in CHOICES:
        raise ConfigError(f"run.precision={precision!r}: use one of {', '.join(CHOICES)}")
    if precision == "auto":
        problem = bf16_problem(device)
        resolved = "fp32" if problem is not None else "bf16"
        if announce:
            log.info("run.precision=auto: %s on %s (%s)", resolved, device,
                     "it computes bf16 natively" if problem is None else "no native bf16")
        return resolved
    problem = bf16_problem(device) if precision == "bf16" else None
    if problem is not None:
        raise ConfigError(problem)
    return precision


def with_resolved_precision(cfg: Config, device: torch.device, announce: bool = True) -> Config:
    """`cfg` with run.precision resolved on `device` (`resolve_precision`): what a run uses, and what its
    config.yaml and checkpoints record."""
    resolved = resolve_precision(cfg.run.precision, device, announce)
    if resolved == cfg.run.precision:
        return cfg
    return dataclasses.replace(cfg, run=dataclasses.replace(cfg.run, precision=resolved))


def autocast(precision: str, device: torch.device | str) -> ContextManager:
    """The context a policy forward runs under: bf16 autocast on `device`'s type for run.precision=bf16, nothing
    for fp32."""
    if precision not in PRECISIONS:  # run.precision=auto is resolved when a run starts (resolve_precision)
        raise ValueError(f"autocast: precision {precision!r} is not one of {', '.join(PRECISIONS)}")
    if precision == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(torch.device(device).type, dtype=torch.bfloat16)


def store_memory_in(policy: torch.nn.Module, precision: str) -> None:
    """Keep `policy`'s memory in the dtype that saves bytes without changing what it computes under `precision`:
    a transformer core's KV cache (its `cache_dtype`) in bfloat16 under bf16, where autocast's projections put the
    keys and values out in bf16 already; in the weights' dtype under fp32. A GRU/LSTM state stays float32: acting
    would round it at every step, and the learning pass, which runs the whole sequence at once, would not."""
    dtype = torch.bfloat16 if precision == "bf16" else None
    for module in policy.modules():
        if hasattr(module, "cache_dtype"):
            module.cache_dtype = dtype


def to_fp32(*tensors: torch.Tensor | None) -> tuple[torch.Tensor | None, ...]:
    """Each floating-point tensor as float32 (a no-op for float32 ones; integer actions and None unchanged)."""
    return tuple(t.float() if t is not None and t.is_floating_point() else t for t in tensors)
