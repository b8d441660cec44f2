"""habitat's PointNav episode format: round trips, layouts, scene paths, partitioning."""

import gzip
import json
import os

import pytest

from ddppo.envs.base import EnvError
from ddppo.envs.scenes.dataset import (Episode, EpisodeIterator, Goal, filter_scenes, partition, read_episodes,
                                  read_partition, resolve_scene, scene_name, write_episodes, write_split)

# one record as the public Gibson/MP3D PointNav files have it (extra keys included)
HABITAT_RECORD = {
    "episode_id": "17", "scene_id": "data/scene_datasets/gibson/Adrian.glb",
    "start_position": [1.5, 0.1, -2.25], "start_rotation": [0.0, 0.96, 0.0, -0.28],
    "info": {"geodesic_distance": 6.5, "difficulty": "medium"},
    "goals": [{"position": [3.0, 0.1, 1.0], "radius": None}],
    "shortest_paths": None, "start_room": None,
}


def make_episodes(n, scene="gen/a.glb"):
    return [Episode(str(k), scene, [k, 0.0, 0.5], [0, 0, 0, 1], [Goal([k + 1.0, 0.0, -0.5], 0.2)],
                    {"geodesic_distance": 1.0 + k}) for k in range(n)]


def test_reads_habitat_record_unmodified_and_writes_it_back(tmp_path):
    path = tmp_path / "val.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump({"episodes": [HABITAT_RECORD]}, f)
    (ep,) = read_episodes(str(path))
    assert ep.episode_id == "17" and ep.scene_id == HABITAT_RECORD["scene_id"]
    assert ep.start_rotation == [0.0, 0.96, 0.0, -0.28] and ep.goals[0].radius is None
    assert ep.geodesic_distance == 6.5
    out = tmp_path / "out.json.gz"
    write_episodes(str(out), [ep])
    with gzip.open(out, "rt") as f:
        assert json.load(f)["episodes"][0] == HABITAT_RECORD


def test_single_file_round_trip_is_byte_reproducible(tmp_path):
    eps = make_episodes(5)
    a, b = tmp_path / "a.json.gz", tmp_path / "b.json.gz"
    write_episodes(str(a), eps)
    write_episodes(str(b), read_episodes(str(a)))
    assert a.read_bytes() == b.read_bytes()
    assert read_episodes(str(a)) == eps


def test_split_folder_layout(tmp_path):
    eps = make_episodes(3, "gen/a.glb") + make_episodes(2, "gen/b.glb")
    folder = tmp_path / "train"
    written = write_split(str(folder), eps)
    assert sorted(os.path.relpath(p, folder) for p in written) == ["content/a.json.gz", "content/b.json.gz",
                                                                     "train.json.gz"]
    with gzip.open(folder / "train.json.gz", "rt") as f:
        assert json.load(f) == {"episodes": []}
    # the folder, or its top-level file, both find content/
    assert sorted(read_episodes(str(folder)), key=lambda e: (e.scene_id, e.episode_id)) == eps
    assert len(read_episodes(str(folder / "train.json.gz"))) == 5
    assert [scene_name(e.scene_id) for e in filter_scenes(eps, ["b"])] == ["b", "b"]


def test_scene_resolution_like_habitat_lab():
    assert resolve_scene("data/scene_datasets/gibson/Adrian.glb", "/d/scenes") == "/d/scenes/gibson/Adrian.glb"
    assert resolve_scene("gibson/Adrian.glb", "/d/scenes") == "/d/scenes/gibson/Adrian.glb"
    assert resolve_scene("/abs/x.glb", "/d/scenes") == "/abs/x.glb"
    assert scene_name("mp3d/17DRP5sb8fy/17DRP5sb8fy.glb") == "17DRP5sb8fy"


