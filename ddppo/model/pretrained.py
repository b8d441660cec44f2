"""Image encoders built by a vision library: `policy.image_encoder=torchvision:NAME | timm:NAME | open_clip:NAME`.

The library builds the architecture (torchvision.models.get_model(NAME, weights=None), timm.create_model(NAME,
pretrained=False, num_classes=0), open_clip.create_model(NAME, pretrained=None).visual): nothing is re-typed and
nothing downloads. The weights come from a local file (`policy.encoder_weights`, model/encoder_weights.py), put in
by the trainer at the start of a run; a checkpoint holds them afterwards.

An encoder is two submodules:
- `backbone` (`Backbone`): the library's network with the input preparation it declares (channels repeated to 3,
  resized to its input size, normalised with its mean and std) and `features(images) -> (B, C, h, w)`, its last
  spatial feature map (a ViT's patch tokens laid out on their grid) average-pooled to at most GRID x GRID cells.
  `policy.freeze_encoder=true` freezes it: no gradients, always in eval mode (BatchNorm statistics hold), its
  parameters left out of the optimizer.
- `head` (`FeatureHead`): small and trained, (B, C, h, w) -> (B, hidden_size).
`PretrainedEncoder.forward(x) = head(backbone.features(x))`: a frozen backbone's features depend on the images
alone, so they are computed once per env step and kept in the rollout in place of the images
(`frozen_stage` / `trained_stage`, ddppo/model/kept.py).

The libraries are optional (the `vision` extra); nothing here imports them until an encoder is asked for.
"""

from __future__ import annotations

import importlib
import logging
import math
from typing import Any, Callable

import gymnasium
import torch
from torch import nn
from torch.nn import functional as F

from ddppo.errors import ConfigError
from ddppo.model.pooling import AdaptiveAvgPool

INSTALL = ('pip install -e ".[vision]" in a clone, or pip install "ddppo[vision]"; install torch and torchvision as '
           'a matching pair first: docs/guides/pretrained-encoders.md')
GRID = 4  # the backbone's feature map is average-pooled to at most this many cells per side (PoliFormer pools
#          DINOv2's 16x27 patch tokens to 7x12): what a rollout would keep per step (resnet18: 512 x 4 x 4)
HEAD_CHANNELS = 32  # the head's 1x1 convolution: the backbone's channels -> this many


def import_library(library: str, key: str = "policy.image_encoder") -> Any:
    """The library's module; ConfigError naming the extra when it is not installed, or the import's own error
    when it is installed but does not import (a torchvision built for another torch)."""
    try:
        return importlib.import_module(library)
    except ModuleNotFoundError as err:
        if err.name not in (library, "torchvision", "timm"):
            raise
        raise ConfigError(f"{key}={library}:...: {err.name} is not installed: {INSTALL}") from None
    except Exception as err:  # torchvision for another torch: "operator torchvision::nms does not exist"
        raise ConfigError(f"{key}={library}:...: {library} is installed but does not import ({type(err).__name__}: "
                          f"{str(err).splitlines()[0] if str(err) else ''}): torch {torch.__version__} needs the "
                          f"torchvision built for it; {INSTALL}") from None


def _names(library: str) -> Callable[[str], bool]:
    lib = import_library(library)
    if library == "torchvision":
        import torchvision.models

        known = set(torchvision.models.list_models(module=torchvision.models))
        return known.__contains__
    if library == "timm":
        return lib.is_model
    return set(lib.list_models()).__contains__


def name_problem(library: str, name: str, key: str) -> str | None:
    """None if `library` is installed and builds `name`, else why not (one line naming key and fix)."""
    try:
        known = _names(library)
    except ConfigError as err:
        return str(err).replace(f"{key}={library}:...", f"{key}={library}:{name}")
    if known(name):
        return None
    where = {"torchvision": "torchvision.models.list_models()", "timm": "timm.list_models()",
             "open_clip": "open_clip.list_models()"}[library]
    return f"{key}={library}:{name}: {library} has no model {name!r}: pick one of {where} (built without weights)"


