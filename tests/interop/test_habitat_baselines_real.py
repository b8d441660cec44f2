"""ddppo's habitat_baselines policy against habitat-baselines' own PointNavResNetPolicy and trainer format.

Runs where habitat-baselines (and habitat-lab) are installed, an optional test dependency; skipped otherwise
(.ci/run installs them after the main suite and sets DDPPO_REQUIRE_HABITAT_BASELINES=1, so there they run).
Small inputs (64x64 depth, 3 envs, 3 steps) keep the ResNet50 cheap on a CPU.
"""

from __future__ import annotations

import os
import types

import gymnasium
import numpy as np
import pytest
import torch

from ddppo import checkpoint as ckpt
from ddppo.export.habitat_baselines import export_payload
from ddppo.interop import habitat_checkpoint as habitat_ckpt
from ddppo.config import PolicyConfig
from ddppo.model.habitat_baselines import GOAL_KEY, HabitatBaselinesPolicy
from hb_real import action_space, habitat_baselines_version, load_habitat_baselines

HB_POLICY, WHY = load_habitat_baselines()
if HB_POLICY is None and os.environ.get("DDPPO_REQUIRE_HABITAT_BASELINES") == "1":  # CI installs it: never skip
    raise RuntimeError(f"DDPPO_REQUIRE_HABITAT_BASELINES=1 but {WHY}")
pytestmark = pytest.mark.skipif(HB_POLICY is None, reason=WHY)
SIZE, N, T, ACTIONS = 64, 3, 3, 4
CFG = PolicyConfig(architecture="habitat_baselines", hidden_size=512, rnn_type="lstm", rnn_layers=2,
                   resnet_base_width=32, resnet_layers=[3, 4, 6, 3], resnet_bottleneck=True)


def hb_policy() -> torch.nn.Module:
    from gym import spaces

    space = spaces.Dict({"depth": spaces.Box(0.0, 1.0, (SIZE, SIZE, 1), np.float32),
                         GOAL_KEY: spaces.Box(-np.inf, np.inf, (2,), np.float32)})
    return HB_POLICY(space, action_space(ACTIONS), hidden_size=512, num_recurrent_layers=2, rnn_type="LSTM",
                     backbone="resnet50", resnet_baseplanes=32).eval()


def ddppo_policy() -> HabitatBaselinesPolicy:
    space = gymnasium.spaces.Dict({"depth": gymnasium.spaces.Box(0.0, 1.0, (SIZE, SIZE, 1), np.float32),
                                   GOAL_KEY: gymnasium.spaces.Box(-np.inf, np.inf, (2,), np.float32)})
    return HabitatBaselinesPolicy(space, gymnasium.spaces.Discrete(ACTIONS), CFG).eval()


def save_like_trainer(policy: torch.nn.Module, folder: str) -> str:
    """habitat-baselines' PPOTrainer.save_checkpoint itself, with its structured config (a DictConfig; 0.3.x)."""
    if habitat_baselines_version().startswith("0.2."):
        pytest.skip("0.2.x's trainer config is a yacs file config (this builds 0.3.x's structured one)")
    from habitat.config.default_structured_configs import (AgentConfig, DatasetConfig, HabitatConfig,
                                                           HabitatSimDepthSensorConfig, MoveForwardActionConfig,
                                                           StopActionConfig, TaskConfig, TurnLeftActionConfig,
                                                           TurnRightActionConfig)
    from habitat_baselines.config.default_structured_configs import HabitatBaselinesRLConfig
    from habitat_baselines.rl.ppo.ppo_trainer import PPOTrainer
    from omegaconf import OmegaConf

    cfg = OmegaConf.create({"habitat": OmegaConf.structured(HabitatConfig),
                            "habitat_baselines": OmegaConf.structured(HabitatBaselinesRLConfig)})
    cfg.habitat.task = OmegaConf.structured(TaskConfig(actions={
        "stop": StopActionConfig(), "move_forward": MoveForwardActionConfig(), "turn_left": TurnLeftActionConfig(),
        "turn_right": TurnRightActionConfig()}))
    cfg.habitat.dataset = OmegaConf.structured(DatasetConfig)
    cfg.habitat.simulator.agents = {"main_agent": OmegaConf.structured(AgentConfig(
        sim_sensors={"depth_sensor": HabitatSimDepthSensorConfig(width=SIZE, height=SIZE)}))}
    cfg.habitat_baselines.rl.ddppo.backbone = "resnet50"
    cfg.habitat_baselines.rl.ddppo.rnn_type = "LSTM"
    cfg.habitat_baselines.rl.ddppo.num_recurrent_layers = 2
    cfg.habitat_baselines.checkpoint_folder = folder
    trainer = types.SimpleNamespace(config=cfg, _agent=types.SimpleNamespace(
        get_save_state=lambda: {"state_dict": policy.state_dict()}))
    PPOTrainer.save_checkpoint(trainer, "ckpt.7.pth", {"step": 1234, "wall_time": 5.0})
    return f"{folder}/ckpt.7.pth"


