"""A frozen encoder's features kept in the rollout in place of its images (ddppo/model/kept.py): computed once per
env step by the acting path, stored in the run's precision, read by the learning pass through the trained stage
alone, with the same log-probs as from the images. An encoder of the test's own with a frozen stage stands in for
a pretrained backbone (tests/vision runs the torchvision one)."""

from __future__ import annotations

import json

import gymnasium
import numpy as np
import pytest
import torch
from torch import nn

from ddppo.config import PolicyConfig, load_config
from ddppo.model.build import register_encoder
from ddppo.model.kept import FEATURES, mismatch, specs
from ddppo.model.policy import Policy
from ddppo.user_code import ENCODERS, VECTOR_ENCODERS

NAME = "kept_probe"
SPACE = gymnasium.spaces.Dict({"depth": gymnasium.spaces.Box(0.0, 1.0, (8, 12, 1), np.float32),
                               "goal": gymnasium.spaces.Box(-1.0, 1.0, (2,), np.float32)})


class FrozenStem(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.conv = nn.Conv2d(channels, 3, 3, stride=2, padding=1)
        self.requires_grad_(False)
        self.images_seen = 0  # how many images went through this stage

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.images_seen += x.shape[0]
        return torch.relu(self.conv(x))


class ProbeEncoder(nn.Module):
    """A frozen stem and a trained head: the kept-features protocol (frozen_stage, trained_stage)."""

    def __init__(self, space: gymnasium.spaces.Box, cfg: PolicyConfig):
        super().__init__()
        h, w, c = space.shape
        self.stem = FrozenStem(c)
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(3 * ((h + 1) // 2) * ((w + 1) // 2), cfg.hidden_size),
                                  nn.ReLU())

    @property
    def frozen_stage(self) -> nn.Module:
        return self.stem

    @property
    def trained_stage(self) -> nn.Module:
        return self.head

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.stem(x))


@pytest.fixture
def probe(monkeypatch):
    for registry in (ENCODERS, VECTOR_ENCODERS):  # registered for this test only
        monkeypatch.setattr(registry, "_builders", dict(registry._builders))
        monkeypatch.setattr(registry, "_extra", list(registry._extra))
    register_encoder(NAME)(ProbeEncoder)
    return NAME


def _policy(rnn: str = "gru") -> Policy:
    torch.manual_seed(0)
    return Policy(SPACE, gymnasium.spaces.Discrete(3), PolicyConfig(image_encoder=NAME, hidden_size=16, rnn_type=rnn))


def test_the_policy_names_what_it_keeps_and_the_storage_specs_follow(probe):
    policy = _policy()
    assert policy.kept == {"depth": (3, 4, 6)}
    assert specs(SPACE, policy.kept, "bf16") == {"goal": ((2,), torch.float32),
                                                  "depth" + FEATURES: ((3, 4, 6), torch.bfloat16)}
    assert specs(SPACE, policy.kept, "fp32")["depth" + FEATURES] == ((3, 4, 6), torch.float32)
    assert specs(SPACE) == {"goal": ((2,), torch.float32), "depth": ((8, 12, 1), torch.float32)}


def test_learning_from_kept_features_equals_learning_from_the_images(probe):
    policy = _policy()
    T, N = 5, 3
    obs = {k: torch.rand(T, N, *s.shape) for k, s in SPACE.spaces.items()}
    start = torch.zeros(T, N)
    start[0], start[2, 1] = 1.0, 1.0
    actions = torch.randint(0, 3, (T, N))
    memory = policy.initial_memory(N)
    kept = {k: v.reshape(T, N, *v.shape[1:]) for k, v in
            policy.keep({k: v.reshape(T * N, *v.shape[2:]) for k, v in obs.items()}).items()}
    assert set(kept) == {"goal", "depth" + FEATURES}
    from_images = policy.evaluate(obs, memory, start, actions)
    stem = policy.encoders["depth"].encoder.stem
    seen = stem.images_seen
    from_features = policy.evaluate(kept, memory, start, actions)
    assert stem.images_seen == seen  # the frozen stage did not run again
    for a, b in zip(from_images, from_features):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-6)
    logp, _, value = from_features
    (logp.sum() + value.sum()).backward()  # gradients reach the trained stage, none the frozen one
    assert policy.encoders["depth"].encoder.head[1].weight.grad is not None
    assert stem.conv.weight.grad is None


def test_features_without_a_frozen_stage_to_have_made_them_are_refused(probe):
    policy = Policy(SPACE, gymnasium.spaces.Discrete(3), PolicyConfig(image_encoder="cnn", hidden_size=16))
    assert policy.kept == {}
    obs = {"goal": torch.zeros(1, 2, 2), "depth" + FEATURES: torch.zeros(1, 2, 3, 4, 6)}
    with pytest.raises(ValueError, match="observation 'depth' came as frozen-encoder features"):
        policy.evaluate(obs, {}, torch.zeros(1, 2), torch.zeros(1, 2, dtype=torch.long))


def test_a_reference_must_hold_the_same_frozen_stage(probe):
    policy, same = _policy(), _policy()
    assert mismatch(policy, same) is None
    with torch.no_grad():
        same.encoders["depth"].encoder.stem.conv.weight.add_(1.0)
    assert "holds other weights than the policy's" in mismatch(policy, same)
    cnn = Policy(SPACE, gymnasium.spaces.Discrete(3), PolicyConfig(image_encoder="cnn", hidden_size=16, rnn_type="gru"))
    assert "has no frozen stage" in mismatch(policy, cnn)


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_a_training_run_keeps_features_and_acting_agrees_with_learning(probe, tmp_path, precision):
    from testutil import trainer_in_process

    cfg = load_config("configs/gridnav_depth.yaml", [
        f"run.dir={tmp_path / 'run'}", "env.num_envs=4", "rollout.num_steps=8", "ppo.num_mini_batch=2",
        "policy.hidden_size=16", f"policy.image_encoder={NAME}", "run.torch_threads=1", "dist.device=cpu",
        "log.tensorboard=false", "run.total_env_steps=64", f"run.precision={precision}",
        "env.gridnav.camera_size=[8,12]"])
    with trainer_in_process(cfg) as trainer:
        stored = trainer.new_storage().obs
        assert "depth" not in stored and stored["depth" + FEATURES].dtype == (
            torch.bfloat16 if precision == "bf16" else torch.float32)
        assert trainer.train() == 0
        stem = trainer.policy.encoders["depth"].encoder.stem
        # once per observation (the probe of its output shape at build, the 4 resets, 64 steps): never in learning
        assert stem.images_seen == 1 + 4 + 64
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    devs = [r["loss/ratio_dev_start"] for r in rows if "loss/ratio_dev_start" in r]
    assert len(devs) == 2 and max(devs) < (1e-6 if precision == "fp32" else 1e-4), devs  # 0 measured in both


def test_run_compile_compiles_a_kept_encoder_as_its_two_stages(probe):
    from ddppo.model.compiled import compile_policy, encoders

    policy = _policy()
    found = encoders(policy)
    assert set(found) == {"encoders.goal", "encoders.depth.frozen_stage", "encoders.depth.trained_stage"}
    enc = policy.encoders["depth"].encoder
    assert found["encoders.depth.frozen_stage"] is enc.stem and found["encoders.depth.trained_stage"] is enc.head
    compile_policy(policy, "ddppo")
    assert "forward" in vars(enc.stem) and "forward" in vars(enc.head)  # replaced on these instances (lazily compiled)
