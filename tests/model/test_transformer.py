"""The transformer core: acting step by step with its KV cache and the batched learning pass agree."""

from __future__ import annotations

import pytest
import torch

from ddppo.model.memory import assign, clone, select
from ddppo.model.transformer import TransformerCore

D, LAYERS, HEADS = 16, 2, 4


def _core(context: int, layers: int = LAYERS, positions: str = "rotary") -> TransformerCore:
    torch.manual_seed(0)
    return TransformerCore(D, layers, HEADS, context, positions=positions).eval()


def _act(core, x, start, memory):
    """Acting, one step at a time: out (T, N, D) and the memory after."""
    outs = []
    with torch.no_grad():
        for t in range(x.shape[0]):
            out, memory = core(x[t:t + 1], memory, start[t:t + 1])
            outs.append(out)
    return torch.cat(outs), memory


def _warm_memory(core, lengths: list[int]) -> dict:
    """A memory at a rollout boundary: env n has acted lengths[n] steps of one episode (unequal cache lengths)."""
    n, most = len(lengths), max(lengths)
    memory = core.initial_memory(n)
    x = torch.randn(most, n, D)
    for t in range(most):
        envs = torch.tensor([i for i in range(n) if t >= most - lengths[i]], dtype=torch.int64)
        if len(envs):
            with torch.no_grad():
                _, sub = core(x[t:t + 1, envs], select(memory, envs),
                              torch.zeros(1, len(envs)) if t > 0 else torch.ones(1, len(envs)))
            assign(memory, envs, sub)
    return memory


def _assert_memory_equal(a: dict, b: dict) -> None:
    """Equal lengths and positions, and equal keys and values in the valid slots (the rest are never read)."""
    assert a.keys() == b.keys()
    assert torch.equal(a["len"], b["len"]) and torch.equal(a["pos"], b["pos"])
    slots = a["k"].shape[3]
    valid = (torch.arange(slots).view(1, slots) >= slots - a["len"].view(-1, 1)).view(len(a["len"]), 1, 1, slots, 1)
    for key in ("k", "v"):
        assert (torch.where(valid, a[key] - b[key], 0).abs() <= 1e-5).all(), key


@pytest.mark.parametrize("positions", ["rotary", "learned"])
@pytest.mark.parametrize("context", [1, 6, 40])
def test_acting_and_learning_agree(context, positions):
    core = _core(context, positions=positions)
    T, N = 24, 6
    memory = _warm_memory(core, [0, 3, 9, 2, 30, 5])  # unequal lengths, one over the window, one empty
    start = torch.zeros(T, N)
    start[0, 0] = 1  # a start at t=0
    start[1, 1] = 1  # right after the rollout boundary
    start[11, 2] = 1  # mid-sequence
    start[[3, 4, 20], 3] = 1  # an episode longer than the context (3..19), and back-to-back starts
    # env 4 continues its 30-step episode through the whole rollout (slides past the context); env 5 never starts
    x = torch.randn(T, N, D)
    acted, acted_memory = _act(core, x, start, memory)
    learned, learned_memory = core(x, memory, start)
    delta = (acted - learned).abs().max().item()
    print(f"max |acting - learning| = {delta:.2e} (context {context}, {positions})")
    assert delta < 1e-5
    _assert_memory_equal(acted_memory, learned_memory)
    with torch.no_grad():  # a whole sequence without gradients (the KL reference): the cache assembled in place
        replayed, replayed_memory = core(x, memory, start)
    assert (replayed - learned).abs().max() < 1e-5
    _assert_memory_equal(replayed_memory, learned_memory)


def test_rollouts_carried_across_boundaries_agree():
    """Two rollouts: the memory the first returns is the second's start, for acting and learning alike."""
    core = _core(5)
    T, N = 7, 3
    memory = core.initial_memory(N)
    x, start = torch.randn(3 * T, N, D), (torch.rand(3 * T, N) < 0.15).float()
    acted, _ = _act(core, x, start, memory)
    outs = []
    with torch.no_grad():
        for r in range(3):
            out, memory = core(x[r * T:(r + 1) * T], memory, start[r * T:(r + 1) * T])
            outs.append(out)
    assert (torch.cat(outs) - acted).abs().max() < 1e-5


