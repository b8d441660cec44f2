"""Action distributions (ddppo.model.actions) against torch.distributions' own, and the policy acting and learning
in MultiDiscrete and MultiBinary spaces."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
import torch
from torch.distributions import Bernoulli, Categorical, Independent, Normal, kl_divergence

from ddppo.config import PolicyConfig
from ddppo.model.actions import action_buffer, action_kind, env_actions
from ddppo.model.policy import Policy
from ddppo.rollout.storage import RolloutStorage

MD = gymnasium.spaces.MultiDiscrete([3, 2, 5])
MB = gymnasium.spaces.MultiBinary(4)


def torch_multi_categorical(out: torch.Tensor, nvec: list[int]) -> list[Categorical]:
    """One Categorical per dim from the actor's outputs side by side (SB3's layout)."""
    return [Categorical(logits=part) for part in out.split(nvec, -1)]


def test_multidiscrete_logp_entropy_kl_equal_a_categorical_per_dim():
    kind = action_kind(MD)
    gen = torch.Generator().manual_seed(0)
    out, ref_out = (torch.randn(6, 10, generator=gen) * 3 for _ in range(2))
    params, ref = kind.params(out), kind.params(ref_out)
    dists, ref_dists = torch_multi_categorical(out, [3, 2, 5]), torch_multi_categorical(ref_out, [3, 2, 5])
    actions = torch.stack([d.sample() for d in dists], -1)
    torch.testing.assert_close(kind.log_prob(params, actions),
                               sum(d.log_prob(a) for d, a in zip(dists, actions.unbind(-1))))
    torch.testing.assert_close(kind.entropy(params), sum(d.entropy() for d in dists))
    torch.testing.assert_close(kind.kl(params, ref), sum(kl_divergence(d, r) for d, r in zip(dists, ref_dists)))
    assert kind.mode(params).tolist() == torch.stack([d.probs.argmax(-1) for d in dists], -1).tolist()
    assert torch.isfinite(params).all()  # the padding is finite: 0 * pad is 0, never NaN


def test_multidiscrete_samples_stay_in_each_dims_range():
    kind = action_kind(MD)
    torch.manual_seed(1)
    action, logp = kind.sample(kind.params(torch.zeros(2000, 10)), deterministic=False)
    assert action.dtype == torch.long and action.shape == (2000, 3)
    assert action.min() == 0 and action.max(0).values.tolist() == [2, 1, 4]
    torch.testing.assert_close(logp, torch.full((2000,), -float(np.log(30))))


def test_multibinary_logp_entropy_kl_equal_independent_bernoullis():
    kind = action_kind(MB)
    gen = torch.Generator().manual_seed(2)
    out, ref_out = (torch.randn(5, 4, generator=gen) * 2 for _ in range(2))
    params, ref = kind.params(out), kind.params(ref_out)
    dist, ref_dist = Independent(Bernoulli(logits=out), 1), Independent(Bernoulli(logits=ref_out), 1)
    actions = dist.sample()
    torch.testing.assert_close(kind.log_prob(params, actions), dist.log_prob(actions))
    torch.testing.assert_close(kind.entropy(params), dist.entropy())
    torch.testing.assert_close(kind.kl(params, ref), kl_divergence(dist, ref_dist))
    torch.testing.assert_close(kind.mode(torch.tensor([[-1.0, 0.0, 2.0, 0.5]])), torch.tensor([[0.0, 0.0, 1.0, 1.0]]))


def test_discrete_and_gaussian_kinds_equal_torchs_distributions():
    gen = torch.Generator().manual_seed(3)
    cat = action_kind(gymnasium.spaces.Discrete(5))
    out = torch.randn(4, 5, generator=gen)
    p = cat.params(out)
    a = torch.tensor([0, 4, 2, 1])
    torch.testing.assert_close(cat.log_prob(p, a), Categorical(logits=out).log_prob(a))
    torch.testing.assert_close(cat.entropy(p), Categorical(logits=out).entropy())
    gauss = action_kind(gymnasium.spaces.Box(-1, 1, (3,)))
    mean, log_std = torch.randn(4, 3, generator=gen), torch.randn(3, generator=gen)
    p = gauss.params(mean, log_std)
    normal = Independent(Normal(mean, log_std.exp().expand_as(mean)), 1)
    x = torch.randn(4, 3, generator=gen)
    torch.testing.assert_close(gauss.log_prob(p, x), normal.log_prob(x))
    torch.testing.assert_close(gauss.entropy(p), normal.entropy())
    _, logp = gauss.sample(p, deterministic=True)
    torch.testing.assert_close(logp, normal.log_prob(mean))


def test_storage_and_env_actions_follow_the_space():
    assert action_buffer(MD) == ((3,), torch.long) and action_buffer(MB) == ((4,), torch.float32)
    assert action_buffer(gymnasium.spaces.Discrete(3)) == ((), torch.long)
    storage = RolloutStorage(4, 2, gymnasium.spaces.Dict({"x": gymnasium.spaces.Box(-1, 1, (2,))}), MD, {},
                             torch.device("cpu"))
    assert storage.actions.shape == (4, 2, 3) and storage.actions.dtype == torch.long
    bits = env_actions(MB, np.array([[1.0, 0.0, 1.0, 1.0]], np.float32))
    assert bits.dtype == np.int8 and MB.contains(bits[0])
    box = gymnasium.spaces.Box(-1, 1, (2,))
    assert env_actions(box, np.array([[3.0, -0.5]])).tolist() == [[1.0, -0.5]]


@pytest.mark.parametrize("space", [MD, MB], ids=["multidiscrete", "multibinary"])
def test_policy_acts_and_evaluates_what_it_acted(space):
    obs_space = gymnasium.spaces.Dict({"x": gymnasium.spaces.Box(-1, 1, (3,)),
                                       "cells": gymnasium.spaces.MultiDiscrete([4, 4, 6])})
    policy = Policy(obs_space, space, PolicyConfig(hidden_size=16, rnn_type="gru"))
    obs = {"x": torch.randn(5, 3), "cells": torch.tensor([[0, 3, 5]] * 5)}
    h = policy.initial_memory(5)
    torch.manual_seed(4)
    action, logp, value, h2 = policy.act(obs, h, torch.ones(5))
    assert action.shape == (5, *space.shape)
    assert all(space.contains(a) for a in env_actions(space, action.numpy()))
    new_logp, ent, new_value, params = policy.evaluate_with_params(
        {k: v[None] for k, v in obs.items()}, h, torch.ones(1, 5), action[None])
    torch.testing.assert_close(new_logp[0], logp)
    torch.testing.assert_close(new_value[0], value)
    assert (ent > 0).all() and policy.kl(params, params).abs().max() < 1e-6
    new_logp.sum().backward()
    assert policy.actor.weight.grad is not None and policy.actor.weight.grad.abs().sum() > 0
    det, *_ = policy.act(obs, h, torch.ones(5), deterministic=True)
    assert torch.equal(det, policy.action_kind.mode(policy.dist_params(
        policy.features({k: v[None] for k, v in obs.items()}, h, torch.ones(1, 5))[0][0])))


def test_multidiscrete_observation_embeds_each_dim_with_rows_of_its_own():
    obs_space = gymnasium.spaces.Dict({"cells": gymnasium.spaces.MultiDiscrete([2, 3])})
    policy = Policy(obs_space, gymnasium.spaces.Discrete(2), PolicyConfig(hidden_size=8, rnn_type="none"))
    enc = policy.encoders["cells"]
    assert enc.embed.weight.shape == (5, 8)
    torch.testing.assert_close(enc(torch.tensor([[1.0, 2.0]])), (enc.embed.weight[1] + enc.embed.weight[4])[None])
    torch.testing.assert_close(enc(torch.tensor([[0.0, 0.0]])), (enc.embed.weight[0] + enc.embed.weight[2])[None])
