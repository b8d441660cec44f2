"""GroupNorm ResNet image encoder (the DD-PPO PointNav visual encoder).

DD-PPO (Wijmans et al., 2020) encodes 256x256 depth with a ResNet50 of half the
usual width, GroupNorm instead of BatchNorm (batch statistics are meaningless
across a rank's envs and ranks), and a final 3x3 "compression" convolution that
keeps the spatial layout instead of global pooling: the small feature map is
flattened into about 2048 numbers and projected to `out_dim`.

`ResNetEncoder(in_channels, base_width=32, layers=(2, 2, 2, 2))` is a
ResNet-18-style net with basic blocks; `layers=(3, 4, 6, 3), bottleneck=True`
is the paper's ResNet50 (half width at base_width=32).
"""

from __future__ import annotations

from typing import Sequence

import torch
import torch.nn.functional as F
from torch import nn


def _norm(channels: int, groups: int) -> nn.GroupNorm:
    """GroupNorm with the largest group count <= `groups` that divides `channels`."""
    g = max(d for d in range(1, min(groups, channels) + 1) if channels % d == 0)
    return nn.GroupNorm(g, channels)


def _conv(cin: int, cout: int, kernel: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(cin, cout, kernel, stride=stride, padding=kernel // 2, bias=False)


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, cin: int, planes: int, stride: int, groups: int):
        super().__init__()
        cout = planes * self.expansion
        self.body = nn.Sequential(
            _conv(cin, planes, 3, stride), _norm(planes, groups), nn.ReLU(inplace=True),
            _conv(planes, cout, 3), _norm(cout, groups),
        )
        self.skip = (nn.Sequential(_conv(cin, cout, 1, stride), _norm(cout, groups))
                     if stride != 1 or cin != cout else nn.Identity())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.body(x) + self.skip(x))


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin: int, planes: int, stride: int, groups: int):
        super().__init__()
        cout = planes * self.expansion
        self.body = nn.Sequential(
            _conv(cin, planes, 1), _norm(planes, groups), nn.ReLU(inplace=True),
            _conv(planes, planes, 3, stride), _norm(planes, groups), nn.ReLU(inplace=True),
            _conv(planes, cout, 1), _norm(cout, groups),
        )
        self.skip = (nn.Sequential(_conv(cin, cout, 1, stride), _norm(cout, groups))
                     if stride != 1 or cin != cout else nn.Identity())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.body(x) + self.skip(x))


class ResNetEncoder(nn.Module):
    """(B, C, H, W) float images -> (B, out_dim) features.

    Args:
        in_channels: image channels (1 for depth, 3 for RGB, 4 for RGB-D).
        base_width: channels of the stem and of the first stage; stage i has base_width * 2**i planes.
        layers: blocks per stage.
        groups: GroupNorm groups (at most; reduced to a divisor of the channel count where needed).
        out_dim: output features (after a ReLU).
        spatial_size: expected input H (= W) or (H, W); fixes the size of the final projection.
        bottleneck: bottleneck blocks (ResNet-50 style, 4x expansion) instead of basic blocks.
        input_pool: average-pool the input by this factor first; None = 2 for inputs of 256 px or
            more (as DD-PPO does for 256x256 depth), else 1.
        compression_features: target size of the flattened feature map before the projection.
    """

    def __init__(self, in_channels: int, base_width: int = 32, layers: Sequence[int] = (2, 2, 2, 2),
                 groups: int = 16, out_dim: int = 512, spatial_size: int | Sequence[int] = 128, *,
                 bottleneck: bool = False, input_pool: int | None = None, compression_features: int = 2048):
        super().__init__()
        if in_channels <= 0 or base_width <= 0 or out_dim <= 0 or not layers or min(layers) <= 0:
            raise ValueError(f"ResNetEncoder: bad sizes in_channels={in_channels} base_width={base_width} "
                             f"layers={tuple(layers)} out_dim={out_dim}")
        h, w = (spatial_size, spatial_size) if isinstance(spatial_size, int) else tuple(spatial_size)
        self.spatial_size = (int(h), int(w))
        self.input_pool = input_pool if input_pool is not None else (2 if min(h, w) >= 256 else 1)
        block = Bottleneck if bottleneck else BasicBlock
        self.stem = nn.Sequential(
            _conv(in_channels, base_width, 7, stride=2), _norm(base_width, groups), nn.ReLU(inplace=True),
            nn.MaxPool2d(3, stride=2, padding=1),
        )
        stages, cin = [], base_width
        for i, n in enumerate(layers):
            planes = base_width * 2 ** i
            blocks = []
            for b in range(n):
                blocks.append(block(cin, planes, stride=2 if (i > 0 and b == 0) else 1, groups=groups))
                cin = planes * block.expansion
            stages.append(nn.Sequential(*blocks))
        self.stages = nn.Sequential(*stages)
        with torch.no_grad():
            fh, fw = self._trunk(torch.zeros(1, in_channels, h, w)).shape[-2:]
        compressed = max(1, round(compression_features / (fh * fw)))
        self.compress = nn.Sequential(_conv(cin, compressed, 3), _norm(compressed, groups), nn.ReLU(inplace=True))
        self.fc = nn.Sequential(nn.Flatten(), nn.Linear(compressed * fh * fw, out_dim), nn.ReLU(inplace=True))
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.GroupNorm):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def _trunk(self, x: torch.Tensor) -> torch.Tensor:
        if self.input_pool > 1:
            x = F.avg_pool2d(x, self.input_pool)
        return self.stages(self.stem(x))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 4 or tuple(x.shape[-2:]) != self.spatial_size:
            raise ValueError(f"ResNetEncoder expects (B, C, {self.spatial_size[0]}, {self.spatial_size[1]}) "
                             f"input, got {tuple(x.shape)}")
        return self.fc(self.compress(self._trunk(x)))
