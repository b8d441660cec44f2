"""Sizes a config asks for that no machine can hold, refused before anything is allocated.

`size_lines` prints the memory core's size and its memory per env and per rank under `ddppo config`, as the core
states them (`CoreSize`: each core's `sizes(cfg)`, ddppo/model/core.py).

A lower bound from the config alone (what the observations add is known only once the envs are built): the
rollout storage's per-step scalars and the policy's memory (acting, and the rollout's copy at its start), and the policy's core with its gradients and Adam's
two moments. Past the host's whole memory, the run could only die of an allocation error, minutes in.
"""

from __future__ import annotations

from typing import NamedTuple

from ddppo.user_code import CORES

SCALARS_PER_STEP = 12  # reward, value, return, advantage, log-prob, action, masks, ...: 4-byte values per env-step
FLOAT = 4


def _gib(n: float) -> str:
    return f"{n / 2**30:,.1f} GiB"


class CoreSize(NamedTuple):
    """What a memory core states of itself for a config (each core's `sizes(cfg)`, ddppo/model/core.py)."""

    parameters: int  # the core's parameters, exactly
    memory_bytes: int  # one env's memory (the policy's state between steps), in bytes
    memory: str  # what that memory is, in the config's keys, for `ddppo config`


def core_size(cfg) -> CoreSize:
    """policy.rnn_type's core's own statement of its size (ddppo.user_code.CORES: the first lookup of a built-in
    imports ddppo.model.cores, of `MODULE:NAME` the user's module)."""
    return CORES.get(cfg.policy.rnn_type, "policy.rnn_type").sizes(cfg)


def estimate_bytes(cfg) -> dict[str, int]:
    """Bytes the config needs at least, by the key that sets each part."""
    steps, envs, hidden = cfg.rollout.num_steps + 1, cfg.env.num_envs, cfg.policy.hidden_size
    # the per-step scalars, and the memory twice: the acting one and the rollout's copy at its start
    core = core_size(cfg)
    storage = steps * envs * SCALARS_PER_STEP * FLOAT + 2 * envs * core.memory_bytes
    params = core.parameters + cfg.policy.mlp_layers * hidden * hidden
    return {"storage": storage, "policy": params * FLOAT * 4}  # weights, gradients, Adam's two moments


def _mib(n: float) -> str:
    return f"{n / 2**20:,.2f} MiB"


def size_lines(cfg) -> str:
    """`ddppo config`'s closing YAML comment: the memory core's size and its memory per env and per rank."""
    p = cfg.policy
    if ":" in p.architecture:
        return f"# sizes: policy.architecture={p.architecture} defines its own core and memory\n"
    if p.rnn_type == "none":
        return "# sizes: no memory core (policy.rnn_type=none)\n"
    core = core_size(cfg)
    kind = ("float32" if cfg.run.precision != "bf16" else
            "weights in float32, run under bf16 autocast (run.precision=bf16); memory as each line says")
    return (f"# sizes ({kind}; the encoders' weights depend on the observations):\n"
            f"#   core ({p.rnn_type}): {core.parameters:,} parameters, {_mib(core.parameters * FLOAT)} of weights\n"
            f"#   memory per env: {core.memory_bytes:,} bytes ({core.memory})\n"
            f"#   memory per rank: {_mib(core.memory_bytes * cfg.env.num_envs)} (env.num_envs={cfg.env.num_envs}; the "
            f"rollout keeps one more copy, at its start)\n")


def memory_problem(cfg, total_bytes: int) -> str | None:
    """One line naming the keys, the size needed and the host's memory, or None when it may fit."""
    parts = estimate_bytes(cfg)
    need = sum(parts.values())
    if need <= total_bytes:
        return None
    if parts["storage"] >= parts["policy"]:
        what = (f"rollout storage for env.num_envs={cfg.env.num_envs} x rollout.num_steps={cfg.rollout.num_steps}"
                f" x policy.hidden_size={cfg.policy.hidden_size}")
        fix = "lower env.num_envs or rollout.num_steps (or policy.hidden_size)"
        if cfg.policy.rnn_type == "transformer":
            what += f" and policy.transformer.context={cfg.policy.transformer.context}"
            fix = "lower env.num_envs, rollout.num_steps or policy.transformer.context (or policy.hidden_size)"
    else:
        what = f"the policy's weights, gradients and optimiser state for policy.hidden_size={cfg.policy.hidden_size}"
        fix = ("lower policy.hidden_size (or policy.mlp_layers, "
               + ("policy.transformer.layers)" if cfg.policy.rnn_type == "transformer" else "policy.rnn_layers)"))
    return f"needs at least {_gib(need)} of memory ({what}); this host has {_gib(total_bytes)} in all: {fix}"
