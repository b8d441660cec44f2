"""habitat_ckpt without habitat-baselines installed: a file in its format read back, sizes checked against a
run's config with the keys named, and where such a file is not accepted."""

from __future__ import annotations

import dataclasses

import gymnasium
import numpy as np
import pytest
import torch

from ddppo import checkpoint as ckpt
from ddppo.errors import CheckpointError
from ddppo.config import Config, PolicyConfig
from ddppo.model.build import make_policy
from ddppo.model.habitat_baselines import GOAL_KEY
from testutil import save_checkpoint

SMALL = PolicyConfig(architecture="habitat_baselines", hidden_size=16, rnn_type="lstm", rnn_layers=1,
                     resnet_base_width=8, resnet_layers=[2, 2, 2, 2], resnet_bottleneck=False)
SPACE = gymnasium.spaces.Dict({"depth": gymnasium.spaces.Box(0.0, 1.0, (32, 32, 1), np.float32),
                               GOAL_KEY: gymnasium.spaces.Box(-np.inf, np.inf, (2,), np.float32)})


def hb_file(path, config: dict) -> dict:
    torch.manual_seed(0)
    sd = make_policy(SPACE, gymnasium.spaces.Discrete(4), SMALL).state_dict()
    torch.save({"state_dict": {f"actor_critic.{k}": v for k, v in sd.items()}, "config": config,
                "extra_state": {"step": 77}}, path)
    return sd


def ddppo_checkpoint(run_dir, update: int):
    """One of ddppo's own checkpoints, as `ddppo train` saves it."""
    return save_checkpoint(run_dir, update, {"w": torch.zeros(1)})


def test_read_back_and_mismatches_named(tmp_path):
    config = {"habitat_baselines": {"rl": {"ppo": {"hidden_size": 16}, "ddppo": {"rnn_type": "LSTM",
                                                                                 "num_recurrent_layers": 1}}},
              "habitat": {"simulator": {"agents": {"main_agent": {"sim_sensors": {"depth_sensor": {
                  "width": 32, "height": 32}}}}}}}
    sd = hb_file(tmp_path / "ckpt.1.pth", config)
    data = ckpt.load(tmp_path / "ckpt.1.pth")
    info = ckpt.foreign(data)
    assert data["counters"]["env_steps"] == 77 and data["config_yaml"] is None and info.format == "habitat-baselines"
    assert info.name == "ckpt.1" and ckpt.foreign(ckpt.load(ddppo_checkpoint(tmp_path / "run", 1))) is None
    assert set(data["model"]) == set(sd) and all(torch.equal(data["model"][k], v) for k, v in sd.items())
    assert info.config_values == {
        "policy.hidden_size": 16, "policy.rnn_type": "lstm", "policy.rnn_layers": 1,
        "env.habitat.depth_width": 32, "env.habitat.depth_height": 32}
    cfg = Config(policy=SMALL)
    assert info.problems(cfg) == ["env.habitat.depth_width: checkpoint 32, this config 256",
                                                "env.habitat.depth_height: checkpoint 32, this config 256"]
    wrong = Config(policy=dataclasses.replace(SMALL, hidden_size=32, rnn_type="gru", architecture="ddppo"))
    found = info.problems(wrong)
    assert "policy.architecture: checkpoint 'habitat_baselines', this config 'ddppo'" in found
    assert "policy.hidden_size: checkpoint 16, this config 32" in found
    assert "policy.rnn_type: checkpoint 'lstm', this config 'gru'" in found


def test_not_a_reference_policy(tmp_path):
    from ddppo.config import KLRefConfig
    from ddppo.ppo.reference import ReferencePolicy

    hb_file(tmp_path / "ckpt.1.pth", {})
    with pytest.raises(CheckpointError, match="is a habitat-baselines checkpoint; a reference must be"):
        ReferencePolicy(KLRefConfig(checkpoint=str(tmp_path / "ckpt.1.pth")), SPACE, gymnasium.spaces.Discrete(4), 2,
                        torch.device("cpu"))


def test_eval_outputs_keep_a_foreign_checkpoints_own_name(tmp_path):
    """`ddppo eval --checkpoint ckpt.3.pth` (habitat-baselines) names its outputs ckpt.3, not ckpt-0 (which any
    other such file would share); ddppo's checkpoints are named by their update."""
    from ddppo.eval.command import name_of
    from ddppo.rundir import RunDir

    hb_file(tmp_path / "ckpt.3.pth", {})
    assert name_of(tmp_path / "ckpt.3.pth") == "ckpt.3"
    assert RunDir.eval_result_path(tmp_path / "ev", name_of(tmp_path / "ckpt.3.pth")) == tmp_path / "ev" / "ckpt.3.json"
    ours = ddppo_checkpoint(tmp_path / "run", 7)
    assert name_of(ours) == "ckpt-7"
    renamed = ours.rename(tmp_path / "best.pt")
    assert name_of(renamed) == "ckpt-7"  # the update it holds, read from the file