# ------------------------------------------------------------------------ building, per library
def _torchvision(name: str) -> tuple[nn.Module, Callable[[nn.Module, torch.Tensor], torch.Tensor], dict]:
    """torchvision's classifier cut after its last top-level part with a spatial output (a feature map with more
    than one cell, or a ViT's tokens); the data config from its weights enum's transforms."""
    import torchvision.models as tvm
    from torchvision.models.feature_extraction import create_feature_extractor

    model = tvm.get_model(name, weights=None).eval()
    prep = {"size": (224, 224), "mean": (0.485, 0.456, 0.406), "std": (0.229, 0.224, 0.225),
            "interpolation": "bilinear"}  # ImageNet's, where the model declares no weights
    try:
        tr = tvm.get_model_weights(name).DEFAULT.transforms()
        size = tuple(tr.crop_size) * (2 if len(tr.crop_size) == 1 else 1)
        prep = {"size": size, "mean": tuple(tr.mean), "std": tuple(tr.std),
                "interpolation": str(tr.interpolation.value)}
    except Exception:  # noqa: BLE001 (a model without a weights enum keeps ImageNet's statistics)
        pass
    node = _last_spatial_child(model, prep["size"])
    extractor = create_feature_extractor(model, return_nodes={node: "features"})
    return extractor, lambda m, x: m(x)["features"], prep


def _last_spatial_child(model: nn.Module, size: tuple[int, int]) -> str:
    """The name of the last top-level child (the classifier excluded) whose output on one image is a feature map
    with more than one cell (B, C, h, w) or a token sequence (B, N, D)."""
    outputs: dict[str, torch.Size] = {}
    children = list(model.named_children())
    hooks = [m.register_forward_hook(lambda _m, _i, out, n=n: outputs.__setitem__(n, out.shape)
                                     if isinstance(out, torch.Tensor) else None)
             for n, m in children[:-1]]
    try:
        with torch.no_grad():
            model(torch.zeros(1, 3, *size))
    finally:
        for h in hooks:
            h.remove()
    found = [n for n, _ in children if n in outputs and (len(outputs[n]) == 3 or
                                                       (len(outputs[n]) == 4 and outputs[n][2] * outputs[n][3] > 1))]
    if not found:
        raise ConfigError(f"policy.image_encoder=torchvision:{type(model).__name__}: no part of it gives a spatial "
                          f"feature map; pick another model")
    return found[-1]


def _timm(name: str) -> tuple[nn.Module, Callable[[nn.Module, torch.Tensor], torch.Tensor], dict]:
    """timm's model without its classifier; its last stage as NCHW (forward_intermediates); its data config."""
    import timm
    import timm.data

    model = timm.create_model(name, pretrained=False, num_classes=0)
    cfg = timm.data.resolve_model_data_config(model)
    prep = {"size": tuple(cfg["input_size"][1:]), "mean": tuple(cfg["mean"]), "std": tuple(cfg["std"]),
            "interpolation": cfg.get("interpolation", "bilinear")}
    if hasattr(model, "forward_intermediates"):
        def features(m: nn.Module, x: torch.Tensor) -> torch.Tensor:
            return m.forward_intermediates(x, indices=1, norm=True, output_fmt="NCHW", intermediates_only=True)[-1]
    else:
        def features(m: nn.Module, x: torch.Tensor) -> torch.Tensor:
            return m.forward_features(x)
    return model, features, prep


