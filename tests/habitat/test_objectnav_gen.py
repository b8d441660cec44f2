"""ObjectNav-v1 episode generation on generated scenes (grid backend: runs everywhere; the view points on the real
navmesh are checked in test_real_semantic.py, habitat-lab's own loader and task in tests/habitat_lab)."""

import gzip
import json
import math
import os

import numpy as np
import pytest

from ddppo.envs.base import EnvError
from ddppo.envs.scenes import objectnav_gen
from ddppo.envs.scenes.gridsim import GridSim
from ddppo.envs.scenes.interface import SimSettings
from ddppo.envs.scenes.layout import Layout, LayoutParams, generate_layout
from ddppo.envs.scenes.objectnav_gen import ObjectNavGenParams, generate_for_scene
from ddppo.envs.scenes.scene_gen import write_scene
from ddppo.envs.scenes.semantic import semantic_objects

PARAMS = LayoutParams(size_min=6.0, size_max=8.0, max_rooms=3, max_furniture=3)
CATEGORIES = ("cabinet", "sofa", "plant", "bed", "table")


@pytest.fixture(scope="module")
def scenes(tmp_path_factory):
    root = tmp_path_factory.mktemp("objectnav")
    files = [write_scene(str(root / "gen"), f"gen_{k:03d}", generate_layout(np.random.default_rng(k), PARAMS))
             for k in range(2)]
    return {"root": str(root), "files": files}


def _categories_of(scene) -> set:
    return {o.category for o in semantic_objects(Layout.load(scene.layout))[3:]}


def test_episodes_goals_and_view_points(scenes):
    scene = scenes["files"][0]
    layout = Layout.load(scene.layout)
    params = ObjectNavGenParams(categories=CATEGORIES, min_geodesic=0.5, max_geodesic=4.0)
    sim = GridSim(SimSettings(depth_sensor=False))
    data = generate_for_scene(sim, scene.glb, "gen/gen_000.glb", 12, seed=0, params=params)
    assert set(data["goals_by_category"]) == {f"gen_000.glb_{c}" for c in _categories_of(scene)}
    boxes = {o.id: o for o in semantic_objects(layout)}
    for key, goals in data["goals_by_category"].items():
        for goal in goals:
            obj = boxes[goal["object_id"]]
            assert key == f"gen_000.glb_{goal['object_category']}" == f"gen_000.glb_{obj.category}"
            assert goal["object_name"] == f"{obj.category}_{obj.id}" and goal["view_points"]
            for vp in goal["view_points"]:
                p, q = np.array(vp["agent_state"]["position"]), vp["agent_state"]["rotation"]
                assert sim.is_navigable(p)
                gap = math.hypot(max(obj.lo[0] - p[0], 0, p[0] - obj.hi[0]), max(obj.lo[2] - p[2], 0, p[2] - obj.hi[2]))
                assert 0 < gap <= params.view_radius + 1e-9
                yaw = 2 * math.atan2(q[1], q[3])  # faces the object's centre (habitat: -Z at yaw 0)
                to_obj = np.array([(obj.lo[0] + obj.hi[0]) / 2 - p[0], (obj.lo[2] + obj.hi[2]) / 2 - p[2]])
                assert np.dot([-math.sin(yaw), -math.cos(yaw)], to_obj / np.linalg.norm(to_obj)) > 0.999
    for ep in data["episodes"]:
        assert set(ep) == {"episode_id", "scene_id", "start_position", "start_rotation", "info", "goals",
                           "object_category", "shortest_paths"}
        assert ep["goals"] == [] and ep["scene_id"] == "gen/gen_000.glb"
        vps = [np.array(v["agent_state"]["position"]) for g in data["goals_by_category"][
            f"gen_000.glb_{ep['object_category']}"] for v in g["view_points"]]
        best = min(sim.geodesic_distance(p, np.array(ep["start_position"])) for p in vps)  # brute force
        assert best == pytest.approx(ep["info"]["geodesic_distance"]) and 0.5 <= best <= 4.0
    again = generate_for_scene(GridSim(SimSettings(depth_sensor=False)), scene.glb, "gen/gen_000.glb", 12, seed=0,
                               params=params)
    assert again == data  # deterministic given the seed


