"""Scenes moved during a run on real ranks (issue 44): two torchrun ranks of the synthetic env, whose default
`scene_placement=measured` starts with one scene per rank (rank 1 playing the 20x slower one); once the first update
has timed both scenes, every rank takes the same decision from the same summed step times, spreads the scenes and
starts fresh episodes, and a resumed job continues under that placement (its envs' saved state carries it). The
gap between the scenes' step times (5 ms vs 100 ms of sleep per env step) is far beyond anything machine load adds."""

from __future__ import annotations

from pathlib import Path

import pytest
from dist_harness import start_torchrun, synthetic

NUM_STEPS, NUM_ENVS = 4, 2
OVERRIDES = synthetic(num_envs=NUM_ENVS, num_steps=NUM_STEPS, **{
    "env.synthetic.num_scenes": 2, "env.synthetic.scene_step_factors": "[1,20]", "env.synthetic.step_sleep_s": 0.01,
    "env.synthetic.episode_length": NUM_STEPS, "preemption.enabled": "false", "checkpoint.interval_updates": 2,
    "dist.timeout_s": 60})
PER_UPDATE = 2 * NUM_ENVS * NUM_STEPS


@pytest.mark.timeout(300)
def test_ranks_move_their_scenes_once_measured_and_a_resume_keeps_the_move(tmp_path: Path):
    run = tmp_path / "run"
    with start_torchrun(2, run, [*OVERRIDES, f"run.total_env_steps={4 * PER_UPDATE}"], tmp_path) as job:
        assert job.wait(timeout_s=240) == [0], job.log_text()
        first = job.log_text()
    assert "update 1: scenes moved by their measured step times" in first, first
    assert first.count("scenes moved") == 1, first  # placed by the same costs since: no second move
    with start_torchrun(2, run, [*OVERRIDES, f"run.total_env_steps={6 * PER_UPDATE}"], tmp_path, name="resumed") as job:
        assert job.wait(timeout_s=240) == [0], job.log_text()
        resumed = job.log_text()
    assert "resumed from" in resumed, resumed
    # the saved episodes continue on the moved scenes: placed as saved, the resumed job's measurements move nothing
    # (a job that lost the placement would start whole again, then move at its first measured update)
    assert "fresh episodes" not in resumed and "scenes moved" not in resumed, resumed