def _open_clip(name: str) -> tuple[nn.Module, Callable[[nn.Module, torch.Tensor], torch.Tensor], dict]:
    """open_clip's image tower: a ViT's patch tokens, a ModifiedResNet's last stage (before its attention
    pooling), a timm trunk's features, or else the image embedding; the preprocessing config it declares."""
    import open_clip

    quiet = _Without("No pretrained weights loaded")  # open_clip warns on the root logger: none were asked for
    logging.getLogger().addFilter(quiet)
    try:
        visual = open_clip.create_model(name, pretrained=None).visual
    finally:
        logging.getLogger().removeFilter(quiet)
    cfg = getattr(visual, "preprocess_cfg", None) or {}
    size = cfg.get("size", getattr(visual, "image_size", 224))
    size = tuple(size) if isinstance(size, (tuple, list)) else (int(size), int(size))
    prep = {"size": size, "mean": tuple(cfg.get("mean", visual.image_mean)),
            "std": tuple(cfg.get("std", visual.image_std)), "interpolation": cfg.get("interpolation", "bicubic")}
    kind = type(visual).__name__
    if kind == "VisionTransformer":
        visual.output_tokens = True
        return visual, lambda m, x: m(x)[1], prep
    if kind == "ModifiedResNet":
        def resnet_features(m: nn.Module, x: torch.Tensor) -> torch.Tensor:
            x = m.stem(x)
            return m.layer4(m.layer3(m.layer2(m.layer1(x))))
        return visual, resnet_features, prep
    if hasattr(visual, "trunk") and hasattr(visual.trunk, "forward_features"):
        return visual, lambda m, x: m.trunk.forward_features(x), prep
    return visual, lambda m, x: m(x)[:, :, None, None], prep


class _Without(logging.Filter):
    """Drops the log records whose message starts with `prefix`."""

    def __init__(self, prefix: str):
        super().__init__()
        self.prefix = prefix

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(self.prefix)


BUILDERS = {"torchvision": _torchvision, "timm": _timm, "open_clip": _open_clip}


def as_map(features: torch.Tensor) -> torch.Tensor:
    """(B, C, h, w) as it is; tokens (B, N, D) -> (B, D, g, g) where N (or N - 1: a class token, dropped) is a
    square g * g, else (B, D, N, 1)."""
    if features.dim() == 4:
        return features
    n = features.shape[1]
    for prefix in (0, 1):
        side = math.isqrt(n - prefix)
        if side * side == n - prefix and side > 0:
            return features[:, prefix:].transpose(1, 2).reshape(features.shape[0], -1, side, side)
    return features.transpose(1, 2).unsqueeze(-1)


class Backbone(nn.Module):
    """The library's network and the input it expects: images (B, C, H, W) in [0, 1] (C = 1 repeated to 3) ->
    resized to the model's input size -> normalised with its mean and std -> the library's last spatial map,
    average-pooled to at most GRID x GRID cells: `features` (B, C', h, w). Frozen (`freeze`): no gradients, and eval
    mode whatever `train()` asks."""

    def __init__(self, library: str, name: str):
        super().__init__()
        self.library, self.name = library, name
        self.model, self._features, prep = BUILDERS[library](name)
        self.size = tuple(int(s) for s in prep["size"])
        self.interpolation = prep["interpolation"] if prep["interpolation"] in ("bilinear", "bicubic") else "bilinear"
        self.register_buffer("mean", torch.tensor(prep["mean"], dtype=torch.float32).view(1, 3, 1, 1),
                             persistent=False)
        self.register_buffer("std", torch.tensor(prep["std"], dtype=torch.float32).view(1, 3, 1, 1),
                             persistent=False)
        self.frozen = False
        was = self.training
        self.eval()
        with torch.no_grad():  # one probe of the library's map: (C', H', W'), pooled to at most GRID x GRID
            c, h, w = as_map(self._features(self.model, torch.zeros(1, 3, *self.size))).shape[1:]
        self.train(was)  # and a trained backbone's BatchNorm layers in eval mode (train)
        self._shape = (int(c), min(GRID, int(h)), min(GRID, int(w)))
        self.pool = AdaptiveAvgPool(self._shape[1:])

    def freeze(self) -> "Backbone":
        self.frozen = True
        self.requires_grad_(False)
        return self.train(self.training)

    def train(self, mode: bool = True) -> "Backbone":
        """Eval mode when frozen; a trained backbone's BatchNorm layers stay in eval mode too (their statistics hold
        at the pretrained values): in train mode each forward would normalise by its own batch, 4 acting images
        against a learning minibatch's hundreds, so acting and learning would compute different functions (measured:
        a trained resnet18's loss/ratio_dev_start 2e-3 in fp32 instead of 0), and acting would move the statistics
        evaluation uses. Their weights and biases still learn."""
        super().train(mode and not self.frozen)
        for m in self.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm):
                m.eval()
        return self

    def prepare(self, images: torch.Tensor) -> torch.Tensor:
        """(B, C, H, W) in [0, 1] -> the model's input."""
        if images.shape[1] == 1:
            images = images.expand(-1, 3, -1, -1)
        if tuple(images.shape[-2:]) != self.size:
            images = F.interpolate(images, size=self.size, mode=self.interpolation, align_corners=False,
                                   antialias=True)
        return (images - self.mean) / self.std

    def features(self, images: torch.Tensor) -> torch.Tensor:
        """Images (B, C, H, W) in [0, 1] -> the pooled feature map (B, C', h, w); under no_grad when frozen (what a
        rollout may keep in place of the images)."""
        if self.frozen:
            with torch.no_grad():
                return self.pool(as_map(self._features(self.model, self.prepare(images))))
        return self.pool(as_map(self._features(self.model, self.prepare(images))))

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.features(images)

    def feature_shape(self) -> tuple[int, int, int]:
        """(C', h, w) of `features` for one image (the pooled map's, found when the backbone was built)."""
        return self._shape


