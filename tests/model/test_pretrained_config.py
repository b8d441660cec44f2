"""The config's rules for the library image encoders, and what a user without the vision libraries is told: these
need none of torchvision, timm or open_clip (they run in the main suite)."""

import sys

import pytest

from ddppo.config import load_config
from ddppo.errors import ConfigError
from ddppo.model import pretrained


def problems_of(*overrides: str) -> str:
    with pytest.raises(ConfigError) as err:
        load_config("gridnav", list(overrides))
    return str(err.value)


def test_freeze_encoder_without_weights_is_one_problem_naming_both_keys(monkeypatch):
    monkeypatch.setattr(pretrained, "name_problem", lambda *a: None)  # the library counts as installed
    msg = problems_of("policy.image_encoder=timm:test_vit", "policy.freeze_encoder=true")
    assert "policy.freeze_encoder=true needs policy.encoder_weights=FILE" in msg
    assert "set policy.encoder_weights, or policy.freeze_encoder=false" in msg


def test_encoder_weights_need_a_library_encoder():
    msg = problems_of("policy.encoder_weights=w.pt")
    assert "policy.encoder_weights=w.pt needs a library image encoder" in msg and "got cnn" in msg


def test_a_missing_library_names_the_vision_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "timm", None)  # as if not installed: importing it raises ModuleNotFoundError
    msg = problems_of("policy.image_encoder=timm:test_vit")
    assert "policy.image_encoder=timm:test_vit: timm is not installed" in msg
    assert 'pip install -e ".[vision]"' in msg


def test_a_torchvision_built_for_another_torch_is_named(monkeypatch):
    real = pretrained.importlib.import_module

    def broken(name, *args):
        if name == "torchvision":
            raise RuntimeError("operator torchvision::nms does not exist")
        return real(name, *args)

    monkeypatch.setattr(pretrained.importlib, "import_module", broken)
    msg = problems_of("policy.image_encoder=torchvision:resnet18")
    assert "torchvision is installed but does not import (RuntimeError: operator torchvision::nms" in msg
    assert "needs the torchvision built for it" in msg


def test_library_values_are_told_apart_from_user_modules():
    from ddppo.user_code import ENCODERS

    assert ENCODERS.library_of("open_clip:ViT-S-32") == ("open_clip", "ViT-S-32")
    assert ENCODERS.library_of("mymodule:tiny") is None and ENCODERS.library_of("cnn") is None
