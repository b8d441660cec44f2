"""Sizes a config asks for that no machine can hold, refused before anything is allocated.

A lower bound from the config alone (what the observations add is known only once the envs are built): the
rollout storage's recurrent states and per-step scalars, and the policy's core with its gradients and Adam's
two moments. Past the host's whole memory, the run could only die of an allocation error, minutes in.
"""

from __future__ import annotations

SCALARS_PER_STEP = 12  # reward, value, return, advantage, log-prob, action, masks, ...: 4-byte values per env-step
FLOAT = 4


def _gib(n: float) -> str:
    return f"{n / 2**30:,.1f} GiB"


def estimate_bytes(cfg) -> dict[str, int]:
    """Bytes the config needs at least, by the key that sets each part."""
    steps, envs, hidden = cfg.rollout.num_steps + 1, cfg.env.num_envs, cfg.policy.hidden_size
    gates = {"gru": 3, "lstm": 4, "none": 0}.get(cfg.policy.rnn_type, 0)
    state = hidden * cfg.policy.rnn_layers * (2 if cfg.policy.rnn_type == "lstm" else 1) if gates else 0
    storage = steps * envs * (state + SCALARS_PER_STEP) * FLOAT
    params = gates * cfg.policy.rnn_layers * 2 * hidden * hidden + cfg.policy.mlp_layers * hidden * hidden
    return {"storage": storage, "policy": params * FLOAT * 4}  # weights, gradients, Adam's two moments


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
    else:
        what = f"the policy's weights, gradients and optimiser state for policy.hidden_size={cfg.policy.hidden_size}"
        fix = "lower policy.hidden_size (or policy.mlp_layers, policy.rnn_layers)"
    return f"needs at least {_gib(need)} of memory ({what}); this host has {_gib(total_bytes)} in all: {fix}"
