"""The built-in memory cores under their policy.rnn_type names (this module is the home of the registry
ddppo.user_code.CORES), and `make_core`, which builds the one the config names (the protocol: ddppo/model/core.py).
"""

from __future__ import annotations

from ddppo.config import PolicyConfig
from ddppo.model.core import Core, NoCore
from ddppo.model.recurrent import RecurrentCore
from ddppo.model.transformer import TransformerCore
from ddppo.user_code import CORES

CORES.register("gru")(RecurrentCore)
CORES.register("lstm")(RecurrentCore)
CORES.register("transformer")(TransformerCore)
CORES.register("none")(NoCore)


def make_core(cfg: PolicyConfig, width: int) -> Core:
    """policy.rnn_type's core over features of `width`: a built-in one or yours (`MODULE:NAME`)."""
    core_type = CORES.get(cfg.rnn_type, "policy.rnn_type")
    core = core_type.build(cfg, width)
    if not isinstance(core, Core):
        raise TypeError(f"policy.rnn_type={cfg.rnn_type!r} built a {type(core).__name__}, not a "
                        f"ddppo.model.core.Core: subclass it (docs/guides/custom-core.md)")
    return core
