"""run.precision: the number format of the policy's forward passes, the one home of its autocast context.

    fp32  as built: every forward in float32 (the default)
    bf16  torch.autocast(bfloat16) over the policy's forward passes, acting (rollout/acting.py) and learning
          (ppo/update.py, ppo/reference.py), on CPU and CUDA alike. Only the forward runs in bf16: the weights
          (the optimizer's master copy) and the optimizer state stay float32, and what leaves a forward (log-probs,
          values, entropy, distribution parameters) is cast back to float32 at once (`to_fp32`), so the rollout
          storage, the losses, advantages, returns and normalisation statistics are all float32.

`autocast(precision, device)` is the context every forward pass runs under; `check_precision` refuses, with one
line naming run.precision and the fix, a device whose hardware has no bf16 (bf16 would run emulated, slower than
fp32). Precision is a run setting, not a shape: a checkpoint resumes and evaluates under either.
"""

from __future__ import annotations

import contextlib
import functools
from typing import ContextManager

import torch

from ddppo.errors import ConfigError

PRECISIONS = ("fp32", "bf16")
_CPU_BF16_FLAGS = ("avx512_bf16", "amx_bf16", "bf16")  # x86 AVX512-BF16 / AMX, ARMv8.6 BF16 (/proc/cpuinfo)


def cpuinfo_has_bf16(cpuinfo: str) -> bool:
    """Whether /proc/cpuinfo's text lists a native bf16 flag (x86 `flags`, Arm `Features`)."""
    flags = {w for line in cpuinfo.splitlines() if line.lower().startswith(("flags", "features"))
             for w in line.split()}
    return any(flag in flags for flag in _CPU_BF16_FLAGS)


@functools.lru_cache(maxsize=None)
def cpu_has_bf16() -> bool:
    """Whether this CPU computes bf16 natively: its /proc/cpuinfo flags on Linux, else what oneDNN reports."""
    try:
        with open("/proc/cpuinfo") as f:
            return cpuinfo_has_bf16(f.read())
    except OSError:
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
        return ("run.precision=bf16: this CPU has no native bf16 (no avx512_bf16, amx_bf16 or bf16 flag), so bf16 "
                "would run emulated and slower than fp32; set run.precision=fp32")
    return f"run.precision=bf16 is not supported on device {device.type!r}; set run.precision=fp32"


def check_precision(precision: str, device: torch.device) -> None:
    """ConfigError (one line: run.precision and the fix) when `device` cannot run `precision`."""
    if precision not in PRECISIONS:
        raise ConfigError(f"run.precision={precision!r}: use one of {', '.join(PRECISIONS)}")
    problem = bf16_problem(device) if precision == "bf16" else None
    if problem is not None:
        raise ConfigError(problem)


def autocast(precision: str, device: torch.device | str) -> ContextManager:
    """The context a policy forward runs under: bf16 autocast on `device`'s type for run.precision=bf16, nothing
    for fp32."""
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
