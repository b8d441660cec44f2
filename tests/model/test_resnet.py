"""GroupNorm ResNet encoder: shapes, gradients, configurations."""

import pytest
import torch
from torch import nn

from ddppo.model.resnet import ResNetEncoder


@pytest.mark.parametrize("kw,size,channels", [
    (dict(base_width=8, layers=(1, 1, 1, 1), groups=4), 64, 1),
    (dict(base_width=8, layers=(2, 2), out_dim=32), 48, 3),
    (dict(base_width=4, layers=(1, 1, 1, 1), bottleneck=True, groups=16), 64, 4),
])
def test_output_shape(kw, size, channels):
    enc = ResNetEncoder(channels, spatial_size=size, **kw)
    out = enc(torch.rand(3, channels, size, size))
    assert out.shape == (3, kw.get("out_dim", 512))
    assert (out >= 0).all()  # ends in a ReLU


def test_defaults_and_non_square_input():
    enc = ResNetEncoder(1)  # base 32, (2, 2, 2, 2), 128 px
    assert enc(torch.rand(1, 1, 128, 128)).shape == (1, 512)
    assert enc.fc[1].in_features == pytest.approx(2048, rel=0.05)  # the compressed feature map, flattened
    rect = ResNetEncoder(2, base_width=8, layers=(1, 1), spatial_size=(40, 56), out_dim=16)
    assert rect(torch.rand(1, 2, 40, 56)).shape == (1, 16)


def test_only_groupnorm_and_sized_input_checked():
    enc = ResNetEncoder(1, base_width=6, layers=(1, 1), groups=16, spatial_size=32, out_dim=8)
    assert not any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in enc.modules())
    norms = [m for m in enc.modules() if isinstance(m, nn.GroupNorm)]
    assert norms and all(m.num_channels % m.num_groups == 0 for m in norms)  # 6 channels: 6 groups, not 16
    with pytest.raises(ValueError, match="expects"):
        enc(torch.rand(1, 1, 64, 64))


def test_large_inputs_are_pooled_first():
    assert ResNetEncoder(1, base_width=4, layers=(1,), spatial_size=256).input_pool == 2
    assert ResNetEncoder(1, base_width=4, layers=(1,), spatial_size=64).input_pool == 1


def test_gradients_reach_every_parameter():
    enc = ResNetEncoder(1, base_width=8, layers=(1, 1, 1), spatial_size=32, out_dim=16)
    x = torch.rand(4, 1, 32, 32, requires_grad=True)
    enc(x).square().sum().backward()
    assert x.grad is not None and x.grad.abs().sum() > 0
    for name, p in enc.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
        assert p.grad.abs().sum() > 0, name


def test_deterministic_and_batch_independent():
    torch.manual_seed(0)
    enc = ResNetEncoder(1, base_width=8, layers=(1, 1), spatial_size=32, out_dim=16).eval()
    x = torch.rand(3, 1, 32, 32)
    assert torch.allclose(enc(x)[1:2], enc(x[1:2]), atol=1e-5)  # GroupNorm: no batch statistics
