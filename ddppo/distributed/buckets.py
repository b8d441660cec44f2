"""Sample-weighted gradient averaging over ranks, overlapped with the backward pass.

Each rank back-propagates the mean loss over its own `n` valid samples. The
applied gradient is sum_r(n_r * g_r) / sum_r(n_r): the gradient of the mean loss
over all valid samples of all ranks (a rank with n = 0 sends zeros, whatever its
gradient buffers hold, NaN included). The count travels with the gradients.

Buckets (about `bucket_mb` each) group the parameters in reverse registration
order, which is roughly the order backward produces their gradients. A hook
after each parameter's gradient accumulation marks it ready; when a bucket is
complete its weighted gradients are copied into one flat buffer and its
all-reduce is launched asynchronously, while backward goes on with earlier
layers. Buckets are launched strictly in index order (a ready bucket waits for
the ones before it), so every rank issues the same collectives in the same
order whatever order its hooks fire in; `finish()` launches what is left (a
parameter without a gradient on this rank, gradients set outside backward),
waits for every handle, divides by the summed count and writes the averages
back into `p.grad`. With one rank there is nothing to send: `finish()` only
zero-fills missing gradients. The ranks are those of one named group of the context (`train`: every rank under
the colocated placement), and every all-reduce runs on it.

Nothing here reads a value back to the host: the count is a device tensor. On
NCCL `finish()` still blocks the host until the all-reduces are done (blocking
waits, so that a lost peer raises here, inside the guard: see context.py); the
caller's one host read per minibatch (whether to step) follows right after and
would wait for the same collectives, so this moves that wait rather than adding one.
"""

from __future__ import annotations

from typing import Sequence

import torch

from ddppo.distributed.context import DistContext
from ddppo.distributed.placement import TRAIN


def plan_buckets(params: Sequence[torch.nn.Parameter], bucket_bytes: int) -> list[list[int]]:
    """Parameter indices grouped into buckets of about `bucket_bytes`, last parameter first."""
    buckets: list[list[int]] = []
    size = bucket_bytes
    for i in reversed(range(len(params))):
        nbytes = params[i].numel() * params[i].element_size()
        if size + nbytes > bucket_bytes and (not buckets or buckets[-1]):
            buckets.append([])
            size = 0
        buckets[-1].append(i)
        size += nbytes
    return buckets


class GradientReducer:
    """`begin(count)`, `loss.backward()`, `total = finish()`: averaged gradients in `p.grad`, the global
    valid-sample count as a 0-dim device tensor."""

    def __init__(self, ctx: DistContext, params: Sequence[torch.nn.Parameter], bucket_mb: float = 25.0,
                 group: str = TRAIN):
        self.ctx, self.group = ctx, ctx.group(group)
        self.params = list(params)
        self.buckets = plan_buckets(self.params, max(1, int(bucket_mb * 2**20)))
        self._bucket_of = {id(self.params[i]): b for b, idx in enumerate(self.buckets) for i in idx}
        self._armed = False
        self._count: torch.Tensor | None = None
        self._missing: list[int] = []
        self._launched = 0
        self._works: list[tuple[object, torch.Tensor]] = []  # (work handle, buffer being reduced)
        if self.group.size > 1:
            for p in self.params:
                p.register_post_accumulate_grad_hook(self._on_grad)

    def begin(self, num_samples: torch.Tensor) -> None:
        """Start one minibatch: this rank's valid-sample count (a 0-dim tensor, or a number)."""
        device = self.params[0].device
        self._count = torch.as_tensor(num_samples, dtype=torch.float32, device=device).reshape(())
        self._missing = [len(b) for b in self.buckets]
        self._launched = 0
        self._works = []
        self._armed = self.group.size > 1

    def _on_grad(self, p: torch.Tensor) -> None:
        if not self._armed:
            return
        b = self._bucket_of[id(p)]
        self._missing[b] -= 1
        while self._launched < len(self.buckets) and self._missing[self._launched] <= 0:
            self._launch()

    def _launch(self) -> None:
        """Weight the next bucket's gradients by this rank's count and start its all-reduce."""
        b = self._launched
        idx = self.buckets[b]
        count = self._count
        flats = [self.params[i].grad.reshape(-1) if self.params[i].grad is not None
                 else self.params[i].new_zeros(self.params[i].numel()) for i in idx]
        if b == len(self.buckets) - 1:
            flats.append(count.reshape(1))
            buf = torch.cat(flats)
            buf[:-1] = torch.where(count > 0, buf[:-1] * count, torch.zeros((), device=buf.device))
        else:
            buf = torch.cat(flats)
            buf = torch.where(count > 0, buf * count, torch.zeros((), device=buf.device))
        self._works.append(self.ctx.all_reduce_async(buf, "gradient all-reduce", self.group.name))
        self._launched += 1

    def finish(self) -> torch.Tensor:
        """Launch what is left, wait, divide by the global count, write back; the global count."""
        if self._count is None:
            raise RuntimeError("GradientReducer.finish() without begin()")
        count = self._count
        self._armed = False
        if self.group.size == 1:
            self._count = None
            for p in self.params:
                if p.grad is None:
                    p.grad = torch.zeros_like(p)
            return count
        while self._launched < len(self.buckets):
            self._launch()
        self._count = None
        results = [self.ctx.wait_async(work, "gradient all-reduce") for work in self._works]
        self._works = []
        total = results[-1][-1].clone()
        divisor = total.clamp(min=1.0)
        for idx, buf in zip(self.buckets, results):
            buf = buf.div_(divisor).to(self.params[0].device)
            offset = 0
            for i in idx:
                p = self.params[i]
                n = p.numel()
                avg = buf[offset:offset + n].view_as(p)
                if p.grad is None:
                    p.grad = avg
                else:
                    p.grad.copy_(avg)
                offset += n
        return total.to(self.params[0].device)
