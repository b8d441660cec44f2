"""`ddppo eval` on a gridnav run trained for a few updates: results, outputs, videos, skips, watch, bad input."""

from __future__ import annotations

import json
import os
import shutil
import threading
import time

import imageio.v2 as imageio
import numpy as np
import pytest

from ddppo.errors import ConfigError
from ddppo.eval.loading import resolve_config
from eval_testutil import eval_in_process, finish, replay_gridnav, start_cli

EPISODES = 24  # 4 envs x 6


@pytest.fixture(scope="module")
def evaluated(gridnav_run, tmp_path_factory):
    """The real CLI: the latest checkpoint, 24 episodes, 2 videos; plus two refused evaluations run alongside."""
    out = tmp_path_factory.mktemp("eval_out")
    procs = {
        "ok": start_cli("eval", gridnav_run, f"eval.num_episodes={EPISODES}", "log.tensorboard=true", "--video", "2",
                        "--out", out),
        "hidden": start_cli("eval", gridnav_run, "policy.hidden_size=64", "--out", out / "x"),
        "rays": start_cli("eval", gridnav_run, "env.gridnav.num_rays=8", "--out", out / "y"),
    }
    results = {name: finish(p) for name, p in procs.items()}
    rc, stdout, stderr = results["ok"]
    assert rc == 0, stderr[-3000:]
    return {"out": out, "stdout": stdout, "result": json.loads((out / "ckpt-10.json").read_text()),
            "refused": {k: results[k] for k in ("hidden", "rays")}}


def test_success_equals_a_direct_rollout_of_the_same_episodes(gridnav_run, evaluated):
    r = evaluated["result"]
    episodes = r["episodes"]
    assert r["num_episodes"] == len(episodes) == EPISODES and r["mode"] == "planned" and r["deterministic"]
    assert [sum(e["env"] == i for e in episodes) for i in range(4)] == [6] * 4  # fixed quota per env
    cfg = resolve_config(str(gridnav_run), [])
    direct = replay_gridnav(cfg, gridnav_run / "checkpoints" / "ckpt-10.pt", episodes)
    for rec, ref in zip(episodes, direct):
        got = rec["metrics"]
        assert (got["success"], got["length"], got["collisions"]) == (ref["success"], ref["length"],
                                                                      ref["collisions"]), rec
        assert got["spl"] == pytest.approx(ref["spl"]) and got["return"] == pytest.approx(ref["return"], abs=1e-4)
    success = [ref["success"] for ref in direct]
    assert 0 < sum(success) < len(success)  # the check means something: some episodes succeed, some fail
    assert r["metrics"]["success"]["mean"] == pytest.approx(np.mean(success))
    assert r["metrics"]["spl"]["mean"] == pytest.approx(np.mean([ref["spl"] for ref in direct]))
    assert r["metrics"]["episode_length"]["count"] == EPISODES
    lo, hi = r["metrics"]["success"]["ci95"]
    assert lo < r["metrics"]["success"]["mean"] < hi
    assert "soft_spl" not in r["metrics"]  # gridnav does not define it


def test_console_and_tensorboard(evaluated):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    assert "ckpt-10 (1,280 env steps)" in evaluated["stdout"] and "success" in evaluated["stdout"]
    acc = EventAccumulator(str(evaluated["out"] / "tb"))
    acc.Reload()
    tags = acc.Tags()["scalars"]
    assert {"eval/success", "eval/spl", "eval/reward", "eval/episode_length", "eval/success_ci95_low"} <= set(tags)
    (event,) = acc.Scalars("eval/success")
    assert event.step == 1280 and event.value == pytest.approx(evaluated["result"]["metrics"]["success"]["mean"])


def test_video_frames_and_size_match_the_episodes(evaluated):
    r = evaluated["result"]
    assert len(r["videos"]) == 2
    for v in r["videos"]:
        path = evaluated["out"] / v["path"]
        assert path.suffix == ".mp4" and path.is_file()
        with imageio.get_reader(path) as reader:
            frames = [frame for frame in reader]
        assert len(frames) == v["frames"] == int(v["metrics"]["length"]) + 1
        assert all(f.shape == (480, 960, 3) for f in frames)
        assert v["counted"]  # recorded episodes are evaluated ones, with the same metrics
        (rec,) = [e for e in r["episodes"] if (e["rank"], e["env"], e["index"]) == (v["rank"], v["env"], v["index"])]
        assert rec["metrics"] == v["metrics"] and rec["episode"] == v["episode"]


def test_incompatible_checkpoint_is_refused_naming_the_keys(evaluated):
    for key, (rc, _, stderr) in zip(("policy.hidden_size", "env.gridnav.num_rays"),
                                    evaluated["refused"].values()):
        assert rc == 2, stderr[-2000:]
        assert key in stderr and "Traceback" not in stderr


