"""Sizes a config asks for that no machine can hold, refused before anything is allocated.

`size_lines` prints the memory core's size and its memory per env and per rank under `ddppo config`.

A lower bound from the config alone (what the observations add is known only once the envs are built): the
rollout storage's per-step scalars and the policy's memory (acting, and the rollout's copy at its start), and the policy's core with its gradients and Adam's
two moments. Past the host's whole memory, the run could only die of an allocation error, minutes in.
"""

from __future__ import annotations

SCALARS_PER_STEP = 12  # reward, value, return, advantage, log-prob, action, masks, ...: 4-byte values per env-step
FLOAT = 4


def _gib(n: float) -> str:
    return f"{n / 2**30:,.1f} GiB"


def ffn_width(hidden: int) -> int:
    """The transformer's SwiGLU width: two thirds of 4 x hidden (LLaMA's), rounded up to a multiple of 8."""
    return 8 * ((8 * hidden // 3 + 7) // 8)


LEARNED_POSITIONS = 1024  # policy.transformer.positions=learned: episode steps from this on share the last embedding


def core_parameters(cfg) -> int:
    """Parameters of the policy's memory core (policy.rnn_type), exactly: the encoders' depend on the observations."""
    p, hidden = cfg.policy, cfg.policy.hidden_size
    if p.rnn_type == "transformer":
        t = p.transformer
        per_layer = 4 * hidden * hidden + 3 * hidden * ffn_width(hidden) + 2 * hidden  # qkv, out, SwiGLU, 2 norms
        return t.layers * per_layer + hidden + (LEARNED_POSITIONS * hidden if t.positions == "learned" else 0)
    gates = {"gru": 3, "lstm": 4}.get(p.rnn_type, 0)
    return p.rnn_layers * gates * (2 * hidden * hidden + 2 * hidden)


def memory_bytes_per_env(cfg) -> int:
    """One env's memory (the policy's state between steps): a GRU/LSTM state, or the transformer's KV cache,
    layers x 2 x (context - 1) x hidden x 4 bytes (2 under run.precision=bf16: ddppo.model.precision.
    store_memory_in), plus its two counters (len, pos)."""
    p, hidden = cfg.policy, cfg.policy.hidden_size
    if p.rnn_type == "transformer":
        width = 2 if cfg.run.precision == "bf16" else FLOAT
        return p.transformer.layers * 2 * (p.transformer.context - 1) * hidden * width + 16
    return {"gru": 1, "lstm": 2}.get(p.rnn_type, 0) * p.rnn_layers * hidden * FLOAT


def estimate_bytes(cfg) -> dict[str, int]:
    """Bytes the config needs at least, by the key that sets each part."""
    steps, envs, hidden = cfg.rollout.num_steps + 1, cfg.env.num_envs, cfg.policy.hidden_size
    # the per-step scalars, and the memory twice: the acting one and the rollout's copy at its start
    storage = steps * envs * SCALARS_PER_STEP * FLOAT + 2 * envs * memory_bytes_per_env(cfg)
    params = core_parameters(cfg) + cfg.policy.mlp_layers * hidden * hidden
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
    if p.rnn_type == "transformer":
        width = "2 bytes (bf16: run.precision)" if cfg.run.precision == "bf16" else "4 bytes"
        what = f"KV cache: policy.transformer.layers x 2 x (context - 1) x policy.hidden_size x {width}"
    else:
        what = f"{p.rnn_type} state: policy.rnn_layers x policy.hidden_size x 4 bytes{' x 2' * (p.rnn_type == 'lstm')}"
    core, per_env = core_parameters(cfg), memory_bytes_per_env(cfg)
    kind = ("float32" if cfg.run.precision != "bf16" else
            "weights in float32, run under bf16 autocast (run.precision=bf16); memory as each line says")
    return (f"# sizes ({kind}; the encoders' weights depend on the observations):\n"
            f"#   core ({p.rnn_type}): {core:,} parameters, {_mib(core * FLOAT)} of weights\n"
            f"#   memory per env: {per_env:,} bytes ({what})\n"
            f"#   memory per rank: {_mib(per_env * cfg.env.num_envs)} (env.num_envs={cfg.env.num_envs}; the rollout "
            f"keeps one more copy, at its start)\n")


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
