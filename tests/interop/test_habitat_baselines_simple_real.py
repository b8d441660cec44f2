"""ddppo's habitat_baselines_simple policy against habitat-baselines' own PointNavBaselinePolicy (SimpleCNN + GRU),
and `ddppo export` into the installed release's own loading path (0.2.x: its PPO agent with `actor_critic.`
keys; 0.3.x: the policy, unprefixed), where habitat-baselines is installed; skipped otherwise (.ci/run installs
0.3.x and sets DDPPO_REQUIRE_HABITAT_BASELINES=1; /work-style 0.2.2 envs run the 0.2 branch).
"""

from __future__ import annotations

import os
import types

import gymnasium
import numpy as np
import pytest
import torch

from ddppo import checkpoint as ckpt
from ddppo.config import PolicyConfig
from ddppo.interop import habitat_checkpoint as habitat_ckpt
from ddppo.export.habitat_baselines import export_payload, installed_layout
from ddppo.model.habitat_baselines import GOAL_KEY
from ddppo.model.habitat_baselines_simple import HabitatBaselinesSimplePolicy
from hb_real import habitat_baselines_version, load_habitat_baselines
from testutil import parameter_count

HB_POLICY, WHY = load_habitat_baselines("PointNavBaselinePolicy")
if HB_POLICY is None and os.environ.get("DDPPO_REQUIRE_HABITAT_BASELINES") == "1":
    raise RuntimeError(f"DDPPO_REQUIRE_HABITAT_BASELINES=1 but {WHY}")
pytestmark = pytest.mark.skipif(HB_POLICY is None, reason=WHY)
SIZE, N, T, ACTIONS, HIDDEN = 64, 3, 4, 4, 512
CFG = PolicyConfig(architecture="habitat_baselines_simple", hidden_size=HIDDEN, rnn_type="gru", rnn_layers=1)


def hb_policy(size: int = SIZE) -> torch.nn.Module:
    from gym import spaces

    space = spaces.Dict({"depth": spaces.Box(0.0, 1.0, (size, size, 1), np.float32),
                         GOAL_KEY: spaces.Box(-np.inf, np.inf, (2,), np.float32)})
    return HB_POLICY(space, spaces.Discrete(ACTIONS), hidden_size=HIDDEN).eval()


def ddppo_policy(size: int = SIZE) -> HabitatBaselinesSimplePolicy:
    space = gymnasium.spaces.Dict({"depth": gymnasium.spaces.Box(0.0, 1.0, (size, size, 1), np.float32),
                                   GOAL_KEY: gymnasium.spaces.Box(-np.inf, np.inf, (2,), np.float32)})
    return HabitatBaselinesSimplePolicy(space, gymnasium.spaces.Discrete(ACTIONS), CFG).eval()


def compare(hb: torch.nn.Module, ours: HabitatBaselinesSimplePolicy) -> dict[str, float]:
    """Both stepped through T steps (env 1 starts a new episode at t=2), deterministic actions; the largest
    differences of log-probs, values, states, and of ddppo's whole-sequence evaluate against their steps."""
    g = torch.Generator().manual_seed(0)
    obs = {"depth": torch.rand(T, N, SIZE, SIZE, 1, generator=g),
           GOAL_KEY: torch.stack([torch.rand(T, N, generator=g) * 5, (torch.rand(T, N, generator=g) - 0.5) * 6], -1)}
    start = torch.zeros(T, N)
    start[0], start[2, 1] = 1, 1
    h_hb, prev, hidden = torch.zeros(N, 1, HIDDEN), torch.zeros(N, 1, dtype=torch.long), ours.initial_memory(N)
    diffs = {"logp": 0.0, "value": 0.0, "state": 0.0, "sequence_logp": 0.0, "sequence_value": 0.0}
    hb_logp, hb_value, actions = [], [], []
    with torch.no_grad():
        for t in range(T):
            o = {k: v[t] for k, v in obs.items()}
            feats, h_hb = hb.net(o, h_hb, prev, (start[t] == 0).view(N, 1))[:2]
            logp_hb = torch.log_softmax(hb.action_distribution(feats).logits, -1)
            value_hb = hb.critic(feats).squeeze(-1)
            feats_ours = ours.features({k: v[None] for k, v in o.items()}, hidden, start[t:t + 1])[0][0]
            action, _, value, hidden = ours.act(o, hidden, start[t], deterministic=True)
            assert torch.equal(action, logp_hb.argmax(-1)), f"step {t}: actions differ"
            diffs["logp"] = max(diffs["logp"], float((ours.dist_params(feats_ours) - logp_hb).abs().max()))
            diffs["value"] = max(diffs["value"], float((value - value_hb).abs().max()))
            diffs["state"] = max(diffs["state"], float((hidden["rnn"] - h_hb).abs().max()))
            hb_logp.append(logp_hb), hb_value.append(value_hb), actions.append(action)
            prev = action.view(N, 1)
        _, _, value_seq, params = ours.evaluate_with_params(obs, ours.initial_memory(N), start, torch.stack(actions))
    diffs["sequence_logp"] = float((params - torch.stack(hb_logp)).abs().max())
    diffs["sequence_value"] = float((value_seq - torch.stack(hb_value)).abs().max())
    return diffs


