"""KL to a reference policy: the exact KL term, the loss term, and adaptive beta, against hand computations."""

from __future__ import annotations

import math

import gymnasium
import numpy as np
import pytest
import torch

from ddppo.config import KLRefConfig, PolicyConfig
from ddppo.ppo.loss import ppo_loss
from ddppo.model.policy import Policy
from ddppo.ppo.reference import ReferencePolicy


def _policy(discrete=True):
    obs = gymnasium.spaces.Dict({"x": gymnasium.spaces.Box(-1, 1, (3,), np.float32)})
    act = gymnasium.spaces.Discrete(3) if discrete else gymnasium.spaces.Box(-1, 1, (2,), np.float32)
    return Policy(obs, act, PolicyConfig(hidden_size=8, rnn_type="none"))


def test_categorical_kl_matches_hand_computation():
    p = _policy()
    probs = torch.tensor([[0.5, 0.3, 0.2]])
    ref = torch.tensor([[0.2, 0.2, 0.6]])
    expected = sum(a * math.log(a / b) for a, b in zip(probs[0].tolist(), ref[0].tolist()))
    got = p.kl(probs.log(), ref.log())
    assert got.item() == pytest.approx(expected, rel=1e-6)


def test_gaussian_kl_matches_closed_form():
    p = _policy(discrete=False)
    mu, log_std = torch.tensor([[0.3, -1.0]]), torch.tensor([[0.0, math.log(2.0)]])
    mu_r, log_std_r = torch.tensor([[0.0, 0.0]]), torch.tensor([[math.log(0.5), 0.0]])
    expected = 0.0
    for m1, s1, m2, s2 in zip(mu[0], log_std[0].exp(), mu_r[0], log_std_r[0].exp()):
        expected += math.log(s2 / s1) + (s1**2 + (m1 - m2) ** 2) / (2 * s2**2) - 0.5
    got = p.kl(torch.cat([mu, log_std], -1), torch.cat([mu_r, log_std_r], -1))
    assert got.item() == pytest.approx(float(expected), rel=1e-5)


def test_loss_adds_beta_times_masked_mean_kl():
    T, N = 3, 2
    z = torch.zeros(T, N)
    valid = torch.tensor([[1.0, 1.0], [1.0, 0.0], [0.0, 0.0]])
    kl = torch.tensor([[0.1, 0.3], [0.2, 99.0], [50.0, 50.0]])
    base = ppo_loss(z, z, z, z, z, z, z, valid, clip=0.2, clip_value_loss=False, value_coef=0.5, entropy_coef=0.0)
    with_kl = ppo_loss(z, z, z, z, z, z, z, valid, clip=0.2, clip_value_loss=False, value_coef=0.5,
                       entropy_coef=0.0, kl_ref=kl, kl_coef=0.5)
    assert with_kl.kl_ref.item() == pytest.approx(0.2)  # (0.1 + 0.3 + 0.2) / 3, invalid steps ignored
    assert (with_kl.total - base.total).item() == pytest.approx(0.5 * 0.2)


def _reference(tmp_path, **kw) -> ReferencePolicy:
    ref = ReferencePolicy.__new__(ReferencePolicy)
    ref.cfg = KLRefConfig(checkpoint="x", **kw)
    return ref


def test_adaptive_beta_rises_falls_and_holds(tmp_path):
    ref = _reference(tmp_path, beta=0.1, target_kl=0.01, tolerance=1.5, rate=2.0)
    assert ref.adapt(0.1, 0.02) == pytest.approx(0.2)  # 0.02 > 0.015: raise
    assert ref.adapt(0.2, 0.012) == pytest.approx(0.2)  # inside [0.00667, 0.015]: hold
    assert ref.adapt(0.2, 0.001) == pytest.approx(0.1)  # below: lower
    assert ref.adapt(0.1, float("nan")) == pytest.approx(0.1)


def test_fixed_beta_never_moves(tmp_path):
    ref = _reference(tmp_path, beta=0.3, adaptive=False)
    assert ref.adapt(0.3, 10.0) == 0.3 and ref.adapt(0.3, 0.0) == 0.3


@pytest.mark.parametrize("saved, run", [(torch.bfloat16, torch.float32), (torch.float32, torch.bfloat16)])
def test_a_resumed_reference_memory_takes_this_runs_dtype(saved, run):
    """A run resumed under another run.precision: the reference's saved memory (a KV cache) comes back in the dtype
    this run's reference memory has, as the policy's does (memory.restored), not in the checkpoint's."""
    ref = ReferencePolicy.__new__(ReferencePolicy)
    ref.device = torch.device("cpu")
    ref.memory = {"kv": torch.zeros(2, 3, 4, dtype=run), "len": torch.zeros(2, dtype=torch.long)}
    state = {"kv": torch.arange(24, dtype=torch.float32).reshape(2, 3, 4).to(saved),
             "len": torch.tensor([3, 1])}
    ref.load_state_dict(state)
    assert ref.memory["kv"].dtype == run and ref.memory["len"].dtype == torch.long
    assert torch.equal(ref.memory["kv"].float(), state["kv"].float()) and ref.memory["len"].tolist() == [3, 1]
