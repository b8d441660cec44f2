"""The recurrent cores, policy.rnn_type=gru and lstm: torch's GRU or LSTM over the episode's steps, the state
zeroed where an episode starts (the protocol: ddppo/model/core.py). Memory: a GRU's state {"rnn": (N, layers, H)};
for an LSTM, h and c stacked along the layers, (N, 2 * layers, H).
"""

from __future__ import annotations

import torch
from torch import nn

from ddppo.config import Config, PolicyConfig
from ddppo.config.sizes import FLOAT, CoreSize
from ddppo.model.core import Core
from ddppo.model.memory import Memory

GATES = {"gru": 3, "lstm": 4}


def _zero_where(h: torch.Tensor, start: torch.Tensor) -> torch.Tensor:
    """h (layers, N, H) with the envs where `start` (N,) is set truly zeroed: a masked fill, not
    `h * (1 - start)`, which keeps a NaN/inf state NaN (NaN * 0 = NaN) for ever."""
    return h.masked_fill((start != 0).view(1, -1, 1), 0.0)


class RecurrentCore(Core):
    """GRU/LSTM over time with the state zeroed where an episode starts; registered as gru and as lstm, which
    `kind` tells apart (habitat-baselines' policies build one with an input wider than its state)."""

    def __init__(self, kind: str, size: int, layers: int, input_size: int | None = None):
        super().__init__()
        self.kind, self.layers = kind, layers
        rnn = nn.GRU if kind == "gru" else nn.LSTM
        self.rnn = rnn(input_size or size, size, num_layers=layers)
        for name, p in self.rnn.named_parameters():
            if "weight" in name:
                nn.init.orthogonal_(p)
            else:
                nn.init.zeros_(p)

    @classmethod
    def build(cls, cfg: PolicyConfig, width: int) -> RecurrentCore:
        return cls(cfg.rnn_type, width, cfg.rnn_layers)

    @classmethod
    def sizes(cls, cfg: Config) -> CoreSize:
        """Per layer, gates x (input and recurrent weights, two biases); the state: rnn_layers x hidden floats, twice
        for an LSTM (h and c)."""
        p, hidden = cfg.policy, cfg.policy.hidden_size
        rows = p.rnn_layers * (2 if p.rnn_type == "lstm" else 1)
        what = f"{p.rnn_type} state: policy.rnn_layers x policy.hidden_size x 4 bytes{' x 2' * (p.rnn_type == 'lstm')}"
        return CoreSize(p.rnn_layers * GATES[p.rnn_type] * (2 * hidden * hidden + 2 * hidden), rows * hidden * FLOAT,
                        what)

    @property
    def state_layers(self) -> int:
        return self.layers * (2 if self.kind == "lstm" else 1)

    def _run(self, x, h: torch.Tensor):
        """x: (T, N, H) tensor or a PackedSequence."""
        if self.kind == "lstm":
            out, (hh, cc) = self.rnn(x, (h[: self.layers].contiguous(), h[self.layers:].contiguous()))
            return out, torch.cat([hh, cc])
        return self.rnn(x, h.contiguous())

    def initial_memory(self, num_envs: int, device: torch.device | str = "cpu") -> Memory:
        return {"rnn": torch.zeros(num_envs, self.state_layers, self.rnn.hidden_size, device=device)}

    def legacy_memory(self, hidden: torch.Tensor) -> Memory:
        """A checkpoint's recurrent state from before the memory protocol, (state_layers, N, H)."""
        return {"rnn": hidden.transpose(0, 1).contiguous()}

    def forward(self, x: torch.Tensor, memory: Memory, start: torch.Tensor) -> tuple[torch.Tensor, Memory]:
        """x (T, N, H), memory {"rnn": (N, state_layers, H)}, start (T, N) -> out (T, N, H), the memory after."""
        out, h = self.run(x, memory["rnn"].transpose(0, 1), start)
        return out, {"rnn": h.transpose(0, 1)}

    def run(self, x: torch.Tensor, h: torch.Tensor, start: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """`forward` on the layer-first state h (state_layers, N, H), as torch's RNNs take it.

        One step (acting) runs directly. A sequence (learning) is cut into episode
        segments, which run as one packed sequence: a single ATen/cuDNN call instead
        of a Python loop over time. A segment starting at t=0 continues `h` (unless
        start[0] resets it); every other segment starts from zeros.
        """
        T, N = start.shape
        if T == 1:
            return self._run(x, _zero_where(h, start[0]))
        cut = start.t().reshape(-1).clone()  # env-major boundaries
        cut[::T] = 1.0
        # segment of each (env, t); an integer cumsum: a float one has no deterministic CUDA kernel and raises
        # under run.deterministic (torch.use_deterministic_algorithms)
        seg = (cut != 0).to(torch.int64).cumsum(0) - 1
        first = torch.nonzero(cut, as_tuple=False).squeeze(1)  # flat index where each segment starts
        num_segs = first.numel()
        lengths = torch.bincount(seg, minlength=num_segs)
        pos = torch.arange(N * T, device=x.device) - first[seg]
        padded = x.new_zeros(int(lengths.max()), num_segs, x.shape[-1])
        padded[pos, seg] = x.transpose(0, 1).reshape(N * T, -1)
        h0 = h.new_zeros(h.shape[0], num_segs, h.shape[-1])
        at_zero = first % T == 0
        envs = first[at_zero] // T
        h0[:, at_zero] = _zero_where(h[:, envs], start[0, envs])
        packed = nn.utils.rnn.pack_padded_sequence(padded, lengths.cpu(), enforce_sorted=False)
        out_packed, hn = self._run(packed, h0)
        out, _ = nn.utils.rnn.pad_packed_sequence(out_packed)
        out = out[pos, seg].view(N, T, -1).transpose(0, 1)
        last = seg.view(N, T)[:, -1]
        return out, hn[:, last]