class FeatureHead(nn.Module):
    """Trained on the backbone's pooled feature map (C', h, w): a 1x1 conv to HEAD_CHANNELS, ReLU, a linear layer
    over the cells to `hidden`, ReLU."""

    def __init__(self, shape: tuple[int, int, int], hidden: int):
        super().__init__()
        c, h, w = shape
        self.conv = nn.Conv2d(c, HEAD_CHANNELS, 1)
        self.fc = nn.Linear(HEAD_CHANNELS * h * w, hidden)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.fc(torch.relu(self.conv(features)).flatten(1)))


class PretrainedEncoder(nn.Module):
    """`head(backbone.features(images))`: images (B, C, H, W) in [0, 1] -> (B, hidden)."""

    def __init__(self, backbone: Backbone, hidden: int):
        super().__init__()
        self.backbone = backbone
        self.head = FeatureHead(backbone.feature_shape(), hidden)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.head(self.backbone.features(images))

    # a frozen backbone's features are kept in the rollout in place of the images (ddppo/model/kept.py)
    @property
    def frozen_stage(self) -> Backbone | None:
        return self.backbone if self.backbone.frozen else None

    @property
    def trained_stage(self) -> FeatureHead:
        return self.head


def build(library: str, name: str, space: gymnasium.spaces.Box, cfg: Any) -> PretrainedEncoder:
    """The encoder `policy.image_encoder=LIBRARY:NAME` names for an image space (H, W, C), C 1 or 3; frozen
    where policy.freeze_encoder is set. The weights are the library's random initialisation until the trainer
    loads policy.encoder_weights (or a checkpoint holds them)."""
    value = f"{library}:{name}"
    if len(space.shape) != 3 or space.shape[2] not in (1, 3):
        raise ConfigError(f"policy.image_encoder={value} takes images (H, W, C) with C 1 (repeated to 3) or 3, not "
                          f"an observation of shape {tuple(space.shape)}: use policy.image_encoder=cnn for it")
    import_library(library)
    backbone = Backbone(library, name)
    if cfg.freeze_encoder:
        backbone.freeze()
    return PretrainedEncoder(backbone, cfg.hidden_size)


def backbones(module: nn.Module) -> list[Backbone]:
    """Every library backbone in `module` (one per image key, and the critic's own where it has one)."""
    return [m for m in module.modules() if isinstance(m, Backbone)]
