"""Metrics sinks (ddppo/train/metrics.py): metrics.jsonl and TensorBoard agree; resume drops what the
checkpoint does not cover; timers and the progress line."""

import json
import math
import time

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from ddppo.rundir import RunDir
from ddppo.timing import Timer
from ddppo.train.loop import budget_line, format_duration, progress_line
from ddppo.train.metrics import MetricsWriter


def scalars_for(update):
    return {"fps": 100.0 + update, "perf/fps": 100.0 + update, "train/reward": 0.5 * update,
            "loss/policy": -0.01 * update, "loss/explained_variance": float("nan") if update == 2 else 0.1}


def write_updates(run_dir, updates, steps_per_update=128, **kw):
    w = MetricsWriter(run_dir, enabled=True, tensorboard=True, **kw)
    for u in updates:
        w.write(u, u * steps_per_update, scalars_for(u))
    w.close()


def read_jsonl(run_dir):
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def read_tb(run_dir):
    acc = EventAccumulator(str(run_dir / "tb"))
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def test_jsonl_and_tensorboard_hold_the_same_values(tmp_path):
    t0 = time.time()
    write_updates(tmp_path, [1, 2, 3])
    rows = read_jsonl(tmp_path)
    assert [r["update"] for r in rows] == [1, 2, 3]
    assert [r["env_steps"] for r in rows] == [128, 256, 384]
    for r in rows:
        assert t0 - 1 <= r["wall_time"] <= time.time() + 1
        expected = scalars_for(r["update"])
        for k, v in expected.items():
            assert r[k] == (v if math.isfinite(v) else None), k  # JSON has no NaN: null
    tb = read_tb(tmp_path)
    assert set(tb) == {"perf/fps", "train/reward", "loss/policy", "loss/explained_variance"}  # grouped tags only
    for tag, events in tb.items():
        rows_with_value = [r for r in rows if r[tag] is not None]
        assert [s for s, _ in events] == [r["env_steps"] for r in rows_with_value]  # step = global env steps
        for (_, value), r in zip(events, rows_with_value):
            assert value == pytest.approx(r[tag], rel=1e-6)
    assert [s for s, _ in tb["loss/explained_variance"]] == [128, 384]  # NaN skipped, not written


def test_resume_truncates_jsonl_and_purges_tensorboard(tmp_path):
    # a crash after update 5, the last checkpoint at update 3 (env steps 384)
    write_updates(tmp_path, [1, 2, 3, 4, 5])
    with open(tmp_path / "metrics.jsonl", "a") as f:
        f.write('{"update": 6, "env_st')  # torn line
    # the resumed run redoes 4 and 5 with different values, then continues
    w = MetricsWriter(tmp_path, enabled=True, tensorboard=True, resume_update=3, resume_env_steps=384)
    assert [r["update"] for r in read_jsonl(tmp_path)] == [1, 2, 3]
    for u in (4, 5, 6):
        w.write(u, u * 128, {"train/reward": -float(u)})
    w.close()
    rows = read_jsonl(tmp_path)
    assert [r["update"] for r in rows] == [1, 2, 3, 4, 5, 6]
    assert [r["train/reward"] for r in rows] == [0.5, 1.0, 1.5, -4.0, -5.0, -6.0]
    events = read_tb(tmp_path)["train/reward"]
    assert [s for s, _ in events] == [128, 256, 384, 512, 640, 768]  # no duplicated steps
    assert [v for _, v in events] == pytest.approx([0.5, 1.0, 1.5, -4.0, -5.0, -6.0])


def test_a_line_torn_at_the_checkpoints_update_is_put_back_from_the_checkpoint(tmp_path):
    """A kill (or a crash that loses the file's tail) tears update 3's line after its checkpoint was written: the
    resume puts the checkpoint's copy back, once, and continues at 4; an intact line is never duplicated."""
    w = MetricsWriter(tmp_path, enabled=True, tensorboard=False)
    saved = [w.write(u, u * 128, scalars_for(u)) for u in (1, 2, 3)]
    w.close()
    assert [json.loads(line)["update"] for line in saved] == [1, 2, 3]
    intact = (tmp_path / "metrics.jsonl").read_text()
    (tmp_path / "metrics.jsonl").write_text(intact[: intact.rindex('"env_steps"')])  # update 3's line, torn
    w = MetricsWriter(tmp_path, enabled=True, tensorboard=False, resume_update=3, resume_env_steps=384,
                      resume_record=saved[2])
    w.write(4, 512, scalars_for(4))
    w.close()
    rows = read_jsonl(tmp_path)
    assert [r["update"] for r in rows] == [1, 2, 3, 4] and rows[2] == json.loads(saved[2])
    MetricsWriter(tmp_path, enabled=True, tensorboard=False, resume_update=3, resume_record=saved[2]).close()
    assert [r["update"] for r in read_jsonl(tmp_path)] == [1, 2, 3]  # intact: kept, not appended again
    assert MetricsWriter(tmp_path, enabled=False, tensorboard=False).write(1, 1, {}) is None  # other ranks


def test_progress_saves_the_last_metrics_line():
    from ddppo.train.progress import Progress

    progress = Progress(("return", "length"), window=2)
    progress.metrics_record = '{"update": 7}'
    resumed = Progress(("return", "length"), window=2)
    resumed.load_state_dict(progress.state_dict())
    assert resumed.metrics_record == '{"update": 7}'
    old = progress.state_dict()
    del old["metrics_record"]  # a checkpoint from before it was saved
    resumed.load_state_dict(old)
    assert resumed.metrics_record is None


