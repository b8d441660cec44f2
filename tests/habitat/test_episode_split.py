"""No env replays an episode while another episode goes unused (issue 33, item 4).

The split of a dataset over (rank, worker) groups and their envs, run through the code the envs run: the habitat
PointNav env's `read_partition` + `env_partition` on real split folders, and the habitat-lab env's `load_share` on
a stand-in of habitat-lab's dataset API. Scenes were dealt out whole per group, so a group holding small scenes had
fewer episodes than envs and its envs replayed episodes while other groups' episodes were never used (with the old
split, 55 of the 120 cases below where the episodes are at least the env slots). Now, whenever the episodes are at
least the env slots, every env plays its own episodes, no two envs share one and every episode is played.
"""

from __future__ import annotations

import itertools
import logging
import types
from pathlib import Path

import pytest

from ddppo.envs.scenes.dataset import (Episode, Goal, balanced_runs, group_runs, partition, read_partition,
                                        scene_wise_runs, write_split)
from ddppo.envs.habitat.env import env_partition
from ddppo.envs.habitat_lab.env import load_share
from habitat_testutil import HabitatLabStandIn

COUNTS = [1, 9, 2, 6, 3]  # episodes per scene: uneven, so a scene-wise split leaves some groups short
SCENES, RANKS, WORKERS, ENVS = (1, 2, 3, 5), (1, 2, 3), (1, 2), (1, 2, 3, 4, 6)
GRID = [c for c in itertools.product(SCENES, RANKS, WORKERS, ENVS)]


def _episodes(num_scenes: int) -> list[Episode]:
    return [Episode(f"{s}-{j}", f"gen/s{s}.glb", [0.0, 0.0, 0.0], [0, 0, 0, 1], [Goal([1.0, 0.0, 0.0], 0.2)])
            for s in range(num_scenes) for j in range(COUNTS[s])]


def _check(plays: dict[tuple[int, int, int], list[str]], everything: list[str], slots: int) -> None:
    """Every (rank, worker, env) plays some episodes, each once in its pass; no two envs share one; all are played."""
    if len(everything) < slots:
        return  # replays are unavoidable; only coverage is promised
    played = [e for eps in plays.values() for e in eps]
    replaying = [key for key, eps in plays.items() if len(set(eps)) != len(eps) or not eps]
    assert not replaying, f"envs replaying or idle: {replaying}"
    assert sorted(played) == sorted(everything), "an episode played by two envs, or by none"


@pytest.fixture(scope="module")
def split_folders(tmp_path_factory) -> dict[int, str]:
    root = tmp_path_factory.mktemp("splits")
    out = {}
    for n in SCENES:
        folder = root / f"s{n}" / "train"
        write_split(str(folder), _episodes(n))
        out[n] = str(folder)
    return out


@pytest.mark.parametrize("scenes,ranks,workers,envs", GRID)
def test_habitat_pointnav_split(split_folders, scenes, ranks, workers, envs):
    groups = ranks * workers
    plays = {}
    for g in range(groups):
        mine = read_partition(split_folders[scenes], groups, g, num_envs=envs)
        again = read_partition(split_folders[scenes], groups, g, num_envs=envs)
        assert [e.episode_id for e in again] == [e.episode_id for e in mine]  # the same in every process
        for i, part in enumerate(env_partition(mine, envs)):
            plays[(g // workers, g % workers, i)] = [mine[k].episode_id for k in part]
    _check(plays, [e.episode_id for e in _episodes(scenes)], groups * envs)


@pytest.mark.parametrize("scenes,ranks,workers,envs", GRID)
def test_habitat_lab_split(tmp_path, scenes, ranks, workers, envs):
    (tmp_path / "val.json.gz").write_text("")
    cfg = {"data_path": str(tmp_path / "{split}.json.gz"), "split": "val", "scenes_dir": str(tmp_path)}
    api = HabitatLabStandIn(_episodes(scenes))
    plays = {}
    for rank, worker in itertools.product(range(ranks), range(workers)):
        spec = types.SimpleNamespace(rank=rank, world_size=ranks, worker_index=worker, worker_count=workers,
                                     num_envs=envs)
        _, mine = load_share(api, cfg, spec)
        for i in range(envs):
            plays[(rank, worker, i)] = [mine[k].episode_id for k in partition(mine, envs, i)]
    _check(plays, [e.episode_id for e in _episodes(scenes)], ranks * workers * envs)


@pytest.mark.parametrize("counts,groups", [([1, 9, 2, 6, 3], 4), ([5], 3), ([2, 2], 5), ([0, 4, 0, 3], 3)])
def test_runs_cover_every_episode_once(counts, groups):
    for runs in (scene_wise_runs(counts, groups), balanced_runs(counts, groups)):
        got = sorted((s, j) for group in runs for s, a, b in group for j in range(a, b))
        if sum(counts) >= groups:
            assert got == [(s, j) for s, c in enumerate(counts) for j in range(c)]
    # scene-wise where it leaves every group an episode per env: each scene read by one group only
    assert group_runs([4, 4, 4, 4], 2, 1, 2) == [(2, 0, 4), (3, 0, 4)]
    assert group_runs([1, 7], 2, 0, 2) == [(0, 0, 1), (1, 0, 3)]  # scene 0 alone is short: cut evenly


def test_large_split_folders_are_dealt_out_by_files_alone(split_folders, monkeypatch, caplog):
    """Counting reads every file; above COUNT_LIMIT_BYTES (the public datasets) the files are dealt out whole."""
    from ddppo.envs.scenes import dataset

    monkeypatch.setattr(dataset, "COUNT_LIMIT_BYTES", 0)
    parts = [read_partition(split_folders[5], 2, g, num_envs=4) for g in range(2)]
    assert [sorted({e.scene_id for e in p}) for p in parts] == [["gen/s0.glb", "gen/s1.glb"],
                                                                ["gen/s2.glb", "gen/s3.glb", "gen/s4.glb"]]
    with caplog.at_level(logging.WARNING):
        env_partition(parts[0], 12)
    assert "some envs replay" in caplog.text


def test_the_episode_split_gives_each_scene_its_share_of_the_experience():
    """Issue 44: episode counts [1000, 10] over 2 groups x 4 envs. Dealt out whole, each scene gets half the
    experience; env.habitat.episode_split=episodes gives each its share of the episodes."""
    from ddppo.envs.scenes.dataset import experience_shares

    assert experience_shares([1000, 10], 2, 4) == pytest.approx([0.5, 0.5])
    assert experience_shares([1000, 10], 2, 4, "episodes") == pytest.approx([1000 / 1010, 10 / 1010], abs=1e-3)
    assert experience_shares([30, 20, 10], 6, 2, "episodes") == pytest.approx([0.5, 1 / 3, 1 / 6], abs=1e-3)
