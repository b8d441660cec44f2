"""Observation encoders: one per observation key, (B, ...) -> (B, policy.hidden_size), and `Trunk`, which fuses
them into one feature vector.

Observation conventions: a key whose space has 3 dims is an image (H, W, C), uint8 or float, kept in its dtype
until the encoder, which maps the space's finite bounds to [0, 1] (uint8 0-255: x / 255); a Discrete space is a
category, embedded, a MultiDiscrete one a category per dimension, embedded and summed; anything else is flattened
into a vector. The built-in encoders are registered here (ddppo.user_code.ENCODERS, VECTOR_ENCODERS: this module
is their home); yours with ddppo.model.build.register_encoder.
"""

from __future__ import annotations

import math

import gymnasium
import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from ddppo.config import PolicyConfig
from ddppo.errors import ConfigError
from ddppo.model.kept import FEATURES, frozen_stage
from ddppo.model.pooling import AdaptiveAvgPool
from ddppo.user_code import ENCODERS, VECTOR_ENCODERS


def init_layer(layer: nn.Module, gain: float = math.sqrt(2)) -> nn.Module:
    """A Linear or Conv2d layer with orthogonal weights (gain `gain`) and zero biases (policy.init=orthogonal)."""
    if isinstance(layer, (nn.Linear, nn.Conv2d)):
        nn.init.orthogonal_(layer.weight, gain)
        nn.init.zeros_(layer.bias)
    return layer


ACTIVATIONS = {"relu": nn.ReLU, "tanh": nn.Tanh}  # policy.activation
_FUNCTIONAL = {nn.ReLU: torch.relu, nn.Tanh: torch.tanh}


def run_layers(layers: nn.Sequential, x: torch.Tensor) -> torch.Tensor:
    """`layers(x)` for a stack of Linear and activation layers, each applied as its function: the same ops,
    without a Module call per layer (the MLPs of continuous control act once per env step, where those calls
    cost as much as the arithmetic)."""
    for m in layers:
        if type(m) is nn.Linear:
            x = F.linear(x, m.weight, m.bias)
        elif type(m) in _FUNCTIONAL:
            x = _FUNCTIONAL[type(m)](x)
        else:
            x = m(x)
    return x


class MLPEncoder(nn.Module):
    def __init__(self, in_dim: int, hidden: int, layers: int, activation: str = "relu"):
        super().__init__()
        mods: list[nn.Module] = []
        for i in range(layers):
            mods += [init_layer(nn.Linear(in_dim if i == 0 else hidden, hidden)), ACTIVATIONS[activation]()]
        self.net = nn.Sequential(*mods)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return run_layers(self.net, x.flatten(1).float())


class CNNEncoder(nn.Module):
    """Small conv net (Nature-DQN style, adapted to the input size)."""

    def __init__(self, shape: tuple[int, int, int], hidden: int):
        super().__init__()
        h, w, c = shape
        self.conv = nn.Sequential(
            init_layer(nn.Conv2d(c, 32, 5, stride=2, padding=2)), nn.ReLU(),
            init_layer(nn.Conv2d(32, 64, 3, stride=2, padding=1)), nn.ReLU(),
            init_layer(nn.Conv2d(64, 64, 3, stride=2, padding=1)), nn.ReLU(),
            AdaptiveAvgPool((min(4, h), min(4, w))), nn.Flatten(),
        )
        self.fc = nn.Sequential(init_layer(nn.Linear(64 * min(4, h) * min(4, w), hidden)), nn.ReLU())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.conv(x))


class NatureCNN(nn.Module):
    """The conv net of DQN's Nature paper (Mnih et al. 2015), as SB3's NatureCNN and CleanRL's ppo_atari: 32 8x8
    filters at stride 4, 64 4x4 at stride 2, 64 3x3 at stride 1, then a linear layer (512 in the paper:
    policy.hidden_size)."""

    def __init__(self, shape: tuple[int, int, int], hidden: int):
        super().__init__()
        h, w, c = shape
        if min(h, w) < 36:
            raise ConfigError(f"policy.image_encoder=nature needs images of at least 36x36 (its strides), not "
                             f"{h}x{w}: use policy.image_encoder=cnn")
        self.conv = nn.Sequential(
            init_layer(nn.Conv2d(c, 32, 8, stride=4)), nn.ReLU(),
            init_layer(nn.Conv2d(32, 64, 4, stride=2)), nn.ReLU(),
            init_layer(nn.Conv2d(64, 64, 3, stride=1)), nn.ReLU(), nn.Flatten(),
        )
        def out(n: int) -> int:  # a side after the three convolutions
            return ((n - 8) // 4 + 1 - 4) // 2 + 1 - 2

        size = 64 * out(h) * out(w)
        self.fc = nn.Sequential(init_layer(nn.Linear(size, hidden)), nn.ReLU())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.conv(x))


