"""Library image encoders (ddppo/model/pretrained.py) and their weights files (ddppo/model/encoder_weights.py):
built by torchvision, timm and open_clip without weights, fed the input each library declares, loaded from a
local file in the layouts people have, frozen, and refused in one line when the file is of another model.

Skips where the libraries do not import (CI's vision venv runs these with DDPPO_REQUIRE_VISION=1)."""

import gymnasium
import numpy as np
import pytest
import torch

from ddppo.config import PolicyConfig
from ddppo.errors import ConfigError
from testutil import vision_library

RGB = gymnasium.spaces.Box(0, 255, (24, 32, 3), np.uint8)
DEPTH = gymnasium.spaces.Box(0.0, 1.0, (24, 32, 1), np.float32)
# the smallest model of each library: torchvision's resnet18, timm's own test ViT, open_clip's ViT-S-32
MODELS = {"torchvision": "resnet18", "timm": "test_vit", "open_clip": "ViT-S-32"}


def library_model(library: str, seed: int) -> torch.nn.Module:
    """The library's own model, built the library's way (what a user saves weights from)."""
    torch.manual_seed(seed)
    if library == "torchvision":
        return vision_library("torchvision").models.get_model(MODELS[library], weights=None)
    if library == "timm":
        return vision_library("timm").create_model(MODELS[library], pretrained=False)
    return vision_library("open_clip").create_model(MODELS[library], pretrained=None)


def encoder(library: str, space=RGB, **cfg):
    from ddppo.model.pretrained import build

    vision_library(library)
    return build(library, MODELS[library], space, PolicyConfig(hidden_size=16, **cfg))


@pytest.fixture(scope="module", params=list(MODELS))
def built(request, tmp_path_factory):
    """(library, a frozen encoder, the weights file of another random init of the library's model, its tensors)"""
    library = request.param
    enc = encoder(library, freeze_encoder=True)
    model = library_model(library, seed=7)
    state = model.visual.state_dict() if library == "open_clip" else model.state_dict()
    path = tmp_path_factory.mktemp(library) / "weights.pt"
    torch.save(model.state_dict(), path)  # open_clip: the whole CLIP, its image tower under "visual."
    return library, enc, path, state


def test_each_library_builds_a_frozen_encoder_that_loads_a_file_and_encodes(built):
    from ddppo.model.encoder_weights import load_encoder_weights

    library, enc, path, state = built
    digest = load_encoder_weights(enc, str(path))
    assert len(digest) == 64
    own = enc.backbone.model.state_dict()
    assert own and all(torch.equal(own[k], state[k]) for k in own)
    assert not any(p.requires_grad for p in enc.backbone.parameters())
    assert all(p.requires_grad for p in enc.head.parameters())
    enc.train()  # as the policy is put in train mode: the backbone stays in eval (BatchNorm statistics hold)
    assert enc.training and enc.head.training and not any(m.training for m in enc.backbone.modules())
    out = enc(torch.rand(2, 3, 24, 32))
    assert out.shape == (2, 16) and torch.isfinite(out).all()
    out.sum().backward()  # gradients reach the head only
    assert all(p.grad is None for p in enc.backbone.parameters())
    assert all(p.grad is not None for p in enc.head.parameters())


def test_each_library_declares_the_input_size_and_statistics_used(built):
    library, enc, _, _ = built
    if library == "timm":
        timm = vision_library("timm")
        cfg = timm.data.resolve_model_data_config(timm.create_model(MODELS[library], pretrained=False))
        size, mean, std = cfg["input_size"][1:], cfg["mean"], cfg["std"]
    elif library == "open_clip":
        visual = library_model(library, 0).visual
        size, mean, std = visual.image_size, visual.image_mean, visual.image_std
    else:
        tr = vision_library("torchvision").models.get_model_weights(MODELS[library]).DEFAULT.transforms()
        size, mean, std = tr.crop_size * 2, tr.mean, tr.std
    assert enc.backbone.size == tuple(size)
    assert torch.allclose(enc.backbone.mean.flatten(), torch.tensor(mean, dtype=torch.float32))
    assert torch.allclose(enc.backbone.std.flatten(), torch.tensor(std, dtype=torch.float32))
    x = torch.rand(1, 3, 24, 32)
    prepared = enc.backbone.prepare(x)
    assert prepared.shape[-2:] == tuple(size)
    resized = torch.nn.functional.interpolate(x, size=tuple(size), mode=enc.backbone.interpolation, antialias=True)
    assert torch.allclose(prepared, (resized - enc.backbone.mean) / enc.backbone.std)


