"""The actor-critic (ddppo/model/policy.py): shapes, recurrent resets, sequence == step-by-step."""

import gymnasium
import numpy as np
import pytest
import torch

from ddppo.config import PolicyConfig
from ddppo.model import memory
from ddppo.model.policy import Policy

VEC_SPACE = gymnasium.spaces.Dict({
    "pointgoal": gymnasium.spaces.Box(-1, 1, (3,), np.float32),
    "depth": gymnasium.spaces.Box(0, 1, (6,), np.float32),
})
IMG_SPACE = gymnasium.spaces.Dict({
    "rgb": gymnasium.spaces.Box(0, 255, (8, 8, 3), np.uint8),
    "pointgoal": gymnasium.spaces.Box(-1, 1, (3,), np.float32),
})
DISCRETE = gymnasium.spaces.Discrete(4)
BOX = gymnasium.spaces.Box(-1, 1, (2,), np.float32)


def make(obs_space=VEC_SPACE, action_space=DISCRETE, **cfg):
    torch.manual_seed(0)
    return Policy(obs_space, action_space, PolicyConfig(**{"hidden_size": 16, **cfg}))


def random_obs(space, T, N, gen):
    out = {}
    for k, s in space.spaces.items():
        if s.dtype == np.uint8:
            out[k] = torch.randint(0, 256, (T, N, *s.shape), dtype=torch.uint8, generator=gen)
        else:
            out[k] = torch.randn(T, N, *s.shape, generator=gen)
    return out


def random_actions(action_space, T, N, gen):
    if isinstance(action_space, gymnasium.spaces.Discrete):
        return torch.randint(0, action_space.n, (T, N), generator=gen)
    return torch.randn(T, N, action_space.shape[0], generator=gen)


def starts(T, N):
    """Episode starts at t=0 for all, and mid-sequence for some envs."""
    s = torch.zeros(T, N)
    s[0] = 1.0
    s[3, 0] = 1.0
    s[5, 1:] = 1.0
    return s


CASES = [
    ("gru", 1, VEC_SPACE, DISCRETE),
    ("gru", 2, VEC_SPACE, BOX),
    ("lstm", 1, VEC_SPACE, DISCRETE),
    ("lstm", 2, IMG_SPACE, BOX),
    ("none", 1, IMG_SPACE, DISCRETE),
]


def random_memory(p, N, gen):
    """A memory carried over from a previous rollout: the policy's layout, random values."""
    return {k: torch.randn(v.shape, generator=gen) for k, v in p.initial_memory(N).items()}


@pytest.mark.parametrize("rnn,layers,obs_space,action_space", CASES)
def test_shapes(rnn, layers, obs_space, action_space):
    p = make(obs_space, action_space, rnn_type=rnn, rnn_layers=layers)
    N, T = 3, 6
    h = p.initial_memory(N)
    if rnn == "none":
        assert h == {}
    else:
        expected_layers = {"gru": layers, "lstm": 2 * layers}[rnn]
        assert h["rnn"].shape == (N, expected_layers, 16) and not h["rnn"].any()
    gen = torch.Generator().manual_seed(0)
    obs = random_obs(obs_space, 1, N, gen)
    action, logp, value, h2 = p.act({k: v[0] for k, v in obs.items()}, h, torch.ones(N))
    assert action.shape == ((N,) if action_space is DISCRETE else (N, 2))
    assert logp.shape == value.shape == (N,) and memory.shapes(h2) == memory.shapes(h)
    if action_space is DISCRETE:
        assert action.dtype == torch.long and ((0 <= action) & (action < 4)).all()
    obs = random_obs(obs_space, T, N, gen)
    acts = random_actions(action_space, T, N, gen)
    lp, ent, v = p.evaluate(obs, h, starts(T, N), acts)
    assert lp.shape == ent.shape == v.shape == (T, N)
    assert torch.isfinite(lp).all() and (ent > 0).all()