class GridCNN(nn.Module):
    """rl-starter-files' MiniGrid CNN, for small symbolic grids (MiniGrid's 7x7 view): 16, 32 and 64 2x2
    convolutions with a 2x2 max-pool after the first, then a linear layer to policy.hidden_size. On a 7x7 image
    it has a tenth of `CNNEncoder`'s multiply-adds (whose 4x4 pooling replicates the 1x1 map a 7x7 input leaves),
    and the same layers as the SB3 side of `ddppo bench minigrid`. It gets the image scaled to [0, 1] like every
    encoder here (rl-starter-files feeds the raw indices; in ddppo's trunk that did not learn DoorKey-5x5)."""

    def __init__(self, shape: tuple[int, int, int], hidden: int):
        super().__init__()
        h, w, c = shape
        if min(h, w) < 7:
            raise ConfigError(f"policy.image_encoder=grid needs images of at least 7x7 (three 2x2 convolutions "
                              f"and a 2x2 pooling), not {h}x{w}")
        self.conv = nn.Sequential(
            init_layer(nn.Conv2d(c, 16, 2)), nn.ReLU(), nn.MaxPool2d(2),
            init_layer(nn.Conv2d(16, 32, 2)), nn.ReLU(),
            init_layer(nn.Conv2d(32, 64, 2)), nn.ReLU(), nn.Flatten(),
        )

        def out(n: int) -> int:  # a side after the convolutions and the pooling
            return (n - 1) // 2 - 2

        self.fc = nn.Sequential(init_layer(nn.Linear(64 * out(h) * out(w), hidden)), nn.ReLU())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.conv(x))


def image_scaling(space: gymnasium.spaces.Box) -> tuple[float, float]:
    """(offset, scale) with (x - offset) * scale in [0, 1] over the space's bounds; (0, 1) if unbounded."""
    low, high = np.asarray(space.low, np.float64), np.asarray(space.high, np.float64)
    if not (np.isfinite(low).all() and np.isfinite(high).all()):
        return 0.0, 1.0
    lo, hi = float(low.min()), float(high.max())
    return (lo, 1.0 / (hi - lo)) if hi > lo else (0.0, 1.0)


class ImageInput(nn.Module):
    """(B, H, W, C) uint8/float -> (B, C, H, W) float in [0, 1] (from the space's bounds), then an encoder.

    Observations arrive in their own dtype (uint8 images as bytes: a quarter of the storage and transfer)
    and are converted and scaled here, once, on the device.
    """

    def __init__(self, space: gymnasium.spaces.Box, encoder: nn.Module):
        super().__init__()
        self.offset, self.scale = image_scaling(space)
        self.encoder = encoder

    def prepare(self, x: torch.Tensor) -> torch.Tensor:
        """(B, H, W, C) as observed -> (B, C, H, W) float in [0, 1], the encoder's input."""
        x = x.permute(0, 3, 1, 2).float()
        if self.offset:
            x = x - self.offset
        return x * self.scale if self.scale != 1.0 else x

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.encoder(self.prepare(x))

    def frozen_features(self, x: torch.Tensor) -> torch.Tensor:
        """(B, H, W, C) as observed -> the encoder's frozen stage's output (ddppo/model/kept.py)."""
        return frozen_stage(self.encoder)(self.prepare(x))

    def from_features(self, features: torch.Tensor) -> torch.Tensor:
        """Kept features -> (B, hidden): the encoder's trained stage."""
        return self.encoder.trained_stage(features)


