"""Memory cores as a registry (ddppo.user_code.CORES, built-ins in ddppo/model/cores.py): policy.rnn_type's
choices, each core's statement of its sizes against the core as built, a user's core by `MODULE:NAME` (the
custom-core guide's example) acting step by step as it learns over the whole sequence, and every policy on the
actor-critic interface's `__init__`."""

from __future__ import annotations

import dataclasses
import sys

import gymnasium
import numpy as np
import pytest
import torch
from torch import nn

from ddppo.config import PolicyConfig, load_config
from ddppo.config.sizes import core_size
from ddppo.errors import ConfigError
from ddppo.model.actor_critic import ActorCritic
from ddppo.model.build import make_policy
from ddppo.model.core import Core
from ddppo.model.cores import make_core
from ddppo.user_code import CORES
from testutil import REPO

SPACE = gymnasium.spaces.Dict({"state": gymnasium.spaces.Box(-1, 1, (5,), np.float32)})
ACTIONS = gymnasium.spaces.Discrete(3)


@pytest.fixture
def own_registry(monkeypatch):
    """CORES as it is, restored afterwards (with the example's module forgotten), so what a test registers stays
    in that test."""
    monkeypatch.setattr(CORES, "_builders", dict(CORES._builders))
    monkeypatch.setattr(CORES, "_extra", list(CORES._extra))
    monkeypatch.syspath_prepend(str(REPO / "docs" / "examples"))
    yield CORES
    sys.modules.pop("decay_core", None)


def test_rnn_type_chooses_from_the_registry():
    field = {f.name: f for f in dataclasses.fields(PolicyConfig)}["rnn_type"]
    assert field.metadata["choices"] is CORES
    assert tuple(CORES)[:4] == ("gru", "lstm", "transformer", "none")
    with pytest.raises(ConfigError) as err:
        load_config(None, ["policy.rnn_type=mamba"])
    assert "policy.rnn_type='mamba'" in str(err.value) and "gru, lstm, transformer, none" in str(err.value)
    assert "register_core" in str(err.value)


@pytest.mark.parametrize("overrides", [["policy.rnn_type=gru"], ["policy.rnn_type=lstm", "policy.rnn_layers=2"],
                                       ["policy.rnn_type=transformer", "policy.transformer.context=9"],
                                       ["policy.rnn_type=transformer", "policy.transformer.positions=learned",
                                        "policy.hidden_size=48", "policy.transformer.layers=3"],
                                       ["policy.rnn_type=none"]])
def test_a_builtin_core_states_the_sizes_it_is_built_with(overrides):
    """Each built-in core's formulas (what `ddppo config` prints and the memory check adds) against the protocol's
    default, which counts the core built on the meta device."""
    cfg = load_config(None, overrides)
    kind = CORES.get(cfg.policy.rnn_type)
    stated, measured = kind.sizes(cfg), Core.sizes.__func__(kind, cfg)
    assert (stated.parameters, stated.memory_bytes) == (measured.parameters, measured.memory_bytes)
    core = make_core(cfg.policy, cfg.policy.hidden_size)
    assert stated.parameters == sum(p.numel() for p in core.parameters())
    assert core_size(cfg) == stated


def _steps(T: int, N: int, seed: int = 0):
    """Observations (T, N, 5) and start flags (T, N): every env starts at t = 0, some again later."""
    g = torch.Generator().manual_seed(seed)
    start = (torch.rand(T, N, generator=g) < 0.3).float()
    start[0] = 1.0
    return {"state": torch.rand(T, N, 5, generator=g) * 2 - 1}, start


def test_a_user_core_by_module_and_name_acts_as_it_learns(own_registry):
    cfg = PolicyConfig(hidden_size=8, rnn_type="decay_core:decay")
    policy = make_policy(SPACE, ACTIONS, cfg)
    from decay_core import DecayCore

    assert isinstance(policy.core, DecayCore) and "core.mix.weight" in policy.state_dict()
    T, N = 6, 3
    obs, start = _steps(T, N)
    memory, taken, acted = policy.initial_memory(N), [], []
    for t in range(T):  # acting, one step at a time
        action, logp, _, memory = policy.act({k: v[t] for k, v in obs.items()}, memory, start[t])
        taken.append(action)
        acted.append(logp)
    logp, _, _ = policy.evaluate(obs, policy.initial_memory(N), start, torch.stack(taken))  # learning, one pass
    torch.testing.assert_close(logp, torch.stack(acted), rtol=0, atol=1e-6)
    _, after = policy.sequence_params(obs, policy.initial_memory(N), start, torch.stack(taken))
    torch.testing.assert_close(after["avg"], memory["avg"], rtol=0, atol=1e-6)
    # its sizes: the protocol's default, measured on the meta device
    sizes = core_size(load_config(None, ["policy.hidden_size=8", "policy.rnn_type=decay_core:decay"]))
    assert (sizes.parameters, sizes.memory_bytes) == (2 * 8 * 8 + 8, 8 * 4)


def test_an_episode_start_empties_a_user_core_s_memory(own_registry):
    policy = make_policy(SPACE, ACTIONS, PolicyConfig(hidden_size=8, rnn_type="decay_core:decay"))
    obs, _ = _steps(1, 2)
    memory = {"avg": torch.tensor([[float("nan")] * 8, [5.0] * 8])}
    fresh = policy.sequence_params(obs, policy.initial_memory(2), torch.ones(1, 2))[0]
    assert torch.equal(policy.sequence_params(obs, memory, torch.ones(1, 2))[0], fresh)


def test_a_registered_core_must_build_a_core(own_registry):
    @own_registry.register("identity")
    class NotACore:
        @classmethod
        def build(cls, cfg, width):
            return nn.Identity()

    with pytest.raises(TypeError, match="policy.rnn_type='identity' built a Identity, not a ddppo.model.core.Core"):
        make_core(PolicyConfig(rnn_type="identity"), 8)


@pytest.mark.parametrize("architecture", ["ddppo", "habitat_baselines", "habitat_baselines_simple"])
def test_every_policy_runs_the_interface_s_init(architecture):
    """The habitat-baselines policies no longer skip an `__init__`: what the interface sets is there on each."""
    goal = "pointgoal_with_gps_compass"
    obs = gymnasium.spaces.Dict({"depth": gymnasium.spaces.Box(0.0, 1.0, (64, 64, 1), np.float32),
                                 goal: gymnasium.spaces.Box(-np.inf, np.inf, (2,), np.float32)})
    policy = make_policy(obs, gymnasium.spaces.Discrete(4),
                         PolicyConfig(architecture=architecture, hidden_size=16, resnet_base_width=8))
    assert isinstance(policy, ActorCritic)
    assert {"action_kind", "hidden_size", "kept", "log_std"} <= set(vars(policy))
    assert policy.log_std is None and policy.kept == {}


def test_a_core_that_reads_values_while_built_is_measured_on_the_cpu(own_registry):
    """The default sizes build on the meta device; a constructor that reads a value (a meta tensor has none)
    falls back to one real build."""

    @own_registry.register("reads")
    class ReadsValues(Core):
        def __init__(self, width):
            super().__init__()
            self.scale = nn.Parameter(torch.ones(width))
            assert float(self.scale.detach().sum()) == width  # .item() of a meta tensor raises

        def initial_memory(self, num_envs, device="cpu"):
            return {"h": torch.zeros(num_envs, 3, device=device)}

    sizes = core_size(load_config(None, ["policy.hidden_size=8", "policy.rnn_type=reads"]))
    assert (sizes.parameters, sizes.memory_bytes) == (8, 12)
