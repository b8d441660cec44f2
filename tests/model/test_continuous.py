"""Continuous control pieces of the model: a critic of its own (policy.critic), running observation normalisation
(normalize.obs) and what `auto` resolves to."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
import torch

from ddppo.config import NormalizeConfig, PolicyConfig
from ddppo.model.build import make_policy
from ddppo.normalization import (ObsNormalizer, RunningMoments, batch_moments, merge_moments,
                                 observation_normalizer, resolve)
from ddppo.model.policy import Policy

VEC = gymnasium.spaces.Dict({"obs": gymnasium.spaces.Box(-np.inf, np.inf, (5,), np.float64),
                             "goal": gymnasium.spaces.Box(-1, 1, (2,), np.float32)})
IMG = gymnasium.spaces.Dict({"rgb": gymnasium.spaces.Box(0, 255, (8, 8, 3), np.uint8),
                             "goal": gymnasium.spaces.Box(-1, 1, (2,), np.float32)})
BOX = gymnasium.spaces.Box(-1, 1, (3,), np.float32)
DISCRETE = gymnasium.spaces.Discrete(4)


def policy(critic: str, obs=VEC, action=BOX, **cfg) -> Policy:
    torch.manual_seed(0)
    return Policy(obs, action, PolicyConfig(**{"hidden_size": 16, "rnn_type": "none", "critic": critic, **cfg}))


def value_loss_grads(p: Policy) -> dict[str, torch.Tensor | None]:
    gen = torch.Generator().manual_seed(1)
    T, N = 4, 3
    obs = {k: torch.randn(T, N, *s.shape, generator=gen) for k, s in VEC.spaces.items()}
    actions = torch.randn(T, N, 3, generator=gen)
    _, _, value, _ = p.evaluate_with_params(obs, p.initial_memory(N), torch.zeros(T, N), actions)
    (value ** 2).mean().backward()
    return {name: prm.grad for name, prm in p.named_parameters()}


def test_the_critics_gradients_do_not_reach_the_actors_parameters():
    grads = value_loss_grads(policy("separate"))
    actor = {n: g for n, g in grads.items() if not n.startswith(("critic_trunk.", "critic."))}
    assert actor and all(g is None or not g.any() for g in actor.values()), \
        [n for n, g in actor.items() if g is not None and g.any()]
    critic = {n: g for n, g in grads.items() if n.startswith(("critic_trunk.", "critic."))}
    assert critic and all(g is not None and g.any() for g in critic.values())


def test_a_shared_trunk_does_pass_the_critics_gradients_to_the_actors_encoders():
    """The other side of the test above: with one trunk the value loss moves the features the actor reads."""
    grads = value_loss_grads(policy("shared"))
    assert grads["fuse.0.weight"] is not None and grads["fuse.0.weight"].any()


def test_auto_gives_a_critic_of_its_own_only_to_mlp_policies_on_continuous_control():
    assert policy("auto").critic_trunk is not None
    assert policy("auto", action=DISCRETE).critic_trunk is None  # discrete (CartPole, gridnav): as before
    assert policy("auto", obs=IMG).critic_trunk is None  # images: habitat's shared trunk
    assert policy("auto", rnn_type="gru").critic_trunk is None  # recurrent: one core, shared


def test_running_moments_merged_in_batches_equal_the_moments_of_all_the_data():
    gen = torch.Generator().manual_seed(0)
    parts = [torch.randn(n, 4, generator=gen, dtype=torch.float64) * 3 + 7 for n in (5, 1, 40, 13)]
    m = RunningMoments((4,))
    for x in parts:
        m.merge(torch.tensor(float(len(x))), x.mean(0), ((x - x.mean(0)) ** 2).sum(0))
    every = torch.cat(parts)
    assert torch.allclose(m.mean, every.mean(0)) and torch.allclose(m.var, every.var(0, unbiased=False))
    assert float(m.count) == len(every)
    total = (0.0, torch.zeros(4, dtype=torch.float64), torch.zeros(4, dtype=torch.float64))
    for x in parts:
        total = merge_moments(total, batch_moments(x))
    assert torch.allclose(total[1], every.mean(0)) and torch.allclose(total[2] / total[0], every.var(0, False))


def test_observations_are_normalised_and_clipped_but_images_keep_their_scaling():
    space = gymnasium.spaces.Dict({**IMG.spaces, "obs": VEC["obs"]})
    norm = ObsNormalizer(space, clip=2.0, eps=1e-8)
    assert norm.keys == ["goal", "obs"]  # not the image
    norm.stats["obs"].merge(torch.tensor(10.0), torch.full((5,), 3.0), torch.full((5,), 40.0))  # var 4
    x = torch.tensor([[3.0, 5.0, 1.0, 100.0, -100.0]])
    img = torch.randint(0, 255, (1, 8, 8, 3), dtype=torch.uint8)
    out = norm({"obs": x, "rgb": img, "goal": torch.zeros(1, 2)})
    assert torch.allclose(out["obs"], torch.tensor([[0.0, 1.0, -1.0, 2.0, -2.0]]))
    assert out["rgb"] is img


def test_the_policy_acts_on_normalised_observations_and_saves_the_statistics():
    norm = NormalizeConfig(obs="auto")
    def built(action):  # as training and eval build it: the normaliser from the normalize section
        pc = PolicyConfig(hidden_size=16, rnn_type="none")
        return make_policy(VEC, action, pc, obs_norm=observation_normalizer(norm, pc, VEC, action))

    p = built(BOX)
    assert any(k.startswith("obs_norm.") for k in p.state_dict())
    obs = {"obs": torch.full((2, 5), 50.0), "goal": torch.zeros(2, 2)}
    before = p.act(obs, p.initial_memory(2), torch.ones(2), deterministic=True)[0]
    p.obs_norm.stats["obs"].merge(torch.tensor(4.0), torch.full((5,), 50.0), torch.full((5,), 4.0))
    after = p.act(obs, p.initial_memory(2), torch.ones(2), deterministic=True)[0]
    assert not torch.equal(before, after)  # the statistics are applied in the forward pass
    fresh = built(BOX)
    fresh.act(obs, fresh.initial_memory(2), torch.ones(2), deterministic=True)  # derives the affine of the zero stats
    fresh.load_state_dict(p.state_dict())  # a loaded checkpoint's statistics are the ones applied, not a cached copy
    assert torch.equal(fresh.act(obs, fresh.initial_memory(2), torch.ones(2), deterministic=True)[0], after)
    assert not any(k.startswith("obs_norm.") for k in built(DISCRETE).state_dict())


@pytest.mark.parametrize("setting,action,expected", [("auto", BOX, True), ("auto", DISCRETE, False),
                                                     ("on", DISCRETE, True), ("off", BOX, False)])
def test_normalisation_settings_resolve_on_the_spaces(setting, action, expected):
    assert resolve(setting, VEC, action) is expected
    assert resolve("auto", IMG, BOX) is False


def test_activation_tanh_bounds_every_hidden_feature_of_actor_and_critic():
    """policy.activation=tanh (CleanRL's and SB3's MLP default): hidden features in (-1, 1) on both trunks; ReLU's
    are unbounded above and never negative."""
    big = {k: 100 * torch.randn(1, 7, *s.shape) for k, s in VEC.spaces.items()}
    for activation, check in (("tanh", lambda f: f.abs().max() < 1 and (f < 0).any()),
                              ("relu", lambda f: f.min() >= 0 and f.max() > 1)):
        p = policy("separate", activation=activation)
        feats, _ = p.features(big, p.initial_memory(7), torch.zeros(1, 7))
        assert feats.shape[-1] == 32 and check(feats), activation
        assert sum(isinstance(m, torch.nn.Tanh) for m in p.modules()) == (10 if activation == "tanh" else 0)  # 2 keys x 2 layers + fuse, twice


def test_init_torch_keeps_pytorchs_initialisation_and_orthogonal_gives_cleanrls_gains():
    ortho, plain = policy("separate"), policy("separate", init="torch")
    w = ortho.actor.weight  # gain 0.01: orthogonal rows scaled, so W W^T = 0.01^2 I
    assert torch.allclose(w @ w.t(), 1e-4 * torch.eye(w.shape[0]), atol=1e-7)
    assert torch.allclose(ortho.critic.weight.norm(), torch.tensor(1.0), atol=1e-5)  # one row, gain 1
    assert not ortho.fuse[0].bias.any() and plain.fuse[0].bias.any()  # orthogonal zeroes biases; torch's do not
    bound = 1 / np.sqrt(plain.actor.in_features)  # PyTorch's Linear: U(-1/sqrt(fan_in), 1/sqrt(fan_in))
    assert plain.actor.weight.abs().max() <= bound and plain.actor.weight.abs().max() > 0.1 * bound


def test_activation_and_init_are_refused_for_habitat_baselines_architectures():
    from ddppo.config import load_config
    from ddppo.errors import ConfigError

    for key, value in (("policy.activation", "tanh"), ("policy.init", "torch")):
        with pytest.raises(ConfigError, match=f"{key}={value} needs policy.architecture=ddppo"):
            load_config(None, ["policy.architecture=habitat_baselines_simple", "policy.rnn_type=gru",
                               f"{key}={value}"])


def test_gaussian_act_samples_and_scores_exactly_as_torch_normal():
    """Policy.act writes Normal's sample and log_prob out (no Distribution per step): the same numbers and the same
    random stream as the Distribution path that evaluate() uses."""
    p = policy("separate", activation="tanh")
    obs = {k: torch.randn(6, *s.shape, generator=torch.Generator().manual_seed(2)) for k, s in VEC.spaces.items()}
    torch.manual_seed(5)
    action, logp, value, _ = p.act(obs, p.initial_memory(6), torch.zeros(6))
    feats, _ = p.features({k: v.unsqueeze(0) for k, v in obs.items()}, p.initial_memory(6), torch.zeros(1, 6))
    dist = p.params_to_distribution(p.dist_params(feats[0]))
    torch.manual_seed(5)
    assert torch.equal(action, dist.sample())
    assert torch.equal(logp, dist.log_prob(action)) and torch.equal(value, p.value_of(feats[0]))  # Independent: summed
    mean_action, _, _, _ = p.act(obs, p.initial_memory(6), torch.zeros(6), deterministic=True)
    assert torch.equal(mean_action, dist.mean)