class EmbeddingEncoder(nn.Module):
    """A categorical observation -> a learnt embedding: a Discrete space (e.g. habitat-lab's object goal category)
    one, a MultiDiscrete space (or a gymnasium Text key, envs/gym/env.py) the sum of one per dimension (each
    dimension's values have rows of their own). Values arrive as numbers (storage keeps them as float32, exact for
    any realistic n)."""

    def __init__(self, nvec: list[int], hidden: int):
        super().__init__()
        self.embed = nn.Embedding(sum(nvec), hidden)
        self.register_buffer("offset", torch.tensor([0, *np.cumsum(nvec)[:-1]], dtype=torch.long), persistent=False)
        self.register_buffer("top", torch.tensor(nvec, dtype=torch.long) - 1, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        index = torch.minimum(x.reshape(x.shape[0], -1).long().clamp(min=0), self.top) + self.offset
        return self.embed(index).sum(1)


@ENCODERS.register("cnn")
def cnn_encoder(space: gymnasium.spaces.Box, cfg: PolicyConfig) -> nn.Module:
    """policy.image_encoder=cnn: `CNNEncoder`."""
    return CNNEncoder(_image_shape(space, "cnn"), cfg.hidden_size)


@ENCODERS.register("nature")
def nature_encoder(space: gymnasium.spaces.Box, cfg: PolicyConfig) -> nn.Module:
    """policy.image_encoder=nature: `NatureCNN`."""
    return NatureCNN(_image_shape(space, "nature"), cfg.hidden_size)


@ENCODERS.register("grid")
def grid_encoder(space: gymnasium.spaces.Box, cfg: PolicyConfig) -> nn.Module:
    """policy.image_encoder=grid: `GridCNN`."""
    return GridCNN(_image_shape(space, "grid"), cfg.hidden_size)


@ENCODERS.register("resnet")
def resnet_encoder(space: gymnasium.spaces.Box, cfg: PolicyConfig) -> nn.Module:
    """policy.image_encoder=resnet: ddppo.model.resnet's GroupNorm ResNet."""
    from ddppo.model.resnet import ResNetEncoder

    h, w, c = _image_shape(space, "resnet")
    return ResNetEncoder(c, base_width=cfg.resnet_base_width, layers=tuple(cfg.resnet_layers),
                         out_dim=cfg.hidden_size, spatial_size=(h, w), bottleneck=cfg.resnet_bottleneck)


@VECTOR_ENCODERS.register("mlp")
def mlp_encoder(space: gymnasium.spaces.Box, cfg: PolicyConfig) -> nn.Module:
    """policy.vector_encoder=mlp: `MLPEncoder` over the flattened observation."""
    return MLPEncoder(int(math.prod(space.shape)) or 1, cfg.hidden_size, cfg.mlp_layers, cfg.activation)


def _image_shape(space: gymnasium.spaces.Box, name: str) -> tuple[int, int, int]:
    if len(space.shape) != 3:
        raise ValueError(f"encoder {name!r} is for images (H, W, C), not an observation of shape {space.shape}: "
                         f"set policy.vector_encoder to a vector encoder (mlp)")
    return space.shape


def make_encoder(space: gymnasium.spaces.Space, cfg: PolicyConfig) -> nn.Module:
    """One observation key's encoder, (B, ...) -> (B, hidden_size): a Discrete or MultiDiscrete space is embedded
    (`EmbeddingEncoder`); an image (3 dims) goes through `ImageInput` (to (B, C, H, W) in [0, 1]) into
    policy.image_encoder; anything else into policy.vector_encoder (registered names: ddppo.user_code.ENCODERS,
    VECTOR_ENCODERS)."""
    if isinstance(space, gymnasium.spaces.Discrete):
        return EmbeddingEncoder([int(space.n)], cfg.hidden_size)
    if isinstance(space, gymnasium.spaces.MultiDiscrete):
        return EmbeddingEncoder([int(n) for n in space.nvec.reshape(-1)], cfg.hidden_size)
    if len(space.shape) == 3:
        return ImageInput(space, ENCODERS.get(cfg.image_encoder)(space, cfg))
    return VECTOR_ENCODERS.get(cfg.vector_encoder)(space, cfg)


def fuse_encodings(keys: list[str], encoders: nn.ModuleDict, fuse: nn.Sequential,
                   obs: dict[str, torch.Tensor]) -> torch.Tensor:
    """(B, ...) per key -> (B, H): each key's encoding side by side, through the fusion layer. An image key may
    come as its frozen stage's kept features instead (KEY + FEATURES, ddppo/model/kept.py)."""
    return run_layers(fuse, torch.cat([_encode(k, encoders[k], obs) for k in keys], dim=-1))


def _encode(key: str, encoder: nn.Module, obs: dict[str, torch.Tensor]) -> torch.Tensor:
    """One key's encoding (B, H): from its kept features where the observation holds them, else from itself."""
    if key in obs:
        return encoder(obs[key])
    if not isinstance(encoder, ImageInput) or frozen_stage(encoder.encoder) is None:
        raise ValueError(f"observation {key!r} came as frozen-encoder features ({key + FEATURES!r}), but this "
                         f"policy's encoder for it has no frozen stage to have made them (ddppo/model/kept.py)")
    return encoder.from_features(obs[key + FEATURES])


class Trunk(nn.Module):
    """An encoder per observation key, fused into one feature vector: (B, ...) per key -> (B, H). ddppo's policy
    holds its actor's trunk's parts at its own top level (`encoders`, `fuse`: the names its checkpoints hold) and a
    critic's trunk of its own as one (`critic_trunk`)."""

    def __init__(self, obs_space: gymnasium.spaces.Dict, cfg: PolicyConfig):
        super().__init__()
        self.keys = sorted(obs_space.spaces)
        self.encoders = nn.ModuleDict({k: make_encoder(obs_space[k], cfg) for k in self.keys})
        self.fuse = nn.Sequential(init_layer(nn.Linear(cfg.hidden_size * len(self.keys), cfg.hidden_size)),
                                  ACTIVATIONS[cfg.activation]())

    def forward(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        return fuse_encodings(self.keys, self.encoders, self.fuse, obs)