def test_cli_writes_habitat_lab_objectnav_v1_split(scenes, tmp_path, capsys):
    cats = sorted(_categories_of(scenes["files"][0]) & _categories_of(scenes["files"][1]))[:2]
    out = tmp_path / "train"
    argv = ["--scenes-dir", scenes["root"], "--scenes", *[s.glb for s in scenes["files"]], "--out", str(out),
            "--episodes-per-scene", "5", "--backend", "grid", "--categories", *cats[::-1],
            "--min-geodesic", "0.5", "--max-geodesic", "5"]
    assert objectnav_gen.main(argv) == 0
    assert "wrote 10 episodes (grid backend)" in capsys.readouterr().out
    files = sorted(os.listdir(out / "content"))
    assert files == ["gen_000.json.gz", "gen_001.json.gz"]
    maps = {"category_to_task_category_id": {c: k for k, c in enumerate(cats[::-1])},
            "category_to_mp3d_category_id": {c: objectnav_gen.MP3D_CATEGORY_ID[c] for c in cats[::-1]}}
    with gzip.open(out / "train.json.gz", "rt") as f:
        assert json.load(f) == {"episodes": [], **maps}
    with gzip.open(out / "content" / "gen_001.json.gz", "rt") as f:
        content = json.load(f)
    assert {k: content[k] for k in maps} == maps
    assert {ep["object_category"] for ep in content["episodes"]} <= set(cats)
    assert all(ep["scene_id"] == "gen/gen_001.glb" for ep in content["episodes"])


def _run(argv, capsys) -> str:
    assert objectnav_gen.main(argv) == 2
    lines = capsys.readouterr().out.strip().splitlines()  # per-scene progress lines may come first
    assert lines[-1].startswith("error: ") and sum("error" in line for line in lines) == 1
    assert "Traceback" not in "".join(lines)
    return lines[-1]


def test_bad_input_is_one_line_exit_2(scenes, tmp_path, capsys):
    base = ["--scenes-dir", scenes["root"], "--out", str(tmp_path / "x"), "--backend", "grid"]
    glb = scenes["files"][0].glb
    assert "scene file(s) not found" in _run(base + ["--scenes", str(tmp_path / "nope.glb")], capsys)
    assert "are not categories" in _run(base + ["--scenes", glb, "--categories", "chair"], capsys)
    assert "names a category twice" in _run(base + ["--scenes", glb, "--categories", "bed", "bed"], capsys)
    assert "--min-geodesic" in _run(base + ["--scenes", glb, "--min-geodesic", "3", "--max-geodesic", "1"], capsys)
    absent = [c for c in CATEGORIES if c not in _categories_of(scenes["files"][0])]
    present = sorted(_categories_of(scenes["files"][0]))[0]
    if absent:
        out = _run(base + ["--scenes", glb, "--categories", present, absent[0]], capsys)
        assert f"no scene has a reachable object of category ['{absent[0]}']" in out
        out = _run(base + ["--scenes", glb, "--categories", absent[0]], capsys)
        assert "has no reachable object of the categories" in out
    bare = write_scene(str(tmp_path / "bare"), "b", generate_layout(np.random.default_rng(5), PARAMS), semantic=False)
    out = _run(["--scenes-dir", str(tmp_path), "--scenes", bare.glb, "--out", str(tmp_path / "y"), "--backend", "grid"],
               capsys)
    assert "has no semantic annotations" in out and "scene_gen semantic" in out
    out = _run(base + ["--scenes", glb, "--min-geodesic", "40", "--max-geodesic", "50", "--max-tries", "20"], capsys)
    assert "no start 40.0-50.0 m from a" in out and "loosen" in out
    assert not os.path.exists(tmp_path / "x")  # nothing written on error


def test_impossible_bounds_raise_env_error(scenes):
    sim = GridSim(SimSettings(depth_sensor=False))
    with pytest.raises(EnvError, match="loosen --min/--max-geodesic"):
        generate_for_scene(sim, scenes["files"][1].glb, "gen/gen_001.glb", 2, seed=0,
                           params=ObjectNavGenParams(min_geodesic=50.0, max_geodesic=60.0, max_tries=10))