def inputs(seed: int) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    obs = {"depth": torch.rand(T, N, SIZE, SIZE, 1, generator=g),
           GOAL_KEY: torch.stack([torch.rand(T, N, generator=g) * 5, (torch.rand(T, N, generator=g) - 0.5) * 6], -1)}
    start = torch.zeros(T, N)
    start[0] = 1
    start[2, 1] = 1  # env 1 starts a new episode at t=2: state and previous action reset there
    return obs, start


def compare(hb: torch.nn.Module, ours: HabitatBaselinesPolicy) -> dict[str, float]:
    """Step both through T steps (deterministic actions); the largest differences of logits, values, states,
    and of ddppo's whole-sequence evaluate against habitat-baselines' steps."""
    obs, start = inputs(0)
    h_hb = torch.zeros(N, 4, 512)
    prev = torch.zeros(N, 1, dtype=torch.long)
    hidden = ours.initial_memory(N)
    diffs = {"logits": 0.0, "value": 0.0, "state": 0.0, "sequence_logp": 0.0, "sequence_value": 0.0}
    hb_logp, hb_value, actions = [], [], []
    with torch.no_grad():
        for t in range(T):
            masks = (start[t] == 0).view(N, 1)
            o = {k: v[t] for k, v in obs.items()}
            feats, h_hb_new = hb.net(o, h_hb, prev, masks)[:2]  # 0.3.x adds an aux-loss state
            logits_hb = hb.action_distribution(feats).logits
            value_hb = hb.critic(feats).squeeze(-1)
            feats_ours, _ = ours.features({k: v.unsqueeze(0) for k, v in o.items()}, hidden, start[t:t + 1])
            logp_all = ours.dist_params(feats_ours[0])
            action, logp, value, hidden = ours.act(o, hidden, start[t], deterministic=True)
            assert torch.equal(action, logits_hb.argmax(-1)), f"step {t}: actions differ"
            assert torch.equal(logp, logp_all.gather(-1, action.unsqueeze(-1)).squeeze(-1))
            diffs["logits"] = max(diffs["logits"], float((logp_all - torch.log_softmax(logits_hb, -1)).abs().max()))
            diffs["value"] = max(diffs["value"], float((value - value_hb).abs().max()))
            diffs["state"] = max(diffs["state"], float((hidden["rnn"] - h_hb_new).abs().max()))
            hb_logp.append(torch.log_softmax(logits_hb, -1))
            hb_value.append(value_hb)
            actions.append(action)
            h_hb, prev = h_hb_new, action.view(N, 1)
        acts = torch.stack(actions)
        logp_seq, _, value_seq, params = ours.evaluate_with_params(obs, ours.initial_memory(N), start, acts)
        diffs["sequence_logp"] = float((params - torch.stack(hb_logp)).abs().max())
        diffs["sequence_value"] = float((value_seq - torch.stack(hb_value)).abs().max())
    return diffs


def test_state_dict_keys_and_shapes_are_habitat_baselines():
    hb, ours = hb_policy().state_dict(), ddppo_policy().state_dict()
    assert list(hb) == list(habitat_ckpt.to_habitat_keys(ours))  # same names, same order
    assert {k: tuple(v.shape) for k, v in hb.items()} == {k: tuple(v.shape) for k, v in ours.items()}


