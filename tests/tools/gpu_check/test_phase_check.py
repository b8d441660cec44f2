"""tools/gpu_check/phase_check.py (run by the GPU check) flags implausible phase shares, on hand-made metrics."""

from __future__ import annotations

import json
from pathlib import Path

from gpu_check import phase_check


def row(**phases: float) -> dict:
    base = {"policy_forward": 0.2, "env_step": 0.2, "obs_transfer": 0.02, "storage": 0.02,
            "learn_forward_backward": 0.4, "optimizer": 0.05, "advantage": 0.01, "allreduce": 0.0, "straggler_wait": 0.0}
    base.update(phases)
    return {"perf/update_s": 1.0, "perf/fps": 1000.0, **{f"perf/{k}_s": v for k, v in base.items()}}


def test_plausible_shares_pass(tmp_path: Path, capsys):
    (tmp_path / "metrics.jsonl").write_text("\n".join(json.dumps(row()) for _ in range(3)))
    assert phase_check.main([str(tmp_path), "--label", "ok"]) == 0
    assert "fps 1000" in capsys.readouterr().out


def test_a_timer_that_stops_before_its_work_is_flagged():
    # what CUDA without phase-end syncs looks like: backward reads ~0 and the all-reduce absorbs it
    cuda_lies = [row(learn_forward_backward=0.0001, allreduce=0.4)] * 3
    found = phase_check.problems(cuda_lies, world_size=1)
    assert any("learn_forward_backward" in p for p in found) and any("allreduce" in p for p in found)
    assert phase_check.problems(cuda_lies, world_size=2) == [found[0]]  # with peers an all-reduce may take time


def test_phases_that_do_not_add_up_are_flagged():
    assert any("add up" in p for p in phase_check.problems([row(env_step=2.0)] * 3, world_size=1))
    assert phase_check.problems([row()], world_size=1) == ["only 1 update(s) logged; need at least 2"]
