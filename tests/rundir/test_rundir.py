"""RunDir (ddppo/rundir/): the one owner of a run directory's files."""

import json

import pytest

from ddppo.rundir import RunDir, checkpoint_update


def test_paths_follow_the_documented_layout(tmp_path):
    run = RunDir(tmp_path)
    assert run.config_path == tmp_path / "config.yaml" and run.metrics_path == tmp_path / "metrics.jsonl"
    assert run.checkpoint_path(7) == tmp_path / "checkpoints" / "ckpt-7.pt"
    assert RunDir.eval_result_path(run.eval_dir, 7) == tmp_path / "eval" / "ckpt-7.json"
    assert not tmp_path.joinpath("checkpoints").exists()  # naming touches nothing


def test_checkpoints_are_listed_by_update_not_by_name(tmp_path):
    run = RunDir(tmp_path)
    assert run.checkpoints() == [] and not run.has_checkpoints()
    run.checkpoint_dir.mkdir()
    for name in ("ckpt-100.pt", "ckpt-11.pt", "ckpt-9.pt", ".ckpt-12.pt.1.tmp", "ckpt-3.pt.stale", "notes.txt"):
        (run.checkpoint_dir / name).write_text("")
    assert [p.name for p in run.checkpoints()] == ["ckpt-9.pt", "ckpt-11.pt", "ckpt-100.pt"]
    assert checkpoint_update("ckpt-11.pt") == 11 and checkpoint_update("ckpt-3.pt.stale") is None


@pytest.mark.parametrize("tail", ['{"update": 4, "env', "\x00\x00garbage", '["not", "an", "object"]'])
def test_the_metrics_reader_skips_a_torn_or_foreign_line(tmp_path, tail):
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps({"update": u, "env_steps": 10 * u}) + "\n"
                                                    for u in (1, 2, 3)) + tail)
    assert [r["update"] for r in RunDir(tmp_path).metrics()] == [1, 2, 3]


def test_config_round_trip_and_kept_previous(tmp_path, tiny_config):
    run = RunDir(tmp_path)
    assert run.read_config() is None
    cfg = tiny_config()
    assert run.write_config(cfg) is None
    assert run.read_config() == cfg
    kept = run.write_config(cfg, keep_previous=True)
    assert kept is not None and kept.name.startswith("config.") and kept.exists() and run.has_config()
