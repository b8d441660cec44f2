"""Host-to-device observation copies through pinned staging buffers (CUDA); a plain view on CPU.

A copy from pageable memory with `non_blocking=True` is synchronous in effect: the driver first copies into
its own pinned buffer. Here each observation key has one page-locked host buffer, reused every step: the
envs' arrays are copied into it (a host memcpy) and the device copy is then truly asynchronous. Before a
buffer is overwritten, the previous step's copies are waited for (a CUDA event; normally long done, since
the policy has acted on them and its action came back to the host since).
On CPU there is nothing to stage: the observation tensors are views of the envs' arrays, as before.
"""

from __future__ import annotations

import numpy as np
import torch


class ObsStaging:
    def __init__(self, device: torch.device, pin: bool | None = None):
        self.device = device
        self.enabled = device.type == "cuda" if pin is None else pin
        self.pinned = self.enabled and torch.cuda.is_available()  # page-locking needs a CUDA driver
        self.buffers: dict[str, torch.Tensor] = {}
        self._copied: torch.cuda.Event | None = None

    def stage(self, obs: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
        """`obs` copied into this key's reused host buffer (a new one when the shape or dtype changes)."""
        if self._copied is not None:
            self._copied.synchronize()  # the previous step's device copies have read the buffers
            self._copied = None
        out = {}
        for key, value in obs.items():
            src = torch.from_numpy(np.asarray(value))
            buf = self.buffers.get(key)
            if buf is None or buf.shape != src.shape or buf.dtype != src.dtype:
                buf = self.buffers[key] = torch.empty(src.shape, dtype=src.dtype, pin_memory=self.pinned)
            out[key] = buf.copy_(src)
        return out

    def to_device(self, obs: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
        """The observation on the device (CUDA: staged, copied asynchronously; CPU: views of `obs`)."""
        if not self.enabled:
            return {k: torch.from_numpy(np.asarray(v)).to(self.device) for k, v in obs.items()}
        moved = {k: v.to(self.device, non_blocking=True) for k, v in self.stage(obs).items()}
        if self.device.type == "cuda":
            self._copied = torch.cuda.Event()
            self._copied.record()
        return moved
