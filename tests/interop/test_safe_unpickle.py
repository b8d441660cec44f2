"""The restricted unpickler that reads habitat-baselines checkpoints: tensors and containers come back, no
pickled code runs (a marker file that any executed payload would create stays absent)."""

from __future__ import annotations

import collections
import pickle

import pytest
import torch

from ddppo import checkpoint as ckpt
from ddppo.errors import CheckpointError
from ddppo.interop import safe_unpickle

import interop_evil as evil  # tests/interop/interop_evil.py


def _state_dict() -> dict:
    return collections.OrderedDict([("net.visual_encoder.backbone.conv1.0.weight", torch.randn(4, 1, 7, 7)),
                                    ("critic.fc.weight", torch.randn(1, 8)), ("steps", torch.arange(5))])


def test_tensors_containers_and_shared_storage_come_back(tmp_path):
    base = torch.randn(6, 4)
    data = {"a": _state_dict(), "view": base[2:, 1:], "base": base, "t": (1, 2.5, "x", None, True),
            "s": {3, 4}, "half": torch.ones(3, dtype=torch.float16), "b": torch.tensor([True, False])}
    torch.save(data, tmp_path / "f.pt")
    back = safe_unpickle.load(tmp_path / "f.pt")
    assert isinstance(back["a"], collections.OrderedDict)
    for k, v in data["a"].items():
        assert torch.equal(back["a"][k], v) and back["a"][k].dtype == v.dtype
    assert torch.equal(back["view"], data["view"]) and torch.equal(back["base"], base)
    assert back["t"] == (1, 2.5, "x", None, True) and back["s"] == {3, 4}
    assert torch.equal(back["half"], data["half"]) and torch.equal(back["b"], data["b"])


def test_unknown_classes_become_inert_data_and_are_never_called(tmp_path):
    marker = tmp_path / "marker"
    torch.save({"state_dict": _state_dict(), "cfg": evil.Payload(evil.leave_marker, str(marker)),
                "counter": collections.Counter("aab")}, tmp_path / "f.pt")
    back = safe_unpickle.load(tmp_path / "f.pt")
    assert not marker.exists()
    assert isinstance(back["cfg"], safe_unpickle.Inert)
    assert back["cfg"].qualname == "interop_evil.leave_marker" and back["cfg"].args == (str(marker),)
    assert safe_unpickle.plain(back["counter"]) == {"a": 2, "b": 1}
    torch.load(tmp_path / "f.pt", weights_only=False)  # the control: an ordinary load runs the payload
    assert marker.exists()


@pytest.mark.parametrize("fn", [evil.SYSTEM, eval, exec, getattr])
def test_calls_that_run_code_are_refused_and_not_run(tmp_path, fn):
    marker = tmp_path / "marker"
    arg = f"touch {marker}" if fn is evil.SYSTEM else f"open({str(marker)!r}, 'w')"
    path = tmp_path / "ckpt.3.pth"
    torch.save({"state_dict": _state_dict(), "config": evil.Payload(fn, arg)}, path)
    with pytest.raises(safe_unpickle.UnsafePickleError, match="refused, nothing was run"):
        safe_unpickle.load(path)
    with pytest.raises(CheckpointError, match=r"weights-only loader.*; it asks to call (posix|builtins)\.\w+"):
        ckpt.load(path)
    assert not marker.exists()


def test_not_a_torch_file_is_one_clear_error(tmp_path):
    (tmp_path / "junk.pth").write_bytes(b"not a zip")
    with pytest.raises(CheckpointError, match="is not a readable ddppo checkpoint"):
        ckpt.load(tmp_path / "junk.pth")
    raw = tmp_path / "raw.pkl"
    raw.write_bytes(pickle.dumps(evil.Payload(evil.leave_marker, str(tmp_path / "m"))))
    with pytest.raises(ValueError, match="not a torch.save zip"):
        safe_unpickle.load(raw)
    assert not (tmp_path / "m").exists()
