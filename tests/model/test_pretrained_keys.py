"""How a weights file's keys are matched to a backbone's (ddppo/model/encoder_weights.py) and how a token sequence
becomes a feature map (ddppo/model/pretrained.py), on small stand-in modules: no vision library needed."""

import pytest
import torch
from torch import nn

from ddppo.errors import ConfigError
from ddppo.model.encoder_weights import match
from ddppo.model.pretrained import as_map


def backbone() -> nn.Module:
    return nn.ModuleDict({"stem": nn.Conv2d(3, 4, 3), "blocks": nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4))})


def test_a_common_prefix_is_stripped_and_parts_the_backbone_lacks_are_dropped():
    own = backbone().state_dict()
    file = {f"visual.{k}": torch.randn_like(v) for k, v in own.items()}
    file.update({"transformer.blocks.0.weight": torch.zeros(9), "logit_scale": torch.zeros(()),
                 "visual.decoder.weight": torch.zeros(2), "visual.mask_token": torch.zeros(1)})
    kept = match(file, backbone(), "w.pt", "lib:model")
    assert kept.keys() == own.keys() and all(torch.equal(kept[k], file[f"visual.{k}"]) for k in own)


def test_keys_inside_parts_the_backbone_has_missing_keys_and_shapes_are_named():
    own = backbone().state_dict()
    file = {k: v.clone() for k, v in own.items() if k != "stem.bias"}
    file["blocks.2.weight"] = torch.zeros(4, 4)
    file["blocks.0.weight"] = torch.zeros(8, 4)
    with pytest.raises(ConfigError) as err:
        match(file, backbone(), "w.pt", "lib:model")
    msg = str(err.value)
    assert msg.startswith("policy.encoder_weights=w.pt does not fit lib:model (missing: stem.bias; unexpected: "
                          "blocks.2.weight; of another shape: blocks.0.weight (file (8, 4), lib:model (4, 4))")


def test_tokens_become_a_square_map_without_a_class_token():
    tokens = torch.arange(2 * 17 * 3, dtype=torch.float32).view(2, 17, 3)  # a class token and 4 x 4 patches
    grid = as_map(tokens)
    assert grid.shape == (2, 3, 4, 4)
    assert torch.equal(grid[:, :, 1, 2], tokens[:, 1 + 1 * 4 + 2])
    assert as_map(torch.zeros(2, 16, 3)).shape == (2, 3, 4, 4)
    assert as_map(torch.zeros(2, 7, 3)).shape == (2, 3, 7, 1)  # no square grid: a column of tokens
    assert as_map(torch.zeros(2, 5, 3, 3)).shape == (2, 5, 3, 3)
