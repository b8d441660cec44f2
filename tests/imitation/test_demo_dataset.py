"""The demonstration dataset: what `record` writes reads back exactly, the manifest says what is there, bad shards and
datasets of another env are refused in one line naming the file or keys, and a killed recording resumes."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium
import numpy as np
import pytest
from imitation_helpers import config, record_into

from ddppo.imitation import dataset as ds


def test_round_trip_and_manifest(tmp_path: Path):
    out = tmp_path / "demos"
    result = record_into(out, 20, shard_episodes=8)
    manifest = json.loads((out / ds.MANIFEST).read_text())
    assert manifest["format"] == ds.FORMAT and manifest["env"] == "gridnav" and manifest["complete"] is True
    assert [s["episodes"] for s in manifest["shards"]] == [8, 8, 4]
    assert manifest["episodes"] == result.episodes == 20 and manifest["steps"] == result.steps
    assert manifest["observation_space"]["depth"]["shape"] == [config().env.gridnav.num_rays]
    assert manifest["action_space"] == {"type": "discrete", "n": 4}
    assert "imitation:" in manifest["config_yaml"]
    data = ds.Dataset(out)
    eps = data.load()
    assert eps.num_episodes == 20 and eps.num_steps == manifest["steps"] == int(eps.lengths.sum())
    assert eps.obs["depth"].dtype == np.float32 and eps.obs["depth"].shape[0] == eps.num_steps
    # the expert's episodes end in STOP and succeed; their steps are the expert's actions
    last = eps.actions[eps.starts + eps.lengths - 1]
    assert (last == 0).all() and (eps.success == 1.0).all() and eps.terminated.all()


def test_shards_round_trip_arrays_exactly(tmp_path: Path):
    root = tmp_path / "d"
    (root / ds.SHARDS).mkdir(parents=True)
    rng = np.random.default_rng(0)
    eps = ds.Episodes({"rgb": rng.integers(0, 256, (7, 4, 4, 3), dtype=np.uint8),
                       "goal": rng.normal(size=(7, 2)).astype(np.float32)},
                      rng.normal(size=(7, 3)).astype(np.float32), rng.normal(size=7).astype(np.float32),
                      np.array([3, 4]), np.array([np.nan, 1.0], np.float32), np.array([False, True]))
    entry = ds.write_shard(root, 2, 0, eps)
    back = ds.load_shard(root, entry, {"observation_space": {"rgb": {}, "goal": {}}})
    assert back.arrays().keys() == eps.arrays().keys()
    for key, value in eps.arrays().items():
        np.testing.assert_array_equal(back.arrays()[key], value)
    assert not list((root / ds.SHARDS).glob(".*")), "a temporary file was left behind"


@pytest.mark.parametrize("damage", ["truncate", "empty", "flip"])
def test_damaged_shard_refused_naming_the_file(tmp_path: Path, damage: str):
    out = tmp_path / "demos"
    record_into(out, 10, shard_episodes=5)
    shard = out / ds.SHARDS / "r000-00001.npz"
    raw = shard.read_bytes()
    shard.write_bytes({"truncate": raw[: len(raw) // 2], "empty": b"",
                       "flip": raw[:-10] + bytes([raw[-10] ^ 0xFF]) + raw[-9:]}[damage])
    with pytest.raises(ds.DatasetError) as err:
        ds.Dataset(out).load()
    message = str(err.value)
    assert str(shard) in message and "\n" not in message
    assert ("truncated" in message) if damage != "flip" else ("sha256" in message)


def test_missing_manifest_and_empty_dataset_refused(tmp_path: Path):
    with pytest.raises(ds.DatasetError, match="manifest.json does not exist"):
        ds.Dataset(tmp_path)
    out = tmp_path / "demos"
    record_into(out, 4, shard_episodes=4)
    for path in (out / ds.SHARDS).glob("r000*"):
        path.unlink()
    with pytest.raises(ds.DatasetError, match="holds no complete shard"):
        ds.Dataset(out)


def test_dataset_of_another_layout_refused_naming_keys_shapes_and_actions(tmp_path: Path):
    out = tmp_path / "demos"
    record_into(out, 4, shard_episodes=4)
    data = ds.Dataset(out)
    rays = config().env.gridnav.num_rays
    box = gymnasium.spaces.Box
    same = gymnasium.spaces.Dict({"pointgoal": box(np.array([0, -1, -1], np.float32),
                                                   np.array([np.inf, 1, 1], np.float32)),
                                  "depth": box(0.0, 1.0, (rays,), np.float32)})
    data.check_fits("gridnav", same, gymnasium.spaces.Discrete(4))  # the recording's own spaces fit
    with pytest.raises(ds.DatasetError, match="recorded on env.name=gridnav, not cartpole"):
        data.check_fits("cartpole", same, gymnasium.spaces.Discrete(4))
    other = gymnasium.spaces.Dict({"pointgoal": same["pointgoal"], "depth": box(0.0, 1.0, (rays + 2,), np.float32),
                                   "rgb": box(0, 255, (8, 8, 3), np.uint8)})
    with pytest.raises(ds.DatasetError) as err:
        data.check_fits("gridnav", other, box(-1, 1, (2,), np.float32))
    message = str(err.value)
    assert "observation keys: dataset ['depth', 'pointgoal'], this env ['depth', 'pointgoal', 'rgb']" in message
    assert f"observation 'depth': dataset Box({rays},) float32 [0.0, 1.0], this env Box({rays + 2},)" in message
    assert "action space: dataset Discrete(4), this env Box(2,) float32" in message
    assert "\n" not in message


def test_resume_of_a_killed_recording(tmp_path: Path):
    out = tmp_path / "demos"
    record_into(out, 16, shard_episodes=8)  # two complete shards, as a kill after them would leave
    first = ds.Dataset(out).load()
    # what a kill mid-way leaves besides: a shard renamed but not journaled, and a temporary file
    (out / ds.SHARDS / "r000-00002.npz").write_bytes(b"half")
    (out / ds.SHARDS / ".r000-00003.npz.tmp").write_bytes(b"partial")
    with pytest.raises(ds.DatasetError, match="--resume"):
        record_into(out, 40, shard_episodes=8)  # without --resume an existing dataset is never written over
    record_into(out, 40, shard_episodes=8, resume=True)
    manifest = json.loads((out / ds.MANIFEST).read_text())
    assert manifest["episodes"] == 40 and manifest["complete"]
    assert [s["index"] for s in manifest["shards"]] == [0, 1, 2, 3, 4]
    assert not list((out / ds.SHARDS).glob(".*"))
    eps = ds.Dataset(out).load()  # every shard checks (the orphan was replaced by a complete one)
    head = eps.lengths[:16].sum()
    np.testing.assert_array_equal(eps.actions[:head], first.actions)  # the recorded shards are kept as they were
    assert not np.array_equal(eps.obs["depth"][head:head + 5], first.obs["depth"][:5])  # new episodes, not replays


def test_resume_with_another_env_refused(tmp_path: Path):
    out = tmp_path / "demos"
    record_into(out, 4, shard_episodes=4)
    with pytest.raises(ds.DatasetError, match="other spaces"):
        record_into(out, 8, "env.gridnav.num_rays=5", resume=True)


def test_records_a_policys_greedy_actions(tmp_path: Path):
    """--policy: the recorded actions are the checkpoint's greedy actions on the recorded observations, its
    recurrent state carried through each episode (distillation)."""
    import torch
    from testutil import save_checkpoint

    from ddppo.api import Agent
    from ddppo.imitation.record import RecordRequest, record_rank
    from ddppo.model.build import saved_policy
    from imitation_helpers import one_rank

    cfg = config(f"run.dir={tmp_path / 'teacher'}", "env.gridnav.max_episode_steps=8")
    rays = cfg.env.gridnav.num_rays
    space = gymnasium.spaces.Dict({
        "pointgoal": gymnasium.spaces.Box(np.array([0, -1, -1], np.float32), np.array([np.inf, 1, 1], np.float32)),
        "depth": gymnasium.spaces.Box(0.0, 1.0, (rays,), np.float32)})
    torch.manual_seed(0)
    teacher = save_checkpoint(tmp_path / "teacher", 1, saved_policy(cfg, space, gymnasium.spaces.Discrete(4))
                              .state_dict(), cfg)
    out = tmp_path / "demos"
    with one_rank() as ctx:
        record_rank(cfg, RecordRequest(6, str(out), policy=str(teacher), shard_episodes=3), ctx)
    assert json.loads((out / ds.MANIFEST).read_text())["expert"] == str(teacher)
    eps = ds.Dataset(out).load()
    agent = Agent.from_checkpoint(teacher)
    for start, length in zip(eps.starts, eps.lengths):
        state = None
        for t in range(start, start + length):
            action, state = agent.act({k: v[t] for k, v in eps.obs.items()}, state)
            assert int(action) == int(eps.actions[t])


def test_a_signal_stops_a_recording_that_resume_completes(tmp_path: Path, monkeypatch):
    """SIGTERM (ddppo.signals records it) ends the recording after its complete shards; --resume finishes it."""
    from ddppo import signals

    steps = iter(range(10**6))
    monkeypatch.setattr(signals, "pending", lambda: 15 if next(steps) >= 40 else 0)
    out = tmp_path / "demos"
    result = record_into(out, 200, shard_episodes=4)
    manifest = json.loads((out / ds.MANIFEST).read_text())
    assert 0 < result.episodes == manifest["episodes"] < 200 and manifest["complete"] is False
    monkeypatch.setattr(signals, "pending", lambda: 0)
    record_into(out, 200, shard_episodes=50, resume=True)
    manifest = json.loads((out / ds.MANIFEST).read_text())
    assert manifest["episodes"] == 200 and manifest["complete"] is True
