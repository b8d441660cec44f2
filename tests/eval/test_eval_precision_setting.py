"""`ddppo eval` keeps run.precision (as it resolved on eval's device) among the settings of a stored result: a
re-run in the same precision is skipped, one in another is refused naming it, and a result written before the
setting was recorded counts as fp32."""

from __future__ import annotations

import json

import pytest

from ddppo.config import load_config
from ddppo.errors import ConfigError
from ddppo.eval.command import EvalRequest, Selector, eval_settings


def selector(tmp_path, precision: str, stored_settings: dict) -> tuple[Selector, object]:
    out = tmp_path / "eval"
    out.mkdir(exist_ok=True)
    (out / "ckpt-3.json").write_text(json.dumps({"settings": stored_settings, "videos": [], "metrics": {}}))
    cfg = load_config("configs/gridnav.yaml", [f"run.dir={tmp_path / 'run'}", f"run.precision={precision}"])
    return Selector(cfg, EvalRequest(str(tmp_path / "run"), []), out), tmp_path / "run" / "ckpt-3.pt"


def settings(tmp_path, precision: str) -> dict:
    return eval_settings(load_config("configs/gridnav.yaml", [f"run.dir={tmp_path / 'run'}",
                                                              f"run.precision={precision}"]))


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_a_result_of_the_same_precision_is_skipped(tmp_path, precision):
    sel, ckpt = selector(tmp_path, precision, settings(tmp_path, precision))
    assert sel.settings["run.precision"] == precision
    assert sel._already_done(ckpt) is True


def test_a_result_of_another_precision_is_refused_naming_it(tmp_path):
    sel, ckpt = selector(tmp_path, "bf16", settings(tmp_path, "fp32"))
    with pytest.raises(ConfigError, match=r"other settings \(run\.precision: 'fp32' -> 'bf16'\); pass --out DIR"):
        sel._already_done(ckpt)


def test_a_result_from_before_precision_was_recorded_counts_as_fp32(tmp_path):
    older = {k: v for k, v in settings(tmp_path, "fp32").items() if k != "run.precision"}
    sel, ckpt = selector(tmp_path, "fp32", older)
    assert sel._already_done(ckpt) is True
    sel, ckpt = selector(tmp_path, "bf16", older)
    with pytest.raises(ConfigError, match=r"run\.precision: 'fp32' -> 'bf16'"):
        sel._already_done(ckpt)
