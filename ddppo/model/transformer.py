"""A causal transformer core over the episode's steps, with a per-env KV cache as its memory.

A pre-norm decoder (RMSNorm, SwiGLU MLP, multi-head attention through `scaled_dot_product_attention` with a
boolean mask, rotary or learned positions over the episode step, as PoliFormer's decoder). Its memory, a
`dict[str, Tensor]` with the env first (ddppo/model/memory.py):

- ``k``, ``v``: (N, layers, heads, context - 1, head_dim), each layer's keys (rotated) and values of the env's
  last `context - 1` steps, oldest first, the valid ones at the end; in the weights' dtype, or in bfloat16 under
  run.precision=bf16 (`cache_dtype`, set by ddppo.model.precision.store_memory_in: under bf16 autocast the keys
  and values come out of bf16 projections, so a bf16 cache holds them exactly, in half the bytes);
- ``len``: (N,) int64, how many of those slots are valid (the rest are padding, never attended);
- ``pos``: (N,) int64, the episode step of the env's next token.

One code path for acting (T = 1) and learning (T > 1): the T new steps are queries; the keys are the cached
prefix followed by the T new steps (assembled in place when no gradient is taken, concatenated when one is).
Query t of env n sees

- a new step s iff s <= t, no episode starts in (s, t] and t - s < context;
- a cached slot iff no episode starts at or before t in the T steps, the slot is valid, and it is less than
  `context` episode steps before t.

The prefix's keys and values are the cache's as acting wrote them (no gradient flows into them: in learning they
are the stale values of the weights that acted, as a GRU's state at the rollout's start is stale), the new steps'
are computed from `x`. So, at equal parameters, acting step by step from a memory and one pass over the same steps
from that memory give the same outputs, and the memory they return is the same: the last `context - 1` steps.
An episode start empties an env's cache by its length (and reads it as zeros, whatever it holds), never by
touching another env's slots.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from ddppo.config import Config, PolicyConfig
from ddppo.config.sizes import FLOAT, CoreSize
from ddppo.model.core import Core

ROTARY_BASE = 10000.0
LEARNED_POSITIONS = 1024  # policy.transformer.positions=learned: episode steps from this on share the last embedding


def ffn_width(hidden: int) -> int:
    """The SwiGLU width: two thirds of 4 x hidden (LLaMA's), rounded up to a multiple of 8."""
    return 8 * ((8 * hidden // 3 + 7) // 8)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding, halves form: x (N, H, T, hd), cos/sin (N, 1, T, hd / 2)."""
    a, b = x.chunk(2, -1)
    return torch.cat([a * cos - b * sin, a * sin + b * cos], -1)


class SwiGLU(nn.Module):
    def __init__(self, d: int):
        super().__init__()
        width = ffn_width(d)
        self.gate = nn.Linear(d, width, bias=False)
        self.up = nn.Linear(d, width, bias=False)
        self.down = nn.Linear(width, d, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.silu(self.gate(x)) * self.up(x))


class Block(nn.Module):
    """One pre-norm decoder layer: x + attention(norm(x)), then + SwiGLU(norm(.))."""

    def __init__(self, d: int, heads: int, dropout: float):
        super().__init__()
        self.heads, self.head_dim, self.dropout = heads, d // heads, dropout
        self.attn_norm = nn.RMSNorm(d)
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.out = nn.Linear(d, d, bias=False)
        self.mlp_norm = nn.RMSNorm(d)
        self.mlp = SwiGLU(d)

    def forward(self, x, prefix, mask, rotary, drop: bool, into: tuple | None):
        """x (T, N, D); prefix: the cached keys and values (N, H, S, hd); mask (N, 1, T, S + T) -> x, and this
        layer's keys and values over prefix + new steps (N, H, S + T, hd). `into`: two such tensors whose first S
        steps already hold the prefix, to write the new steps into (acting, no gradient: one copy of the cache
        per step instead of two); else they are concatenated."""
        T, N, D = x.shape
        q, k, v = self.qkv(self.attn_norm(x)).view(T, N, 3, self.heads, self.head_dim).permute(2, 1, 3, 0, 4)
        if rotary is not None:
            q, k = _rotate(q, *rotary), _rotate(k, *rotary)
        # a non-finite step (a NaN observation) keeps zeros in the cache: masked slots weigh exactly 0 only if finite
        k, v = torch.nan_to_num(k, 0.0, 0.0, 0.0), torch.nan_to_num(v, 0.0, 0.0, 0.0)
        if into is None:
            k, v = torch.cat([prefix[0].to(k.dtype), k], 2), torch.cat([prefix[1].to(v.dtype), v], 2)
        else:
            S = into[0].shape[2] - T
            into[0][:, :, S:], into[1][:, :, S:] = k, v
            k, v = into[0].to(q.dtype), into[1].to(q.dtype)
        p = self.dropout if drop else 0.0
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)
        x = x + F.dropout(self.out(a.permute(2, 0, 1, 3).reshape(T, N, D)), p, drop)
        x = x + F.dropout(self.mlp(self.mlp_norm(x)), p, drop)
        return x, k, v


class TransformerCore(Core):
    """`out, memory = core(x, memory, start)`: x (T, N, D), start (T, N) (1.0 where x[t] begins an episode)
    -> out (T, N, D) and the memory after the T steps. Dropout (policy.transformer.dropout) applies only where
    gradients are taken (the learning pass), so acting, `ddppo eval` and the old log-probs stay deterministic."""

    def __init__(self, size: int, layers: int, heads: int, context: int, positions: str = "rotary",
                 dropout: float = 0.0):
        super().__init__()
        if size % heads or (size // heads) % 2:
            raise ValueError(f"policy.transformer.heads={heads} must divide policy.hidden_size={size} into an even "
                             f"head width (rotary pairs): pick heads so that hidden_size / heads is even")
        if context < 1:
            raise ValueError(f"policy.transformer.context={context} must be at least 1")
        if positions not in ("rotary", "learned"):
            raise ValueError(f"policy.transformer.positions={positions!r}: use rotary or learned")
        self.size, self.layers, self.heads, self.context = size, layers, heads, context
        self.head_dim, self.positions, self.dropout = size // heads, positions, dropout
        self.blocks = nn.ModuleList(Block(size, heads, dropout) for _ in range(layers))
        self.norm = nn.RMSNorm(size)
        self.position = nn.Embedding(LEARNED_POSITIONS, size) if positions == "learned" else None
        inv = ROTARY_BASE ** (-torch.arange(0, self.head_dim, 2, dtype=torch.float64) / self.head_dim)
        self.register_buffer("inv_freq", inv.float(), persistent=False)
        self.cache_dtype: torch.dtype | None = None  # the KV cache's dtype; None: the weights'

    @classmethod
    def build(cls, cfg: PolicyConfig, width: int) -> TransformerCore:
        t = cfg.transformer
        return cls(width, t.layers, t.heads, t.context, t.positions, t.dropout)

    @classmethod
    def sizes(cls, cfg: Config) -> CoreSize:
        """Per layer: qkv and out projections, the SwiGLU's three, two norms; the final norm, learned positions. The
        cache: layers x 2 x (context - 1) x hidden values, 2 bytes each under run.precision=bf16
        (ddppo.model.precision.store_memory_in), plus its two counters (len, pos)."""
        t, hidden = cfg.policy.transformer, cfg.policy.hidden_size
        per_layer = 4 * hidden * hidden + 3 * hidden * ffn_width(hidden) + 2 * hidden
        parameters = t.layers * per_layer + hidden + (LEARNED_POSITIONS * hidden if t.positions == "learned" else 0)
        width = 2 if cfg.run.precision == "bf16" else FLOAT
        what = ("KV cache: policy.transformer.layers x 2 x (context - 1) x policy.hidden_size x "
                + ("2 bytes (bf16: run.precision)" if width == 2 else "4 bytes"))
        return CoreSize(parameters, t.layers * 2 * (t.context - 1) * hidden * width + 16, what)

    # ------------------------------------------------------------------ memory
    def initial_memory(self, num_envs: int, device: torch.device | str = "cpu",
                       dtype: torch.dtype | None = None) -> dict[str, torch.Tensor]:
        """An empty cache for `num_envs` envs, in `cache_dtype` (else the weights' dtype) unless `dtype` says
        otherwise."""
        dtype = dtype or self.cache_dtype or self.norm.weight.dtype
        shape = (num_envs, self.layers, self.heads, self.context - 1, self.head_dim)
        return {"k": torch.zeros(shape, device=device, dtype=dtype),
                "v": torch.zeros(shape, device=device, dtype=dtype),
                "len": torch.zeros(num_envs, device=device, dtype=torch.int64),
                "pos": torch.zeros(num_envs, device=device, dtype=torch.int64)}

    # ----------------------------------------------------------------- forward
    def _layout(self, start: torch.Tensor, length: torch.Tensor, pos: torch.Tensor):
        """Episode steps of the new tokens (T, N), the attention mask (N, 1, T, S + T) and the valid cache length
        after the T steps (N,)."""
        T, N = start.shape
        S, dev = self.context - 1, start.device
        started = start != 0
        steps = torch.arange(T, device=dev).view(T, 1)
        last_start = torch.where(started, steps, -1).cummax(0).values  # (T, N): -1 while the memory's episode goes on
        fresh = last_start >= 0
        episode_step = torch.where(fresh, steps - last_start, pos.view(1, N) + steps)
        seg = started.to(torch.int64).cumsum(0).t()  # (N, T): episode segment within the T steps; 0 continues memory
        t, s = steps.view(1, T, 1), steps.view(1, 1, T)
        new = (s <= t) & (t - s < self.context) & (seg.unsqueeze(2) == seg.unsqueeze(1))  # (N, T, T)
        slot = torch.arange(S, device=dev)
        valid = slot.view(1, S) >= (S - length).view(N, 1)  # (N, S): the cache's valid slots, right-aligned
        # slot j is (S - j) episode steps before the memory's next token, t + S - j before query t: < context iff j >= t
        prefix = valid.unsqueeze(1) & (seg == 0).unsqueeze(2) & (slot.view(1, 1, S) >= t)  # (N, T, S)
        mask = torch.cat([prefix, new], 2).unsqueeze(1)
        after = torch.where(fresh[-1], T - last_start[-1], length + T).clamp(max=S)
        return episode_step, mask, after

    def forward(self, x: torch.Tensor, memory: dict[str, torch.Tensor],
                start: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        T, N, _ = x.shape
        S = self.context - 1
        episode_step, mask, length = self._layout(start, memory["len"], memory["pos"])
        rotary = None
        if self.position is not None:
            x = x + self.position(episode_step.clamp(max=LEARNED_POSITIONS - 1))
        else:
            angle = episode_step.t().unsqueeze(-1).to(self.inv_freq.dtype) * self.inv_freq  # (N, T, hd / 2)
            rotary = (angle.cos().unsqueeze(1).to(x.dtype), angle.sin().unsqueeze(1).to(x.dtype))
        grad = torch.is_grad_enabled()
        drop = self.training and self.dropout > 0 and grad
        k_mem, v_mem = memory["k"], memory["v"]
        # an env starting an episode reads its cache as zeros, whatever it holds (masked slots weigh exactly 0 only
        # if finite: a NaN there would poison the new episode); the steps' own non-finite keys are zeroed in Block
        restart = torch.nonzero(start[0] != 0).squeeze(1)
        if not grad:  # acting: the cache copied once into [cache ; new steps], whose last S steps are the memory after
            k_all = k_mem.new_empty(*k_mem.shape[:3], S + T, k_mem.shape[-1])
            v_all = torch.empty_like(k_all)
            k_all[..., :S, :], v_all[..., :S, :] = k_mem, v_mem
            k_all.index_fill_(0, restart, 0.0), v_all.index_fill_(0, restart, 0.0)
        else:
            k_mem, v_mem = k_mem.index_fill(0, restart, 0.0), v_mem.index_fill(0, restart, 0.0)
        ks, vs = [], []
        for layer, block in enumerate(self.blocks):
            into = None if grad else (k_all[:, layer], v_all[:, layer])
            x, k, v = block(x, (k_mem[:, layer], v_mem[:, layer]), mask, rotary, drop, into)
            ks.append(k.narrow(2, T, S).detach())  # the last S steps: the window slides
            vs.append(v.narrow(2, T, S).detach())
        if grad:
            k_new, v_new = torch.stack(ks, 1).to(k_mem.dtype), torch.stack(vs, 1).to(v_mem.dtype)
        else:
            k_new, v_new = k_all[..., T:, :], v_all[..., T:, :]
        new_memory = {"k": k_new, "v": v_new, "len": length, "pos": episode_step[-1] + 1}
        return self.norm(x), new_memory
