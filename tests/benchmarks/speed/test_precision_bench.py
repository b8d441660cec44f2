"""`ddppo bench precision`: each encoder's policy overrides (a frozen one loads a weights file written once), the
speed-ups against the same encoder's fp32, and a library encoder without the vision extra refused in one line."""

from __future__ import annotations

import pytest

from ddppo.benchmarks.speed import precision


def test_frozen_encoders_load_a_weights_file_written_once(tmp_path, monkeypatch):
    written = []
    monkeypatch.setattr(precision, "save_weights", lambda encoder, path: (written.append(encoder), path.touch()))
    assert precision.encoder_overrides("cnn", tmp_path) == ["policy.image_encoder=cnn"]
    assert precision.encoder_overrides("resnet18", tmp_path) == ["policy.image_encoder=torchvision:resnet18"]
    frozen = precision.encoder_overrides("resnet18-frozen", tmp_path)
    assert frozen == ["policy.image_encoder=torchvision:resnet18",
                      f"policy.encoder_weights={tmp_path / 'torchvision_resnet18.pt'}", "policy.freeze_encoder=true"]
    assert precision.encoder_overrides("resnet18-frozen", tmp_path) == frozen
    assert written == ["torchvision:resnet18"]  # once per benchmark, not once per run


def test_speedups_are_against_the_same_encoders_fp32(capsys):
    row = {"acting_s": 1.0, "learning_s": 4.0, "acting_plus_learning_s": 5.0, "update_s": 6.0,
           "ratio_dev_start": 0.0, "clip_fraction_start": 0.0, "updates": 2}
    results = {"cnn": {"fp32": dict(row), "bf16": {**row, "learning_s": 2.0, "acting_plus_learning_s": 2.5}},
               "vit": {"fp32": {**row, "learning_s": 8.0}, "bf16": dict(row)}}
    precision.table(results)
    assert results["cnn"]["bf16"]["speedup"] == {"acting_s": 1.0, "learning_s": 2.0, "acting_plus_learning_s": 2.0}
    assert results["vit"]["bf16"]["speedup"]["learning_s"] == 2.0
    assert "1.00, 2.00, 2.00" in capsys.readouterr().out


def test_a_library_encoder_without_its_library_is_one_line(monkeypatch):
    from ddppo.user_code import ENCODERS

    monkeypatch.setattr(type(ENCODERS), "problem", lambda self, value, key="": "timm is not installed: pip ...")
    with pytest.raises(SystemExit, match=r"^ddppo bench precision: --encoders vit: timm is not installed: pip \.\.\. "
                                         r"\(or leave it out: --encoders cnn\)$"):
        precision.main(["--encoders", "vit"])