def test_variable_subsets_and_a_short_env_agree():
    """Envs step in subsets (variable mode), one preempted after a few steps; the learning pass over each env's
    own steps (padded after its last) from the rollout's start memory gives the outputs acting gave."""
    core = _core(4)
    N, ticks = 5, 30
    g = torch.Generator().manual_seed(1)
    memory = _warm_memory(core, [2, 0, 6, 1, 3])
    start_memory = clone(memory)
    xs, starts, outs = [[] for _ in range(N)], [[] for _ in range(N)], [[] for _ in range(N)]
    for _ in range(ticks):
        envs = torch.nonzero(torch.rand(N, generator=g) < 0.5).squeeze(1)
        envs = envs[envs != 4] if len(xs[4]) >= 2 else envs  # env 4: preempted after two steps
        if not len(envs):
            continue
        x = torch.randn(1, len(envs), D, generator=g)
        start = (torch.rand(1, len(envs), generator=g) < 0.2).float()
        with torch.no_grad():
            out, sub = core(x, select(memory, envs), start)
        assign(memory, envs, sub)
        for i, e in enumerate(envs.tolist()):
            xs[e].append(x[0, i])
            starts[e].append(start[0, i])
            outs[e].append(out[0, i])
    T = max(len(s) for s in xs)
    x_pad, start_pad = torch.randn(T, N, D, generator=g), torch.zeros(T, N)
    for e in range(N):
        if xs[e]:
            x_pad[: len(xs[e]), e] = torch.stack(xs[e])
            start_pad[: len(xs[e]), e] = torch.stack(starts[e])
    learned, _ = core(x_pad, start_memory, start_pad)
    delta = max((learned[: len(outs[e]), e] - torch.stack(outs[e])).abs().max().item() for e in range(N) if outs[e])
    print(f"max |acting - learning| in variable mode = {delta:.2e}")
    assert len(xs[4]) == 2 and delta < 1e-5


def test_a_start_empties_the_cache():
    """What came before an episode start (inputs, cache) does not change any output after it."""
    core = _core(8)
    T, N = 12, 2
    x, start = torch.randn(T, N, D), torch.zeros(T, N)
    start[5] = 1
    memory = _warm_memory(core, [4, 7])
    other_x = x.clone()
    other_x[:5] = torch.randn(5, N, D)
    other_memory = _warm_memory(core, [6, 1])
    for run in (lambda xx, m: _act(core, xx, start, m), lambda xx, m: core(xx, m, start)):
        a, mem_a = run(x, memory)
        b, mem_b = run(other_x, other_memory)
        assert not torch.equal(a[:5], b[:5])
        assert torch.equal(a[5:], b[5:])
        assert torch.equal(mem_a["len"], mem_b["len"]) and torch.equal(mem_a["pos"], mem_b["pos"])


def test_the_window_holds_context_steps():
    """One layer, context C: the output at t depends on x[t - C + 1] but not on x[t - C]."""
    C, T = 4, 10
    core = _core(C, layers=1)
    x, start = torch.randn(T, 1, D), torch.zeros(T, 1)
    base, _ = _act(core, x, start, core.initial_memory(1))
    for s, changes in ((T - 1 - C, False), (T - C, True)):
        moved = x.clone()
        moved[s] += 1.0
        out, _ = _act(core, moved, start, core.initial_memory(1))
        assert torch.equal(out[-1], base[-1]) != changes


