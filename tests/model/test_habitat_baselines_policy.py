"""policy.architecture=habitat_baselines without habitat-baselines installed: sizes, the previous action carried
in the recurrent state, one step at a time vs whole sequences, clear refusals (tests/interop compares it with
habitat-baselines' own classes where those are installed)."""

from __future__ import annotations

import dataclasses

import gymnasium
import numpy as np
import pytest
import torch

from ddppo.model import memory

from ddppo.export.habitat_baselines import export_payload
from ddppo.interop import habitat_checkpoint as habitat_ckpt
from ddppo.config import PolicyConfig
from testutil import parameter_count
from ddppo.model.habitat_baselines import GOAL_KEY, HabitatBaselinesPolicy
from ddppo.model.build import make_policy
from ddppo.model.habitat_baselines_simple import HabitatBaselinesSimplePolicy

PAPER = PolicyConfig(architecture="habitat_baselines", hidden_size=512, rnn_type="lstm", rnn_layers=2,
                     resnet_base_width=32, resnet_layers=[3, 4, 6, 3], resnet_bottleneck=True)
SIMPLE = PolicyConfig(architecture="habitat_baselines_simple", hidden_size=512, rnn_type="gru", rnn_layers=1)
SMALL = dataclasses.replace(PAPER, hidden_size=16, rnn_layers=1, resnet_base_width=8, resnet_layers=[2, 2, 2, 2],
                            resnet_bottleneck=False)


def spaces(size: int, actions: int = 4) -> tuple[gymnasium.spaces.Dict, gymnasium.spaces.Discrete]:
    return (gymnasium.spaces.Dict({"depth": gymnasium.spaces.Box(0.0, 1.0, (size, size, 1), np.float32),
                                   GOAL_KEY: gymnasium.spaces.Box(-np.inf, np.inf, (2,), np.float32)}),
            gymnasium.spaces.Discrete(actions))


def test_paper_policy_has_habitat_baselines_size_and_names():
    """habitat-baselines 0.3.320260507's PointNavResNetPolicy at 256x256 depth: 12,454,917 parameters in 179
    tensors (counted with its own classes, see tests/interop)."""
    policy = make_policy(*spaces(256), PAPER)
    sd = policy.state_dict()
    assert isinstance(policy, HabitatBaselinesPolicy)
    assert (len(sd), sum(p.numel() for p in policy.parameters())) == (179, 12_454_917)
    assert parameter_count(sd) == 12_454_917
    assert tuple(sd["net.visual_fc.1.weight"].shape) == (512, 2048)  # compression: 128 x 4 x 4 flattened
    assert tuple(sd["net.tgt_embeding.weight"].shape) == (32, 3)
    assert tuple(sd["net.prev_action_embedding.weight"].shape) == (5, 32)
    assert habitat_ckpt.summary(sd) == {
        "policy.architecture": "habitat_baselines", "policy.hidden_size": 512, "policy.rnn_type": "lstm",
        "policy.rnn_layers": 2, "policy.resnet_base_width": 32,
        "policy.resnet_layers": [3, 4, 6, 3], "policy.resnet_bottleneck": True, "image channels": 1, "actions": 4}
    assert memory.shapes(policy.initial_memory(3)) == {"rnn": (3, 4, 512), "prev_action": (3,)}  # h0 h1 c0 c1


def test_simple_policy_has_habitat_baselines_size_and_names():
    """habitat-baselines' PointNavBaselinePolicy at 128x128 depth, hidden 512: 3,994,757 parameters in 16 tensors
    (0.2.2 and 0.3.320260507's own classes agree, see tests/interop/test_habitat_baselines_simple_real.py)."""
    policy = make_policy(*spaces(128), SIMPLE)
    sd = policy.state_dict()
    assert isinstance(policy, HabitatBaselinesSimplePolicy)
    assert (len(sd), sum(p.numel() for p in policy.parameters())) == (16, 3_994_757)
    assert tuple(sd["net.visual_encoder.cnn.6.weight"].shape) == (512, 32 * 12 * 12)  # 128 -> 31 -> 14 -> 12
    assert tuple(sd["net.state_encoder.rnn.weight_ih_l0"].shape) == (3 * 512, 512 + 2)  # features + raw (r, theta)
    assert habitat_ckpt.summary(sd) == {"policy.architecture": "habitat_baselines_simple", "policy.hidden_size": 512,
                                        "policy.rnn_type": "gru", "policy.rnn_layers": 1, "image channels": 1,
                                        "actions": 4}
    assert memory.shapes(policy.initial_memory(3)) == {"rnn": (3, 1, 512)}  # the GRU's state only


def test_simple_policy_steps_match_the_whole_sequence_with_resets():
    torch.manual_seed(0)
    policy = make_policy(*spaces(40), dataclasses.replace(SIMPLE, hidden_size=16)).eval()
    T, N = 6, 3
    obs = {"depth": torch.rand(T, N, 40, 40, 1), GOAL_KEY: torch.rand(T, N, 2) * 3}
    start = torch.zeros(T, N)
    start[0], start[4, 2] = 1, 1
    hidden, logps, values, actions = policy.initial_memory(N), [], [], []
    for t in range(T):
        a, lp, v, hidden = policy.act({k: o[t] for k, o in obs.items()}, hidden, start[t])
        logps.append(lp), values.append(v), actions.append(a)
    with torch.no_grad():
        lp_seq, _, v_seq = policy.evaluate(obs, policy.initial_memory(N), start, torch.stack(actions))
    assert torch.allclose(lp_seq, torch.stack(logps), atol=1e-5)
    assert torch.allclose(v_seq, torch.stack(values), atol=1e-5)
    # the goal is really an input (raw, not embedded): another goal changes the value
    other = {k: v.clone() for k, v in obs.items()}
    other[GOAL_KEY][:, :, 0] += 1.0
    with torch.no_grad():
        assert not torch.allclose(policy.evaluate(other, policy.initial_memory(N), start, torch.stack(actions))[2],
                                  v_seq)


