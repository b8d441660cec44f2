"""The memory core's protocol: what a policy carries over an env's steps, between the encoders and the heads.

`policy.rnn_type` names a core from the registry `ddppo.user_code.CORES` (gru, lstm, transformer, none: built in,
ddppo/model/cores.py), or yours, `MODULE:NAME`, a `Core` subclass registered with
`ddppo.model.build.register_core(NAME)` in MODULE (imported from the working directory first, also by `ddppo eval`
and on resume). docs/guides/custom-core.md has a worked example.

A core is called as `out, memory = core(x, memory, start)`:

- `x` (T, N, width): the features of T steps of N envs (T = 1 when acting; the rollout's length, or a
  minibatch's, when learning); `width` is policy.hidden_size;
- `memory`: the memory before the first of the T steps, a dict of tensors with the env first, (N, ...)
  (ddppo/model/memory.py): the core alone defines its keys (`initial_memory`) and alone reads them;
- `start` (T, N): 1.0 where step t begins an episode of env n: nothing from before it may reach that step or later
  ones of the env (the core empties the env's memory there, by a masked fill, never by multiplying: NaN * 0 is NaN);
- `out` (T, N, width) and the memory after the T steps, with the keys, shapes and dtypes of `initial_memory`.

Acting step by step from a memory and one learning pass over the same steps from that memory must give the same
outputs (PPO's ratio compares them); a gradient may flow through `x`, never into the memory handed in.
"""

from __future__ import annotations

import torch
from torch import nn

from ddppo.config import Config, PolicyConfig
from ddppo.config.sizes import CoreSize
from ddppo.errors import CheckpointError
from ddppo.model.memory import Memory, nbytes


class Core(nn.Module):
    """The protocol (the module's docstring). A subclass defines `forward` and `initial_memory`; `build`, `sizes` and
    `legacy_memory` have defaults."""

    @classmethod
    def build(cls, cfg: PolicyConfig, width: int) -> Core:
        """The core for the config's policy section over features of `width` (policy.hidden_size); default
        `cls(width)`: override it to read your own sizes (from `cfg`, or constants of your module)."""
        return cls(width)

    @classmethod
    def sizes(cls, cfg: Config) -> CoreSize:
        """Its parameter count and one env's memory in bytes, for `ddppo config` and the memory check
        (ddppo/config/sizes.py); default: measured on a core built on the meta device (no memory allocated), or on
        the CPU where building it reads values (a meta tensor has none)."""
        try:
            core, per_env = _measured(cls, cfg, "meta")
        except Exception:  # whatever a constructor does with a value-less tensor: build it for real
            core, per_env = _measured(cls, cfg, "cpu")
        return CoreSize(sum(p.numel() for p in core.parameters()), per_env, f"{cfg.policy.rnn_type}'s initial_memory")

    def initial_memory(self, num_envs: int, device: torch.device | str = "cpu") -> Memory:
        """The memory of `num_envs` envs at an episode's start."""
        raise NotImplementedError

    def legacy_memory(self, hidden: torch.Tensor) -> Memory:
        """The memory a checkpoint from before the memory protocol saved as one tensor (layers, N, H): only a GRU's
        or LSTM's can be read."""
        raise CheckpointError("this checkpoint saved its recurrent state as one tensor, from before the memory "
                              "protocol: it cannot hold this core's memory; resume it with the policy.rnn_type it was "
                              "trained with")

    def forward(self, x: torch.Tensor, memory: Memory, start: torch.Tensor) -> tuple[torch.Tensor, Memory]:
        raise NotImplementedError


def _measured(kind: type[Core], cfg: Config, device: str) -> tuple[Core, int]:
    """The core `kind` builds for `cfg` on `device`, and one env's initial memory in bytes."""
    with torch.device(device):
        core = kind.build(cfg.policy, cfg.policy.hidden_size)
        return core, nbytes(core.initial_memory(1, device))


class NoCore(Core):
    """policy.rnn_type=none: the features pass through; the memory is empty."""

    @classmethod
    def build(cls, cfg: PolicyConfig, width: int) -> NoCore:
        return cls()

    @classmethod
    def sizes(cls, cfg: Config) -> CoreSize:
        return CoreSize(0, 0, "none")

    def initial_memory(self, num_envs: int, device: torch.device | str = "cpu") -> Memory:
        return {}

    def legacy_memory(self, hidden: torch.Tensor) -> Memory:
        return {}

    def forward(self, x: torch.Tensor, memory: Memory, start: torch.Tensor) -> tuple[torch.Tensor, Memory]:
        return x, memory
