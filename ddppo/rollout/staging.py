"""Every per-step host-to-device copy of a rollout goes through one `HostStaging` (pinned buffers on CUDA).

A copy from pageable memory with `non_blocking=True` is synchronous in effect: the driver first copies into
its own pinned buffer. Here each array a step moves (every observation key, the rewards, done and
episode-start flags, grouped episodes' idle flags, a truncated episode's final observation and its rows, the
variable rollout's env indices and storage slots) has one
page-locked host buffer, reused every step: the envs' arrays are copied into it (a host memcpy) and the device
copy is then truly asynchronous. A buffer holds the most rows asked of it so far and hands out its first rows,
so the variable rollout's batches of any size reuse it. Before a buffer is overwritten, the previous copies
are waited for (a CUDA event; normally long done, since the policy has acted on them since).

The lockstep, overlapped and variable collectors and the evaluator all move their data with
`Actor.staging.to_device`; nothing of a rollout is copied host-to-device elsewhere per step (the scoring stage
copies the rewards it made once per rollout: rollout/scoring.py).
On CPU there is nothing to stage: the tensors are views of the envs' arrays (float64 rewards aside).
"""

from __future__ import annotations

import numpy as np
import torch


def stages(device: torch.device) -> bool:
    """Whether copies to `device` are staged (a CUDA device)."""
    return device.type == "cuda"


class HostStaging:
    def __init__(self, device: torch.device, pin: bool | None = None):
        self.device = device
        self.enabled = stages(device) if pin is None else pin
        self.pinned = self.enabled and torch.cuda.is_available()  # page-locking needs a CUDA driver
        self.buffers: dict[str, torch.Tensor] = {}
        self._copied: torch.cuda.Event | None = None

    def stage(self, arrays: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
        """`arrays` copied into each key's reused host buffer (a new, larger one when it does not fit)."""
        if self._copied is not None:
            self._copied.synchronize()  # the previous copies have read the buffers
            self._copied = None
        out = {}
        for key, value in arrays.items():
            src = torch.from_numpy(np.ascontiguousarray(value))
            buf = self.buffers.get(key)
            rows = src.shape[0] if src.dim() else 1
            if buf is None or buf.shape[1:] != src.shape[1:] or buf.dtype != src.dtype or buf.shape[0] < rows:
                size = max(rows, buf.shape[0] if buf is not None and buf.shape[1:] == src.shape[1:] else 0)
                buf = self.buffers[key] = torch.empty((size, *src.shape[1:]), dtype=src.dtype,
                                                      pin_memory=self.pinned)
            out[key] = buf[:rows].view(src.shape).copy_(src)
        return out

    def to_device(self, arrays: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
        """The arrays on the device (staged and copied asynchronously; unstaged: views of `arrays`)."""
        if not self.enabled:
            return {k: torch.from_numpy(np.asarray(v)).to(self.device) for k, v in arrays.items()}
        # copy=True: a staged tensor never aliases its buffer (the CPU stand-in of the CUDA path in tests)
        moved = {k: v.to(self.device, non_blocking=True, copy=True) for k, v in self.stage(arrays).items()}
        if self.device.type == "cuda":
            self._copied = torch.cuda.Event()
            self._copied.record()
        return moved

    def step_to_device(self, obs: dict[str, np.ndarray], flags: dict[str, np.ndarray | None],
                       prefix: str = "obs/", index: dict[str, np.ndarray] | None = None
                       ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        """One step's observation, float32 flags (reward, done, ...: None ones skipped) and int64 `index`
        arrays (which envs, at which slots) in one staged copy; (observation, flags and indices)."""
        arrays = {prefix + k: v for k, v in obs.items()}
        # copies (np.array): the flags are written to in place (truncation bootstraps) and the envs reuse theirs
        arrays.update({k: np.array(v, dtype=np.float32) for k, v in flags.items() if v is not None})
        arrays.update({k: np.asarray(v, dtype=np.int64) for k, v in (index or {}).items()})
        moved = self.to_device(arrays)
        n = len(prefix)
        return {k[n:]: v for k, v in moved.items() if k.startswith(prefix)}, \
            {k: v for k, v in moved.items() if not k.startswith(prefix)}
