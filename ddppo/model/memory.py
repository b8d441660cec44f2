"""The policy's memory: what a policy carries from one step of an env to the next, as one opaque value.

A memory is a dict of tensors, every one with the env as its first dimension, (N, ...): a GRU's or LSTM's state
({"rnn": (N, layers, H)}), a transformer's KV cache with its per-env lengths, habitat-baselines' previous action
beside its RNN rows; a policy without memory has the empty dict. The policy alone defines the keys and shapes
(`initial_memory`) and alone reads them: its core empties an env's memory where an episode starts, from the start
flags, as it steps.

Everything else (the rollout, which keeps the memory before its first step; the acting path, which steps subsets
of envs in the overlapped and variable modes; the overlap copy; checkpoints; the Python API) handles a memory only
through the functions below, never by its keys.
"""

from __future__ import annotations

from typing import Any, Dict, Union

import torch

Memory = Dict[str, torch.Tensor]
Index = Union[torch.Tensor, slice]


def select(memory: Memory, envs: Index) -> Memory:
    """The memory of the envs `envs` (an index tensor, on the memory's device, or a slice)."""
    return {k: v[envs] for k, v in memory.items()}


def assign(memory: Memory, envs: Index, part: Memory) -> None:
    """Write `part` (the memory of the envs `envs`) into `memory`, in place."""
    for k, v in memory.items():
        v[envs] = part[k].to(v.dtype)


def copy_into(dst: Memory, src: Memory) -> None:
    """`dst` takes `src`'s values in place (the same keys and shapes)."""
    for k, v in dst.items():
        v.copy_(src[k])


def clone(memory: Memory) -> Memory:
    return {k: v.clone() for k, v in memory.items()}


def to(memory: Memory, device: torch.device | str, copy: bool = False) -> Memory:
    return {k: torch.as_tensor(v).to(device, copy=copy) for k, v in memory.items()}


def cast_like(memory: Memory, like: Memory) -> Memory:
    """`memory` with each tensor in the dtype of `like`'s (a memory a bf16 forward returned, kept as stored)."""
    return {k: v.to(like[k].dtype) for k, v in memory.items()}


def restored(state: Any, like: Memory, device: torch.device | str) -> Memory:
    """A saved memory (`saved`'s form) as this run holds it: copies on `device`, each tensor in the dtype of `like`'s
    (this run's memory), so a bf16 run's KV cache resumed under fp32, or the reverse, takes this run's dtypes."""
    return cast_like(to(state, device, copy=True), like)


def zeros(memory: Memory, num_envs: int) -> Memory:
    """Zeros shaped like `memory` for `num_envs` envs."""
    return {k: v.new_zeros((num_envs, *v.shape[1:])) for k, v in memory.items()}


def nbytes(memory: Memory) -> int:
    """The memory's size in bytes."""
    return sum(v.numel() * v.element_size() for v in memory.values())


def shapes(memory: Memory) -> dict[str, tuple[int, ...]]:
    """Each key's shape, to tell whether a saved memory fits."""
    return {k: tuple(v.shape) for k, v in memory.items()}


def saved(memory: Memory) -> Memory:
    """The form a checkpoint keeps (CPU copies)."""
    return {k: v.detach().cpu().clone() for k, v in memory.items()}


def misfit(memory: Memory, state: Any) -> str | None:
    """Why a saved memory does not fit `memory` (None: it does)."""
    if not isinstance(state, dict):
        return f"a saved memory of type {type(state).__name__}, not a dict of tensors"
    want, got = shapes(memory), {k: tuple(torch.as_tensor(v).shape) for k, v in state.items()}
    if want == got:
        return None
    return f"memory {got} (expected {want})"