def test_a_one_channel_image_is_repeated_to_three():
    enc = encoder("timm", space=DEPTH)
    x = torch.rand(2, 1, 24, 32)
    assert torch.equal(enc.backbone.prepare(x), enc.backbone.prepare(x.expand(-1, 3, -1, -1)))
    assert enc(x).shape == (2, 16)


def test_an_unfrozen_backbone_trains_and_follows_train_and_eval():
    enc = encoder("timm")
    assert all(p.requires_grad for p in enc.backbone.parameters())
    enc.eval()
    assert not enc.backbone.training
    enc.train()
    assert enc.backbone.training
    enc(torch.rand(2, 3, 24, 32)).sum().backward()
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in enc.backbone.parameters())


def test_a_trained_backbone_s_batchnorm_keeps_its_statistics_and_learns_its_affine():
    """A fine-tuned resnet18: in train mode its BatchNorm layers still normalise by their running statistics, so a
    forward of one image equals its row of a forward of a batch (acting and learning compute one function), the
    statistics do not move, and the BatchNorm weights get gradients."""
    enc = encoder("torchvision")
    enc.train()
    norms = [m for m in enc.backbone.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    assert norms and enc.backbone.training and not any(m.training for m in norms)
    before = [m.running_mean.clone() for m in norms]
    x = torch.rand(4, 3, 24, 32)
    batch = enc(x)
    torch.testing.assert_close(enc(x[:1]), batch[:1], rtol=0, atol=1e-5)
    assert all(torch.equal(a, m.running_mean) for a, m in zip(before, norms))
    batch.sum().backward()
    assert all(m.weight.grad is not None for m in norms)


def test_the_optimizer_leaves_a_frozen_backbone_out():
    from ddppo.model.policy import Policy
    from ddppo.ppo.update import PPOUpdater
    from ddppo.config import PPOConfig
    from ddppo.advantage import estimator_for
    from testutil import gloo_context

    vision_library("timm")
    space = gymnasium.spaces.Dict({"rgb": RGB})
    cfg = PolicyConfig(hidden_size=16, image_encoder="timm:test_vit", freeze_encoder=True)
    policy = Policy(space, gymnasium.spaces.Discrete(3), cfg)
    ctx = gloo_context()
    try:
        updater = PPOUpdater(policy, PPOConfig(), ctx, advantage=estimator_for(PPOConfig(), 2))
    finally:
        ctx.close()
    frozen = {id(p) for p in policy.encoders["rgb"].encoder.backbone.parameters()}
    trained = {id(p) for group in updater.optimizer.param_groups for p in group["params"]}
    assert frozen and not frozen & trained
    assert {id(p) for p in policy.encoders["rgb"].encoder.head.parameters()} <= trained


def test_checkpoint_layouts_prefixes_and_safetensors_load(tmp_path):
    """A VC-1-like checkpoint ("model", a "module." prefix, decoder keys and a mask token) and a safetensors
    file both give the same tensors."""
    from ddppo.model.encoder_weights import load_encoder_weights

    enc = encoder("timm", freeze_encoder=True)
    state = library_model("timm", seed=3).state_dict()
    wrapped = {f"module.{k}": v for k, v in state.items()}
    wrapped.update({"module.decoder_embed.weight": torch.zeros(4, 4), "module.mask_token": torch.zeros(1, 1, 4)})
    torch.save({"model": wrapped, "epoch": 3}, tmp_path / "mae.pth")
    load_encoder_weights(enc, str(tmp_path / "mae.pth"))
    assert all(torch.equal(v, state[k]) for k, v in enc.backbone.model.state_dict().items())
    safetensors = pytest.importorskip("safetensors.torch")
    other = library_model("timm", seed=4).state_dict()
    safetensors.save_file({k: v.contiguous() for k, v in other.items()}, str(tmp_path / "w.safetensors"))
    load_encoder_weights(enc, str(tmp_path / "w.safetensors"))
    assert all(torch.equal(v, other[k]) for k, v in enc.backbone.model.state_dict().items())


def test_a_file_of_another_model_is_refused_naming_keys_and_shapes(tmp_path):
    from ddppo.model.encoder_weights import load_encoder_weights

    enc = encoder("torchvision")
    torch.manual_seed(0)
    tvm = vision_library("torchvision").models
    torch.save(tvm.get_model("resnet34", weights=None).state_dict(), tmp_path / "r34.pt")
    torch.save(tvm.get_model("resnet50", weights=None).state_dict(), tmp_path / "r50.pt")
    with pytest.raises(ConfigError, match=r"r34\.pt does not fit torchvision:resnet18 \(unexpected: layer1\.2\."):
        load_encoder_weights(enc, str(tmp_path / "r34.pt"))
    with pytest.raises(ConfigError, match=r"unexpected: layer1\.0\.conv3\.weight.*; of another shape: layer1\.0\."
                                          r"conv1\.weight \(file \(64, 64, 1, 1\), torchvision:resnet18 "
                                          r"\(64, 64, 3, 3\)\)"):
        load_encoder_weights(enc, str(tmp_path / "r50.pt"))


def test_a_missing_or_unreadable_file_is_one_line(tmp_path):
    from ddppo.model.encoder_weights import load_encoder_weights

    enc = encoder("timm")
    with pytest.raises(ConfigError, match=r"policy\.encoder_weights=.*nothere\.pt: no such file"):
        load_encoder_weights(enc, str(tmp_path / "nothere.pt"))
    torch.save({"lr": 0.1, "steps": [1, 2]}, tmp_path / "notweights.pt")
    with pytest.raises(ConfigError, match=r"notweights\.pt: holds no tensors by name"):
        load_encoder_weights(enc, str(tmp_path / "notweights.pt"))
    torch.save({"w": np.zeros(3)}, tmp_path / "pickled.pt")  # numpy inside: weights_only refuses it
    with pytest.raises(ConfigError, match=r"pickled\.pt: torch\.load\(weights_only=True\) cannot read it"):
        load_encoder_weights(enc, str(tmp_path / "pickled.pt"))


def test_an_unknown_model_name_is_a_config_problem():
    from ddppo.user_code import ENCODERS

    for library in MODELS:
        vision_library(library)
        assert ENCODERS.problem(f"{library}:{MODELS[library]}") is None
        problem = ENCODERS.problem(f"{library}:no_such_model")
        assert problem.startswith(f"policy.image_encoder={library}:no_such_model: {library} has no model")


@pytest.mark.parametrize("library", ["torchvision", "timm"])
def test_a_frozen_backbone_s_features_are_kept_and_learning_from_them_is_learning_from_the_images(library):
    """A frozen library backbone is the frozen stage a rollout keeps (ddppo/model/kept.py): the policy names its
    pooled feature map, and the learning pass on those features gives the images' log-probs and values."""
    from ddppo.model.kept import FEATURES
    from ddppo.model.policy import Policy

    vision_library(library)
    name = {"torchvision": "torchvision:resnet18", "timm": "timm:test_vit"}[library]
    space = gymnasium.spaces.Dict({"rgb": RGB})
    torch.manual_seed(0)
    policy = Policy(space, gymnasium.spaces.Discrete(3), PolicyConfig(hidden_size=16, image_encoder=name,
                                                                     freeze_encoder=True)).eval()
    backbone = policy.encoders["rgb"].encoder.backbone
    assert policy.kept == {"rgb": backbone.feature_shape()}
    T, N = 3, 2
    obs = {"rgb": torch.randint(0, 256, (T, N, *RGB.shape), dtype=torch.uint8)}
    kept = {k: v.reshape(T, N, *v.shape[1:]) for k, v in policy.keep({"rgb": obs["rgb"].flatten(0, 1)}).items()}
    assert set(kept) == {"rgb" + FEATURES} and kept["rgb" + FEATURES].shape[2:] == backbone.feature_shape()
    start, actions = torch.ones(T, N), torch.zeros(T, N, dtype=torch.int64)
    memory = policy.initial_memory(N)
    for a, b in zip(policy.evaluate(obs, memory, start, actions), policy.evaluate(kept, memory, start, actions)):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-5)
    trained = Policy(space, gymnasium.spaces.Discrete(3), PolicyConfig(hidden_size=16, image_encoder=name))
    assert trained.kept == {}  # a backbone that learns sees the images