def test_missing_and_malformed_files_name_the_problem(tmp_path):
    with pytest.raises(EnvError, match="does not exist"):
        read_episodes(str(tmp_path / "nope.json.gz"))
    with pytest.raises(EnvError, match="no dataset given"):
        read_episodes("")
    bad = tmp_path / "bad.json.gz"
    with gzip.open(bad, "wt") as f:
        json.dump({"episodes": [{"episode_id": "x9", "scene_id": "s.glb"}]}, f)
    with pytest.raises(EnvError, match=r"bad.json.gz.*episode_id 'x9'.*missing start_position"):
        read_episodes(str(bad))
    notgz = tmp_path / "plain.json.gz"
    notgz.write_text("hello")
    with pytest.raises(EnvError, match="not readable"):
        read_episodes(str(notgz))
    (tmp_path / "empty").mkdir()
    with pytest.raises(EnvError, match="holds no"):
        read_episodes(str(tmp_path / "empty"))


@pytest.mark.parametrize("n,slots", [(10, 3), (7, 7), (100, 8), (5, 1)])
def test_partition_covers_every_episode_once(n, slots):
    eps = make_episodes(n // 2, "gen/b.glb") + make_episodes(n - n // 2, "gen/a.glb")
    parts = [partition(eps, slots, s) for s in range(slots)]
    flat = [k for p in parts for k in p]
    assert sorted(flat) == list(range(n))
    assert max(map(len, parts)) - min(map(len, parts)) <= 1
    for p in parts:  # contiguous by scene: each slot touches at most two scenes here
        assert len({eps[k].scene_id for k in p}) <= 2


@pytest.mark.parametrize("groups", [1, 2, 3, 5, 8])
def test_read_partition_splits_by_content_file_without_overlap(tmp_path, groups):
    eps = [e for k in range(5) for e in make_episodes(2 + k, f"gen/s{k}.glb")]
    folder = tmp_path / "train"
    write_split(str(folder), eps)
    write_episodes(str(tmp_path / "one.json.gz"), eps)
    key = lambda e: (e.scene_id, e.episode_id)  # noqa: E731
    for path in (str(folder), str(folder / "train.json.gz"), str(tmp_path / "one.json.gz")):
        parts = [read_partition(path, groups, g) for g in range(groups)]
        assert sorted(key(e) for p in parts for e in p) == sorted(key(e) for e in eps)
        if path != str(tmp_path / "one.json.gz") and groups <= 5:  # each group reads whole scene files
            scene_sets = [{e.scene_id for e in p} for p in parts]
            assert sum(map(len, scene_sets)) == len(set().union(*scene_sets)) == 5
    only = read_partition(str(folder), 1, 0, scenes=["s1", "s3"])
    assert {e.scene_id for e in only} == {"gen/s1.glb", "gen/s3.glb"}
    with pytest.raises(EnvError, match="no content file"):
        read_partition(str(folder), 1, 0, scenes=["zzz"])


def test_partition_with_more_slots_than_episodes_wraps():
    eps = make_episodes(2)
    assert [partition(eps, 4, s) for s in range(4)] == [[0], [1], [0], [1]]


def test_iterator_passes_are_permutations_grouped_by_scene_and_resumable():
    eps = make_episodes(4, "gen/a.glb") + make_episodes(4, "gen/b.glb")
    scenes = [e.scene_id for e in eps]
    it = EpisodeIterator(list(range(8)), scenes, seed=3)
    first = [next(it) for _ in range(8)]
    assert sorted(first) == list(range(8))
    assert len({scenes[k] for k in first[:4]}) == 1  # one scene at a time
    state = it.state_dict()
    json.dumps(state)  # plain values only
    rest = [next(it) for _ in range(11)]
    it2 = EpisodeIterator(list(range(8)), scenes, seed=99)
    it2.load_state_dict(state)
    assert [next(it2) for _ in range(11)] == rest
    plain = EpisodeIterator([5, 1, 3], scenes, seed=0, shuffle=False)
    assert [next(plain) for _ in range(6)] == [5, 1, 3, 5, 1, 3]