def test_truncate_metrics(tmp_path):
    run_dir = RunDir(tmp_path)
    path = run_dir.metrics_path
    run_dir.truncate_metrics(3)  # no file: nothing happens
    assert not path.exists()
    lines = [json.dumps({"update": u, "x": u}) for u in (1, 2, 3, 4, 5)]
    path.write_text("\n".join(lines) + "\n" + '{"update": 6, "x"')
    assert [r["update"] for r in run_dir.metrics()] == [1, 2, 3, 4, 5]  # the torn line is skipped
    assert run_dir.last_metrics()["update"] == 5
    run_dir.truncate_metrics(3)
    assert path.read_text() == "\n".join(lines[:3]) + "\n"
    run_dir.truncate_metrics(0)
    assert path.read_text() == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.jsonl"]  # no temp file left


def test_fresh_start_in_a_dir_without_checkpoints_drops_old_lines(tmp_path):
    write_updates(tmp_path, [1, 2])
    write_updates(tmp_path, [1, 2, 3])  # resume_update=0: nothing of the earlier attempt is covered
    assert [r["update"] for r in read_jsonl(tmp_path)] == [1, 2, 3]


def test_null_writer_writes_nothing(tmp_path):
    w = MetricsWriter(tmp_path / "run", enabled=False, tensorboard=True)
    w.write(1, 128, {"train/reward": 1.0})
    w.flush()
    w.close()
    assert not (tmp_path / "run").exists()


def test_tensorboard_off_still_writes_jsonl(tmp_path):
    w = MetricsWriter(tmp_path, enabled=True, tensorboard=False)
    w.write(1, 10, {"train/reward": 2.0})
    w.close()
    assert read_jsonl(tmp_path)[0]["train/reward"] == 2.0
    assert not (tmp_path / "tb").exists()


def test_timer_accumulates_per_phase_and_pops():
    timer = Timer()
    for _ in range(3):
        with timer("a"):
            time.sleep(0.002)
    with pytest.raises(ValueError), timer("b"):
        raise ValueError  # time is still recorded when the block raises
    totals = timer.pop()
    assert set(totals) == {"a", "b"}
    assert totals["a"] >= 0.006 and totals["b"] >= 0.0
    assert timer.pop() == {}


def test_progress_line_and_durations():
    line = progress_line(500, 1000, 50.0, {"train/reward": 1.23456, "train/success": 0.5,
                                           "train/spl": float("nan")})
    assert "500/1,000" in line and "50.0%" in line and "fps 50" in line
    assert "reward 1.235" in line and "success 0.500" in line and "spl" not in line
    assert "eta 0:00:10" in line
    assert format_duration(3725) == "1:02:05"
    assert format_duration(float("inf")) == "?"
    assert "eta ?" in progress_line(0, 10, 0.0, {})


def test_past_the_budget_the_line_says_it_was_reached_not_a_share_over_100_percent():
    """The last update collects a whole rollout, so a run ends past a budget that is not a whole number of
    updates: the line says so (no `100.4%`, no `eta ?`), and the start says where the run will end."""
    line = progress_line(100_352, 100_000, 900.0, {"train/reward": 1.0})
    assert line.startswith("steps 100,352 (run.total_env_steps=100,000 reached) | fps 900")
    assert "%" not in line and "eta" not in line
    assert "99.8%" in progress_line(99_840, 100_000, 900.0, {})
    assert "(100.0%)" in progress_line(100_000, 100_000, 900.0, {})  # exactly the budget: no overshoot
    assert budget_line(100_000, 2048) == (
        "run.total_env_steps=100,000 is not a whole number of updates of 2,048 env steps (env.num_envs x "
        "rollout.num_steps x ranks): the run ends after 49 updates, at about 100,352 steps (fewer where ranks are "
        "preempted)")
    assert budget_line(8192, 2048) is None


def test_tags_the_config_can_never_move_are_not_written(tmp_path):
    import json

    from ddppo.config import load_config
    from ddppo.train.metrics import MetricsWriter, fixed_tags

    plain = fixed_tags(load_config("gridnav", []), world_size=1)
    assert {"loss/kl_ref", "perf/reward_model_s_max", "perf/learner_wait_s", "preempt/num_preempted",
            "perf/rollout_env_steps_min", "perf/reference_forward_s_min"} <= plain
    assert "preempt/straggler_wait_s_max" not in plain and "loss/skipped_steps" not in plain  # these can move
    moving = fixed_tags(load_config("gridnav", ["reward.model=m:M", "ppo.kl_ref.checkpoint=ref.pt",
                                                "rollout.overlap_learning=true"]), world_size=2)
    assert moving == frozenset()  # two ranks preempt; a model, a reference and overlapped learning are timed
    variable = fixed_tags(load_config("gridnav", ["rollout.mode=variable", "env.num_workers=2"]), world_size=1)
    assert "perf/rollout_env_steps_min" not in variable  # envs collect unequal shares
    writer = MetricsWriter(tmp_path, True, False, fixed=plain)
    writer.write(1, 64, {"loss/kl_ref": 0.0, "preempt/num_preempted": 0.0, "loss/policy": 0.5})
    writer.close()
    record = json.loads((tmp_path / "metrics.jsonl").read_text())
    assert {k for k in record if "/" in k} == {"loss/policy"}
