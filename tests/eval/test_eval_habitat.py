"""`ddppo eval` on habitat PointNav (grid backend): every episode of a split exactly once, also over 2 ranks."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from ddppo.errors import ConfigError
from eval_testutil import eval_in_process, fake_checkpoint, finish, habitat_config, start_cli


def _episode_ids(result: dict) -> Counter:
    return Counter((e["episode"]["scene_id"], e["episode"]["episode_id"]) for e in result["episodes"])


def test_each_episode_once_over_two_torchrun_ranks(habitat_data, tmp_path):
    cfg = habitat_config(habitat_data, tmp_path / "run", **{"env.habitat.max_episode_steps": 8})
    fake_checkpoint(cfg)
    rc, out, err = finish(start_cli("eval", cfg.run.dir, "env.num_envs=3", "--video", "1", torchrun=2))
    assert rc == 0, err[-3000:]
    result = json.loads((tmp_path / "run" / "eval" / "ckpt-3.json").read_text())
    ids = _episode_ids(result)
    expected = Counter((ep.scene_id, ep.episode_id) for ep in habitat_data["episodes"])
    assert ids == expected and max(ids.values()) == 1  # all 24, each once
    assert result["mode"] == "dataset" and result["world_size"] == 2 and result["num_episodes"] == 24
    assert {e["rank"] for e in result["episodes"]} == {0, 1}
    assert "soft_spl" in result["metrics"] and result["metrics"]["soft_spl"]["count"] == 24
    assert "ckpt-3" in out and "soft_spl" in out
    (video,) = result["videos"]
    assert video["frames"] == int(video["metrics"]["length"]) + 1 and video["episode"]["episode_id"]


def test_more_envs_than_episodes_still_counts_each_once(habitat_data, tmp_path):
    """One scene (12 episodes) on 14 envs: the env repeats episodes for the last envs; eval counts them once."""
    cfg = habitat_config(habitat_data, tmp_path / "run", **{"env.habitat.max_episode_steps": 4})
    fake_checkpoint(cfg)
    rc, out = eval_in_process(cfg.run.dir, ["env.num_envs=14", "env.habitat.scenes=[gen_000]"])
    assert rc == 0
    result = json.loads((tmp_path / "run" / "eval" / "ckpt-3.json").read_text())
    ids = _episode_ids(result)
    assert len(ids) == 12 and max(ids.values()) == 1 and {s for s, _ in ids} == {"gen/gen_000.glb"}


def test_observation_mismatch_is_refused_naming_the_key(habitat_data, tmp_path):
    cfg = habitat_config(habitat_data, tmp_path / "run")
    fake_checkpoint(cfg)
    with pytest.raises(ConfigError) as err:
        eval_in_process(cfg.run.dir, ["env.habitat.rgb=true"])
    assert "env.habitat.rgb" in str(err.value) and "observation keys" in str(err.value)