@pytest.mark.parametrize("size", [64, 128, 256])
def test_names_shapes_and_counts_are_habitat_baselines(size):
    hb, ours = hb_policy(size).state_dict(), ddppo_policy(size).state_dict()
    assert list(hb) == list(ours)  # same names, same order
    assert {k: tuple(v.shape) for k, v in hb.items()} == {k: tuple(v.shape) for k, v in ours.items()}
    print(f"{size}x{size} depth: {parameter_count(hb):,} parameters on both sides")


def test_same_weights_same_actions_values_and_states():
    torch.manual_seed(3)
    hb, ours = hb_policy(), ddppo_policy()
    ours.load_state_dict(hb.state_dict(), strict=True)
    diffs = compare(hb, ours)
    print("PointNavBaselinePolicy vs ddppo max |difference|:", diffs)
    assert max(diffs.values()) < 1e-5, diffs


def test_initialisation_has_habitat_baselines_scales():
    """Fresh policies from different seeds: every tensor's spread within 10% of theirs (same init rules)."""
    torch.manual_seed(4)
    hb = hb_policy().state_dict()
    torch.manual_seed(5)
    ours = ddppo_policy().state_dict()
    for key, value in hb.items():
        if value.numel() > 1 and float(value.std()) > 0:
            assert abs(float(ours[key].std()) / float(value.std()) - 1) < 0.1, key
        else:
            assert float(ours[key].abs().max()) == 0.0, key


def test_habitat_baselines_files_of_either_layout_into_ddppo(tmp_path):
    hb = hb_policy()
    for name, sd in (("new", hb.state_dict()), ("old", {f"actor_critic.{k}": v for k, v in hb.state_dict().items()})):
        torch.save({"state_dict": sd, "extra_state": {"step": 7}}, tmp_path / f"{name}.pth")
        data = ckpt.load(tmp_path / f"{name}.pth")
        assert ckpt.foreign(data).summary["policy.architecture"] == "habitat_baselines_simple"
        ours = ddppo_policy()
        ours.load_state_dict(data["model"], strict=True)
        assert max(compare(hb, ours).values()) < 1e-5


def test_export_loads_into_the_installed_release(tmp_path):
    """The layout `--habitat-version auto` picks here loads with this release's own loader: 0.2.x's PPO agent
    (`actor_critic.` keys) or 0.3.x's policy (unprefixed); the other layout is refused by that same loader."""
    version = habitat_baselines_version()
    layout, why = installed_layout()
    assert layout == ("0.2" if version.startswith("0.2.") else "0.3"), why
    torch.manual_seed(6)
    ours = ddppo_policy()
    cfg = types.SimpleNamespace(policy=CFG)
    for lay in habitat_ckpt.LAYOUTS:
        torch.save(export_payload(ours.state_dict(), cfg, 99, lay), tmp_path / f"ckpt.{lay}.pth")
    data = torch.load(tmp_path / f"ckpt.{layout}.pth", map_location="cpu", weights_only=True)
    hb = hb_policy()
    if layout == "0.2":
        from habitat_baselines.rl.ppo.ppo import PPO

        agent = PPO(hb, 0.2, 1, 1, 0.5, 0.01, lr=1e-4, eps=1e-5)
        agent.load_state_dict(data["state_dict"], strict=True)  # what 0.2.x's evaluator and resume call
        assert data["config"]["RL"]["POLICY"]["name"] == "PointNavBaselinePolicy"
    else:
        hb.load_state_dict(data["state_dict"], strict=True)
        assert data["config"]["habitat_baselines"]["rl"]["policy"]["name"] == "PointNavBaselinePolicy"
    assert max(compare(hb, ours).values()) < 1e-5
    other = torch.load(tmp_path / f"ckpt.{'0.3' if layout == '0.2' else '0.2'}.pth", weights_only=True)
    with pytest.raises(RuntimeError, match="Missing key"):
        (agent if layout == "0.2" else hb).load_state_dict(other["state_dict"], strict=True)