def test_memory_counts_the_episode():
    core = _core(3)
    start = torch.tensor([[1.0], [0.0], [0.0], [0.0], [1.0], [0.0]])
    _, memory = core(torch.randn(6, 1, D), core.initial_memory(1), start)
    assert memory["len"].tolist() == [2] and memory["pos"].tolist() == [2]
    assert memory["k"].shape == (1, LAYERS, HEADS, 2, D // HEADS) and memory["k"].dtype == torch.float32


def test_gradient_reaches_every_parameter():
    core = _core(6, positions="learned").train()
    x = torch.randn(9, 3, D, requires_grad=True)
    start = torch.zeros(9, 3)
    start[4, 1] = 1
    out, memory = core(x, _warm_memory(core, [2, 0, 5]), start)
    out.square().sum().backward()
    for name, p in core.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name
    assert x.grad.abs().sum() > 0 and not memory["k"].requires_grad


def test_dropout_only_where_gradients_are_taken():
    torch.manual_seed(0)
    core = TransformerCore(D, LAYERS, HEADS, 5, dropout=0.5).train()
    x, start, memory = torch.randn(4, 2, D), torch.zeros(4, 2), core.initial_memory(2)
    with torch.no_grad():
        a, _ = core(x, memory, start)
        b, _ = core(x, memory, start)
    assert torch.equal(a, b)
    c, _ = core(x, memory, start)
    assert not torch.equal(a, c)


def test_attention_goes_through_sdpa(monkeypatch):
    calls = []
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def counted(q, k, v, attn_mask=None, **kw):
        calls.append(attn_mask.dtype)
        return sdpa(q, k, v, attn_mask=attn_mask, **kw)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", counted)
    core = _core(5)
    core(torch.randn(3, 2, D), core.initial_memory(2), torch.zeros(3, 2))
    assert calls == [torch.bool] * LAYERS


@pytest.mark.parametrize("heads", [3, 16])
def test_heads_must_split_the_width_evenly(heads):
    with pytest.raises(ValueError, match="policy.transformer.heads"):
        TransformerCore(D, 1, heads, 4)


def test_a_start_reads_a_poisoned_cache_as_empty():
    """An episode start ignores whatever the cache holds, NaN included (masked slots weigh exactly 0 only if they
    are finite), in acting and learning alike."""
    core = _core(5)
    memory = _warm_memory(core, [2, 4])
    memory["k"][1], memory["v"][1] = float("nan"), float("inf")
    start = torch.tensor([[0.0, 1.0], [0.0, 0.0], [1.0, 0.0]])
    x = torch.randn(3, 2, D)
    acted, after = _act(core, x, start, memory)
    learned, _ = core(x, memory, start)
    assert torch.isfinite(acted).all() and torch.isfinite(learned).all()
    assert torch.isfinite(after["k"]).all() and torch.isfinite(after["v"]).all()


def test_a_non_finite_step_stays_in_its_episode():
    """A NaN input (a broken observation) gives NaN at its step and in its episode's later steps' attention, never
    after the next episode start: the cache keeps zeros for it, as masked slots must weigh exactly 0."""
    core = _core(8)
    x, start = torch.randn(6, 1, D), torch.zeros(6, 1)
    x[1] = float("nan")
    start[3] = 1
    acted, memory = _act(core, x, start, core.initial_memory(1))
    learned, _ = core(x, core.initial_memory(1), start)
    for out in (acted, learned):
        assert torch.isnan(out[1]).all() and torch.isfinite(out[3:]).all()
    assert torch.isfinite(memory["k"]).all() and torch.isfinite(memory["v"]).all()


@pytest.mark.parametrize("overrides", [["policy.transformer.positions=learned", "policy.transformer.context=9"],
                                       ["policy.transformer.layers=3", "policy.hidden_size=48"],
                                       ["run.precision=bf16"]])
def test_config_sizes_are_the_core_s(overrides):
    """`ddppo config`'s figures (ddppo.config.sizes, from the config alone) are the built core's."""
    from ddppo.config import load_config
    from ddppo.config.sizes import core_size
    from ddppo.model.precision import store_memory_in

    cfg = load_config(None, ["policy.rnn_type=transformer", *overrides])
    t = cfg.policy.transformer
    core = TransformerCore(cfg.policy.hidden_size, t.layers, t.heads, t.context, t.positions)
    assert core_size(cfg).parameters == sum(p.numel() for p in core.parameters())
    store_memory_in(core, cfg.run.precision)
    memory = core.initial_memory(1)
    assert core_size(cfg).memory_bytes == sum(v.numel() * v.element_size() for v in memory.values())


def test_bf16_autocast_keeps_the_cache_in_the_weights_dtype():
    core = _core(6)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        with torch.no_grad():
            _, memory = core(torch.randn(1, 3, D), core.initial_memory(3), torch.zeros(1, 3))
        out, after = core(torch.randn(5, 3, D), memory, torch.zeros(5, 3))
    out.float().sum().backward()
    assert memory["k"].dtype == after["v"].dtype == torch.float32
    assert core.blocks[0].qkv.weight.grad is not None


def _policy(rnn_type="transformer", **transformer):
    import gymnasium
    import numpy as np

    from ddppo.config import PolicyConfig, TransformerConfig
    from ddppo.model.policy import Policy

    space = gymnasium.spaces.Dict({"pointgoal": gymnasium.spaces.Box(-1, 1, (3,), np.float32),
                                   "rgb": gymnasium.spaces.Box(0, 255, (8, 8, 3), np.uint8)})
    torch.manual_seed(0)
    cfg = PolicyConfig(hidden_size=16, rnn_type=rnn_type, rnn_layers=2, transformer=TransformerConfig(**transformer))
    return Policy(space, gymnasium.spaces.Discrete(4), cfg)


def _obs(T, N, gen):
    return {"pointgoal": torch.randn(T, N, 3, generator=gen),
            "rgb": torch.randint(0, 256, (T, N, 8, 8, 3), dtype=torch.uint8, generator=gen)}


@pytest.mark.parametrize("mode", ["lockstep", "variable"])
@pytest.mark.parametrize("rnn_type", ["transformer", "gru", "lstm"])
def test_policy_log_probs_of_acting_and_learning_agree(rnn_type, mode):
    """Policy level (encoders, core, heads): the log-probs and values `evaluate` computes over a rollout from the
    memory at its start are those `act` gave step by step, in lockstep and with envs stepping in subsets (a
    preempted env among them); the GRU and LSTM keep the same promise."""
    p = _policy(rnn_type, **({"layers": 2, "heads": 2, "context": 5} if rnn_type == "transformer" else {}))
    N, T = 4, 12
    gen = torch.Generator().manual_seed(2)
    memory = p.initial_memory(N)
    for t in range(7):  # a previous rollout: caches of unequal length, one env over the context
        envs = torch.arange(N)[t * torch.ones(N, dtype=torch.int64) >= torch.tensor([0, 5, 2, 6])]
        obs = {k: v[0] for k, v in _obs(1, len(envs), gen).items()}
        *_, sub = p.act(obs, select(memory, envs), (torch.rand(len(envs), generator=gen) < 0.1).float())
        assign(memory, envs, sub)
    start_memory = clone(memory)
    obs, start = _obs(T, N, gen), (torch.rand(T, N, generator=gen) < 0.15).float()
    start[0, 1] = start[1, 2] = 1
    steps = torch.full((N,), T) if mode == "lockstep" else torch.tensor([T, 3, 9, 7])  # env 1 preempted
    acts, logps, values = torch.zeros(T, N, dtype=torch.int64), torch.zeros(T, N), torch.zeros(T, N)
    done = torch.zeros(N, dtype=torch.int64)
    while (done < steps).any():
        envs = torch.nonzero(done < steps).squeeze(1)
        if mode == "variable":
            envs = envs[torch.rand(len(envs), generator=gen) < 0.6]
        if not len(envs):
            continue
        t = done[envs]
        a, lp, v, sub = p.act({k: x[t, envs] for k, x in obs.items()}, select(memory, envs), start[t, envs])
        assign(memory, envs, sub)
        acts[t, envs], logps[t, envs], values[t, envs] = a, lp, v
        done[envs] += 1
    lp, _, v = p.evaluate(obs, start_memory, start, acts)
    valid = torch.arange(T).view(T, 1) < steps.view(1, N)
    delta = max((lp - logps)[valid].abs().max().item(), (v - values)[valid].abs().max().item())
    print(f"max |delta log-prob or value| {rnn_type} {mode} = {delta:.2e}")
    assert delta < 1e-5


def test_policy_builds_the_configured_transformer():
    p = _policy(layers=3, heads=4, context=7, positions="learned")
    assert isinstance(p.core, TransformerCore) and len(p.core.blocks) == 3 and p.core.position is not None
    memory = p.initial_memory(2)
    assert memory["k"].shape == (2, 3, 4, 6, 4) and set(memory) == {"k", "v", "len", "pos"}
    with pytest.raises(Exception, match="cannot hold this core's memory"):
        p.legacy_memory(torch.zeros(1, 2, 16))


def test_a_bf16_cache_changes_nothing_under_bf16_autocast_and_halves_its_bytes():
    """run.precision=bf16 keeps the KV cache in bf16 (ddppo.model.precision.store_memory_in): the keys and values
    come out of bf16 projections, so acting from a bf16 cache gives exactly the outputs of acting from a float32
    one, and the learning pass from it agrees with acting as in float32."""
    from ddppo.model.precision import store_memory_in

    p = _policy(layers=2, heads=2, context=5)
    N, T = 3, 9
    gen = torch.Generator().manual_seed(4)
    obs, start = _obs(T, N, gen), (torch.rand(T, N, generator=gen) < 0.2).float()
    start[0] = 1
    actions = torch.zeros(T, N, dtype=torch.int64)
    runs = {}
    for precision in ("fp32", "bf16"):
        store_memory_in(p, precision)
        memory = p.initial_memory(N)
        first = clone(memory)
        logps = []
        with torch.autocast("cpu", dtype=torch.bfloat16):
            for t in range(T):
                a, lp, _, memory = p.act({k: v[t] for k, v in obs.items()}, memory, start[t], deterministic=True)
                actions[t] = a
                logps.append(lp.float())
            learned, _, _ = p.evaluate(obs, first, start, actions)
        runs[precision] = (torch.stack(logps), learned.float(), memory)
    assert runs["bf16"][2]["k"].dtype == torch.bfloat16 and runs["fp32"][2]["k"].dtype == torch.float32
    assert runs["bf16"][2]["k"].nbytes * 2 == runs["fp32"][2]["k"].nbytes
    assert torch.equal(runs["bf16"][0], runs["fp32"][0])  # acting: the same numbers from either cache
    assert torch.equal(runs["bf16"][1], runs["fp32"][1])  # learning from either rollout-start memory
    store_memory_in(p, "fp32")
    assert p.initial_memory(1)["k"].dtype == torch.float32