@pytest.mark.parametrize("rnn,layers,obs_space,action_space", CASES)
def test_evaluate_over_sequence_equals_step_by_step_act(rnn, layers, obs_space, action_space):
    """What the update sees (evaluate over whole sequences, resets inside) is what the
    collector saw (act one step at a time, carrying the hidden state)."""
    p = make(obs_space, action_space, rnn_type=rnn, rnn_layers=layers)
    T, N = 8, 3
    gen = torch.Generator().manual_seed(1)
    obs = random_obs(obs_space, T, N, gen)
    start = starts(T, N)
    h0 = random_memory(p, N, gen)  # carried over from a previous rollout
    start[0] = torch.tensor([0.0, 1.0, 0.0])  # env 1 starts an episode at t=0, the others continue
    h = h0
    acts, logps, values = [], [], []
    for t in range(T):
        a, lp, v, h = p.act({k: x[t] for k, x in obs.items()}, h, start[t])
        acts.append(a)
        logps.append(lp)
        values.append(v)
    acts = torch.stack(acts)
    lp, _, v = p.evaluate(obs, h0, start, acts)
    torch.testing.assert_close(lp, torch.stack(logps), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(v, torch.stack(values), rtol=1e-4, atol=1e-5)
    # and value() agrees with act() for the same state
    torch.testing.assert_close(p.value({k: x[0] for k, x in obs.items()}, h0, start[0]), values[0],
                               rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("rnn", ["gru", "lstm"])
def test_hidden_state_resets_at_episode_start(rnn):
    p = make(rnn_type=rnn, rnn_layers=2)
    T, N = 6, 2
    gen = torch.Generator().manual_seed(2)
    obs = random_obs(VEC_SPACE, T, N, gen)
    acts = random_actions(DISCRETE, T, N, gen)
    start = torch.zeros(T, N)
    start[3, 0] = 1.0  # env 0 starts a new episode at t=3
    h_a = random_memory(p, N, gen)
    h_b = random_memory(p, N, gen)
    lp_a, _, v_a = p.evaluate(obs, h_a, start, acts)
    lp_b, _, v_b = p.evaluate(obs, h_b, start, acts)
    # before the reset, the initial state matters; from the reset on (env 0), it does not
    assert not torch.allclose(v_a[:3, 0], v_b[:3, 0])
    assert not torch.allclose(v_a[:, 1], v_b[:, 1])  # env 1 never resets
    torch.testing.assert_close(v_a[3:, 0], v_b[3:, 0])
    torch.testing.assert_close(lp_a[3:, 0], lp_b[3:, 0])
    # a start at t=3 is the same as a fresh sequence from t=3 with a zero state
    sub = {k: x[3:, :1] for k, x in obs.items()}
    fresh_start = torch.zeros(T - 3, 1)
    fresh_start[0] = 1.0
    _, _, v_fresh = p.evaluate(sub, p.initial_memory(1), fresh_start, acts[3:, :1])
    torch.testing.assert_close(v_fresh[:, 0], v_a[3:, 0])
    # step-by-step: act with start=1 ignores whatever hidden state it is given
    x0 = {k: v[0] for k, v in obs.items()}
    a1 = p.act(x0, h_a, torch.ones(N))
    a2 = p.act(x0, memory.zeros(h_a, N), torch.ones(N))
    torch.testing.assert_close(a1[2], a2[2])
    torch.testing.assert_close(a1[3], a2[3])


@pytest.mark.parametrize("rnn", ["gru", "lstm"])
def test_episode_start_clears_a_non_finite_hidden_state(rnn):
    """A start zeroes the state whatever it holds: NaN * 0 is NaN, so a multiplicative reset would keep a
    poisoned env's state NaN for ever (and `act` would later fail in multinomial)."""
    p = make(rnn_type=rnn)
    N, T = 3, 4
    gen = torch.Generator().manual_seed(3)
    obs = random_obs(VEC_SPACE, T, N, gen)
    poisoned = random_memory(p, N, gen)
    poisoned["rnn"][0] = float("nan")
    poisoned["rnn"][1] = float("inf")
    start = torch.tensor([1.0, 1.0, 0.0])
    action, logp, value, h = p.act({k: v[0] for k, v in obs.items()}, poisoned, start)
    assert torch.isfinite(logp).all() and torch.isfinite(value).all() and torch.isfinite(h["rnn"]).all()
    fresh = p.act({k: v[0] for k, v in obs.items()}, memory.zeros(poisoned, N), start)
    torch.testing.assert_close(value[:2], fresh[2][:2])
    seq_start = torch.zeros(T, N)
    seq_start[0] = start
    lp, _, v = p.evaluate(obs, poisoned, seq_start, random_actions(DISCRETE, T, N, gen))
    assert torch.isfinite(lp).all() and torch.isfinite(v).all()


def test_recurrent_policy_has_memory():
    """Without a reset the hidden state carries information: the same observation at t=1 after
    different observations at t=0 gives different values."""
    p = make(rnn_type="gru")
    N = 2
    gen = torch.Generator().manual_seed(3)
    o0 = {k: v[0] for k, v in random_obs(VEC_SPACE, 1, N, gen).items()}
    o1 = {k: v[0, :1].expand(N, *v.shape[2:]) for k, v in random_obs(VEC_SPACE, 1, N, gen).items()}
    _, _, _, h = p.act(o0, p.initial_memory(N), torch.ones(N))
    _, _, value, _ = p.act(o1, h, torch.zeros(N))
    assert not torch.allclose(value[0], value[1])


def test_gaussian_head_logp_and_entropy_by_hand():
    p = make(action_space=BOX, rnn_type="none", init_log_std=-0.5)
    gen = torch.Generator().manual_seed(4)
    obs = random_obs(VEC_SPACE, 2, 3, gen)
    acts = random_actions(BOX, 2, 3, gen)
    lp, ent, _ = p.evaluate(obs, p.initial_memory(3), torch.ones(2, 3), acts)
    with torch.no_grad():
        feats, _ = p.features(obs, p.initial_memory(3), torch.ones(2, 3))
        mean = p.actor(p.actor_input(feats))  # the actor half (auto: a critic of its own)
    std = torch.exp(torch.tensor(-0.5))
    expected = (-((acts - mean) ** 2) / (2 * std**2) - torch.log(std) - 0.5 * np.log(2 * np.pi)).sum(-1)
    torch.testing.assert_close(lp, expected, rtol=1e-5, atol=1e-5)
    expected_ent = 2 * (0.5 + 0.5 * np.log(2 * np.pi) + (-0.5))
    torch.testing.assert_close(ent, torch.full((2, 3), float(expected_ent)), rtol=1e-5, atol=1e-5)
    # log_std is learnable
    assert any(n == "log_std" for n, _ in p.named_parameters())


def test_deterministic_act():
    p = make(rnn_type="none")
    gen = torch.Generator().manual_seed(5)
    x = {k: v[0] for k, v in random_obs(VEC_SPACE, 1, 4, gen).items()}
    h = p.initial_memory(4)
    a, *_ = p.act(x, h, torch.ones(4), deterministic=True)
    feats, _ = p.features({k: v[None] for k, v in x.items()}, h, torch.ones(1, 4))
    assert torch.equal(a, p.actor(feats[0]).argmax(-1))
    pb = make(action_space=BOX, rnn_type="none")
    a, *_ = pb.act(x, h, torch.ones(4), deterministic=True)
    feats, _ = pb.features({k: v[None] for k, v in x.items()}, h, torch.ones(1, 4))
    torch.testing.assert_close(a, pb.actor(pb.actor_input(feats[0])))


def test_unsupported_action_space_rejected():
    with pytest.raises(ValueError, match="unsupported action space"):
        make(action_space=gymnasium.spaces.MultiDiscrete([[2, 3], [4, 5]]))  # 2-D nvec: flatten it first


def test_discrete_logp_and_entropy_equal_the_categorical_distributions():
    policy = make(rnn_type="none")
    gen = torch.Generator().manual_seed(3)
    obs = random_obs(VEC_SPACE, 4, 3, gen)
    actions = random_actions(DISCRETE, 4, 3, gen)
    logp, entropy, _, params = policy.evaluate_with_params(obs, policy.initial_memory(3), torch.ones(4, 3), actions)
    dist = torch.distributions.Categorical(logits=params)
    torch.testing.assert_close(logp, dist.log_prob(actions))
    torch.testing.assert_close(entropy, dist.entropy())
    peaked = torch.tensor([[0.0, float("-inf"), float("-inf")]])  # a certain action: entropy 0, not NaN
    clamped = peaked.clamp(min=torch.finfo(peaked.dtype).min)
    assert float(-(clamped * clamped.exp()).sum(-1)) == 0.0