def test_habitat_baselines_checkpoint_into_ddppo(tmp_path):
    """habitat-baselines policy -> its trainer's ckpt.N.pth -> ddppo (no code run) -> same actions and values."""
    torch.manual_seed(1)
    hb = hb_policy()
    path = save_like_trainer(hb, str(tmp_path))
    with pytest.raises(Exception):
        torch.load(path, weights_only=True)  # what ddppo's plain loader cannot do
    data = ckpt.load(path)
    assert ckpt.foreign(data).config_values["env.habitat.depth_width"] == SIZE
    assert ckpt.foreign(data).config_values["policy.rnn_layers"] == 2
    assert data["counters"]["env_steps"] == 1234
    ours = ddppo_policy()
    ours.load_state_dict(data["model"], strict=True)
    diffs = compare(hb, ours)
    print("habitat-baselines -> ddppo max |difference|:", diffs)
    assert max(diffs.values()) < 1e-5, diffs


def test_old_actor_critic_prefixed_checkpoint_into_ddppo(tmp_path):
    hb = hb_policy()
    torch.save({"state_dict": {f"actor_critic.{k}": v for k, v in hb.state_dict().items()},
                "extra_state": {"step": 3}}, tmp_path / "old.pth")
    ours = ddppo_policy()
    ours.load_state_dict(ckpt.load(tmp_path / "old.pth")["model"], strict=True)
    assert max(compare(hb, ours).values()) < 1e-5


def test_ddppo_export_into_habitat_baselines(tmp_path):
    """ddppo policy -> export payload -> habitat-baselines' own torch.load + load_state_dict(strict=True)."""
    torch.manual_seed(2)
    ours = ddppo_policy()
    torch.save(export_payload(ours.state_dict(), types.SimpleNamespace(policy=CFG), 99),
               tmp_path / "ckpt.0.pth")
    data = torch.load(tmp_path / "ckpt.0.pth", map_location="cpu", weights_only=True)
    hb = hb_policy()
    hb.load_state_dict(data["state_dict"], strict=True)
    diffs = compare(hb, ours)
    print("ddppo -> habitat-baselines max |difference|:", diffs)
    assert max(diffs.values()) < 1e-5, diffs


def test_export_in_the_installed_release_layout_loads_into_its_agent(tmp_path):
    """`ddppo export`'s auto layout here (0.2.x: `actor_critic.` keys) loads into this release's own PPO agent
    (0.2.x's evaluator loads agent.load_state_dict) or policy (0.3.x), strict, with the same outputs."""
    from ddppo.export.habitat_baselines import installed_layout

    layout = installed_layout()[0]
    torch.manual_seed(8)
    ours = ddppo_policy()
    torch.save(export_payload(ours.state_dict(), types.SimpleNamespace(policy=CFG), 5, layout),
               tmp_path / "ckpt.0.pth")
    data = torch.load(tmp_path / "ckpt.0.pth", map_location="cpu", weights_only=True)
    hb = hb_policy()
    if layout == "0.2":
        from habitat_baselines.rl.ppo.ppo import PPO

        PPO(hb, 0.2, 1, 1, 0.5, 0.01, lr=1e-4, eps=1e-5).load_state_dict(data["state_dict"], strict=True)
    else:
        hb.load_state_dict(data["state_dict"], strict=True)
    assert max(compare(hb, ours).values()) < 1e-5


@pytest.mark.parametrize("size", [64, 128, 256])
def test_parameter_counts_match(size):
    from gym import spaces

    hb_space = spaces.Dict({"depth": spaces.Box(0.0, 1.0, (size, size, 1), np.float32),
                            GOAL_KEY: spaces.Box(-np.inf, np.inf, (2,), np.float32)})
    hb = HB_POLICY(hb_space, action_space(ACTIONS), hidden_size=512, num_recurrent_layers=2, rnn_type="LSTM",
                   backbone="resnet50", resnet_baseplanes=32)
    space = gymnasium.spaces.Dict({"depth": gymnasium.spaces.Box(0.0, 1.0, (size, size, 1), np.float32),
                                   GOAL_KEY: gymnasium.spaces.Box(-np.inf, np.inf, (2,), np.float32)})
    ours = HabitatBaselinesPolicy(space, gymnasium.spaces.Discrete(ACTIONS), CFG)
    counts = (sum(p.numel() for p in hb.parameters()), sum(p.numel() for p in ours.parameters()))
    print(f"{size}x{size} depth: habitat-baselines {counts[0]:,} parameters, ddppo {counts[1]:,}")
    assert counts[0] == counts[1]