def test_simple_policy_refuses_what_it_cannot_read():
    with pytest.raises(ValueError, match="rnn_type=gru and policy.rnn_layers=1"):
        make_policy(*spaces(64), dataclasses.replace(SIMPLE, rnn_type="lstm"))
    with pytest.raises(ValueError, match="at least 36x36"):
        make_policy(*spaces(32), SIMPLE)
    blind = gymnasium.spaces.Dict({GOAL_KEY: gymnasium.spaces.Box(-np.inf, np.inf, (2,), np.float32)})
    with pytest.raises(ValueError, match="'rgb' and/or 'depth'"):
        make_policy(blind, gymnasium.spaces.Discrete(4), SIMPLE)


@pytest.mark.parametrize("cfg,size", [(SMALL, 32), (SIMPLE, 64)])
def test_key_mapping_both_ways(cfg, size):
    sd = make_policy(*spaces(size), cfg).state_dict()
    old = {f"actor_critic.{k}": v for k, v in sd.items()}
    assert habitat_ckpt.from_habitat_keys(old) == sd
    assert habitat_ckpt.to_habitat_keys(sd, "0.2") == old
    assert habitat_ckpt.from_habitat_keys(habitat_ckpt.to_habitat_keys(sd)) == sd
    assert habitat_ckpt.is_habitat_state_dict(old) and not habitat_ckpt.is_habitat_state_dict({"actor.weight": 0})
    payload = export_payload(sd, dataclasses.make_dataclass("C", ["policy"])(cfg), 3, "0.2")
    assert payload["state_dict"].keys() == old.keys()
    assert habitat_ckpt.config_values(payload["config"])["policy.architecture"] == cfg.architecture
    with pytest.raises(ValueError, match="layout"):
        habitat_ckpt.to_habitat_keys(sd, "0.1")


def test_steps_match_the_whole_sequence_with_resets():
    """act() step by step (previous action fed back through the state) == evaluate() over the sequence."""
    torch.manual_seed(0)
    policy = make_policy(*spaces(32), SMALL).eval()
    T, N = 5, 3
    obs = {"depth": torch.rand(T, N, 32, 32, 1), GOAL_KEY: torch.rand(T, N, 2) * 3}
    start = torch.zeros(T, N)
    start[0], start[3, 1] = 1, 1
    hidden, logps, values, actions = policy.initial_memory(N), [], [], []
    for t in range(T):
        a, lp, v, hidden = policy.act({k: o[t] for k, o in obs.items()}, hidden, start[t])
        assert torch.equal(hidden["prev_action"], a.float())
        logps.append(lp), values.append(v), actions.append(a)
    with torch.no_grad():
        lp_seq, _, v_seq = policy.evaluate(obs, policy.initial_memory(N), start, torch.stack(actions))
    assert torch.allclose(lp_seq, torch.stack(logps), atol=1e-5)
    assert torch.allclose(v_seq, torch.stack(values), atol=1e-5)
    # the KL reference's path (sequence_params with the actions taken) gives the same distributions and state
    params, after = policy.sequence_params(obs, policy.initial_memory(N), start, torch.stack(actions))
    assert torch.allclose(params.gather(-1, torch.stack(actions).unsqueeze(-1)).squeeze(-1), lp_seq, atol=1e-5)
    assert all(torch.allclose(after[k], hidden[k], atol=1e-5) for k in hidden)
    # the previous action matters: another one changes the distribution (so it is really fed in)
    other = memory.clone(hidden)
    other["prev_action"] = (other["prev_action"] + 1) % 4
    o = {k: v[-1] for k, v in obs.items()}
    with torch.no_grad():
        p1 = policy.dist_params(policy.features({k: v[None] for k, v in o.items()}, hidden, torch.zeros(1, N))[0])
        p2 = policy.dist_params(policy.features({k: v[None] for k, v in o.items()}, other, torch.zeros(1, N))[0])
    assert not torch.allclose(p1, p2)


def test_environment_without_its_inputs_is_refused_naming_what_is_missing():
    grid = gymnasium.spaces.Dict({"pointgoal": gymnasium.spaces.Box(-1, 1, (3,), np.float32),
                                  "view": gymnasium.spaces.Box(0, 255, (7, 7, 3), np.uint8)})
    with pytest.raises(ValueError, match="pointgoal_with_gps_compass"):
        make_policy(grid, gymnasium.spaces.Discrete(4), SMALL)
    rgbd = gymnasium.spaces.Dict({**spaces(32)[0].spaces, "rgb": gymnasium.spaces.Box(0, 255, (32, 32, 3), np.uint8)})
    with pytest.raises(ValueError, match="no 'rgb' observation"):
        make_policy(rgbd, gymnasium.spaces.Discrete(4), SMALL)
    with pytest.raises(ValueError, match="resnet50"):
        make_policy(*spaces(32), dataclasses.replace(SMALL, resnet_layers=[1, 1, 1, 1]))
