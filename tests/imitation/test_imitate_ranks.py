"""`ddppo imitate` on 2 real gloo ranks: each reads its own share of the episodes, and the all-reduced steps keep the
parameters and Adam state bit-identical across ranks."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.append(str(Path(__file__).resolve().parents[1] / "distributed"))  # dist_harness, beside the other tests

from dist_harness import spawn_ranks  # noqa: E402
from imitation_helpers import imitate_and_digest, record_into  # noqa: E402


@pytest.mark.timeout(180)
def test_two_ranks_clone_with_identical_parameters(tmp_path: Path):
    from ddppo import checkpoint as ckpt
    from dist_harness import digest

    data = tmp_path / "demos"
    record_into(data, 30, shard_episodes=8)
    overrides = [f"imitation.data={data}", f"run.dir={tmp_path / 'bc'}", "imitation.updates=5",
                 "checkpoint.interval_updates=5", "dist.timeout_s=60"]
    r0, r1 = spawn_ranks(imitate_and_digest, 2, overrides, timeout_s=150)
    assert r0["code"] == r1["code"] == 0 and r0["update"] == r1["update"] == 5
    assert r0["seed"] != r1["seed"]
    assert r0["train_episodes"] + r1["train_episodes"] == 30 - 30 // 4  # every training episode on one rank
    assert r0["initial"] == r1["initial"], "the start-up broadcast did not make the weights identical"
    assert r0["model"] == r1["model"] and r0["optimizer"] == r1["optimizer"]
    assert r0["model"] != r0["initial"]
    assert r0["samples"] == r1["samples"] > 0
    saved = ckpt.load(tmp_path / "bc" / "checkpoints" / "ckpt-5.pt")
    assert digest(saved["model"]) == r0["model"] and saved["world_size"] == 2