def test_all_in_order_same_episodes_and_rerun_skips(gridnav_run, tmp_path):
    args = ["eval.num_episodes=8"]
    rc, out = eval_in_process(gridnav_run, args, checkpoint="all", out=str(tmp_path))
    assert rc == 0
    assert [line.split()[0] for line in out.splitlines() if line.startswith("ckpt-")] == ["ckpt-4", "ckpt-8", "ckpt-10"]
    results = [json.loads((tmp_path / f"ckpt-{u}.json").read_text()) for u in (4, 8, 10)]
    assert len({json.dumps([e["episode"] for e in r["episodes"]]) for r in results}) == 1  # same episodes each time
    stamps = {p.name: p.stat().st_mtime_ns for p in tmp_path.glob("*.json")}
    rc, out = eval_in_process(gridnav_run, args, checkpoint="all", out=str(tmp_path))
    assert rc == 0 and out.count("(already evaluated)") == 3
    assert stamps == {p.name: p.stat().st_mtime_ns for p in tmp_path.glob("*.json")}
    with pytest.raises(ConfigError, match="eval.deterministic"):
        eval_in_process(gridnav_run, [*args, "eval.deterministic=false"], out=str(tmp_path))
    rc, _ = eval_in_process(gridnav_run, [*args, "eval.deterministic=false"], out=str(tmp_path), force=True)
    assert rc == 0 and not json.loads((tmp_path / "ckpt-10.json").read_text())["deterministic"]


def test_unreadable_checkpoint_skipped_in_a_scan_refused_by_name(gridnav_run, tmp_path):
    from ddppo.errors import CheckpointError

    run = tmp_path / "run"
    shutil.copytree(gridnav_run, run, ignore=shutil.ignore_patterns("eval"))
    (run / "checkpoints" / "ckpt-9.pt").write_bytes(b"not a checkpoint")
    rc, _ = eval_in_process(run, ["eval.num_episodes=2"], checkpoint="all")
    assert rc == 0 and sorted(p.name for p in (run / "eval").glob("*.json")) == [
        "ckpt-10.json", "ckpt-4.json", "ckpt-8.json"]
    with pytest.raises(CheckpointError, match="ckpt-9.pt"):
        eval_in_process(run, ["eval.num_episodes=2"], checkpoint=str(run / "checkpoints" / "ckpt-9.pt"))


def test_gif_when_no_encoder(gridnav_run, tmp_path, monkeypatch):
    from PIL import Image

    import ddppo.eval.video

    monkeypatch.setattr(ddppo.eval.video, "ffmpeg_available", lambda: False)
    rc, _ = eval_in_process(gridnav_run, ["eval.num_episodes=2"], out=str(tmp_path), video=1)
    (v,) = json.loads((tmp_path / "ckpt-10.json").read_text())["videos"]
    with Image.open(tmp_path / v["path"]) as gif:
        assert gif.format == "GIF" and gif.size == (960, 480) and gif.n_frames == v["frames"]
    assert v["frames"] == int(v["metrics"]["length"]) + 1


def test_watch_waits_for_checkpoints_until_training_finishes(gridnav_run, tmp_path):
    """A run copied in stages, as training would write it; --watch evaluates each new checkpoint and stops."""
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    shutil.copy(gridnav_run / "config.yaml", run / "config.yaml")
    lines = (gridnav_run / "metrics.jsonl").read_text().splitlines()
    (run / "metrics.jsonl").write_text("\n".join(lines[:4]) + "\n")
    result: dict = {}

    def watch():
        result["rc"], result["out"] = eval_in_process(run, ["eval.num_episodes=4"], watch=True, poll_s=0.2)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    time.sleep(1.0)
    assert thread.is_alive() and not (run / "eval").exists()  # nothing to evaluate yet: waiting
    _publish(gridnav_run / "checkpoints" / "ckpt-4.pt", run / "checkpoints")
    _wait_for(lambda: (run / "eval" / "ckpt-4.json").exists())
    with open(run / "metrics.jsonl", "a") as f:  # finished (env_steps >= total) before the last checkpoint exists
        f.write("\n".join(lines[4:]) + "\n")
    time.sleep(1.0)
    assert thread.is_alive()  # waits for the final checkpoint
    _publish(gridnav_run / "checkpoints" / "ckpt-10.pt", run / "checkpoints")
    thread.join(timeout=60)
    assert not thread.is_alive() and result["rc"] == 0
    assert sorted(p.name for p in (run / "eval").glob("*.json")) == ["ckpt-10.json", "ckpt-4.json"]


def _publish(src, folder) -> None:
    """Copy a checkpoint in the way the trainer writes one: a temp file, then an atomic rename."""
    shutil.copy(src, folder / f".{src.name}.tmp")
    os.replace(folder / f".{src.name}.tmp", folder / src.name)


def _wait_for(condition, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)
