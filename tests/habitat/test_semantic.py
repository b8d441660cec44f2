"""Semantic annotations of generated scenes: instances, categories, the PLY + HM3D descriptor files (no habitat-sim
needed; tests/habitat/test_real_semantic.py renders them with the real simulator)."""

import dataclasses

import numpy as np
import pytest

from ddppo.envs.base import EnvError
from ddppo.envs.scenes import scene_gen
from ddppo.envs.scenes.glb import read_glb, world_to_glb_frame
from ddppo.envs.scenes.layout import FURNITURE_COLORS, Layout, LayoutParams, generate_layout
from ddppo.envs.scenes.semantic import (FURNITURE_CATEGORIES, HM3D_HEADER, category_of, decode_ply, instance_color,
                                   read_descriptor, scene_objects, semantic_objects, semantic_paths)

PARAMS = LayoutParams(size_min=6.0, size_max=8.0, max_rooms=3, max_furniture=3)


def _layout(seed: int = 0) -> Layout:
    return generate_layout(np.random.default_rng(seed), PARAMS)


def test_instances_are_structure_then_each_furniture_box_with_its_colour_category():
    layout = _layout()
    objects = semantic_objects(layout)
    furniture = [b for b in layout.boxes if b.kind == "furniture"]
    assert [o.id for o in objects] == list(range(1, 4 + len(furniture)))
    assert [o.category for o in objects[:3]] == ["wall", "floor", "ceiling"]
    for obj, box in zip(objects[3:], furniture):
        assert (obj.lo, obj.hi) == (tuple(box.lo), tuple(box.hi))
        assert obj.category == FURNITURE_CATEGORIES[FURNITURE_COLORS.index(tuple(box.color))]
        assert 0 <= obj.region < len(layout.rooms)
    assert category_of(dataclasses.replace(furniture[0], color=(0.01, 0.02, 0.03))) == "furniture"


def test_instance_colours_are_distinct_and_bounded():
    colors = {instance_color(k) for k in range(2000)}
    assert len(colors) == 2000 and instance_color(0) == (0, 0, 0)
    with pytest.raises(ValueError, match="16-bit"):
        instance_color(70000)


def test_written_files_are_the_render_mesh_painted_by_instance(tmp_path):
    layout = _layout(1)
    files = scene_gen.write_scene(str(tmp_path), "s", layout)
    ply, txt = semantic_paths(files.glb)
    assert files.semantic == (ply, txt) and ply.endswith("s_semantic.ply") and txt.endswith("s_semantic.txt")
    objects = semantic_objects(layout)
    with open(txt) as f:
        assert f.readline().strip() == HM3D_HEADER  # what makes habitat-sim read it as HM3D's format
    assert read_descriptor(txt) == [(o.id, o.category, o.region) for o in objects]
    with open(ply, "rb") as f:
        positions, colors, ids, triangles = decode_ply(f.read())
    render = read_glb(files.glb)
    assert len(positions) == sum(len(p.positions) for p in render)  # same geometry, no part dropped
    assert set(ids.tolist()) == {o.id for o in objects}
    for ident in set(ids.tolist()):
        assert (colors[ids == ident] == np.array(instance_color(ident))).all()
    assert triangles.max() < len(positions) and (ids[triangles[:, 0]] == ids[triangles[:, 2]]).all()
    # the frame habitat-sim needs: the .glb's mesh-frame vertices turned once more (world (x, y, z) -> (x, -y, -z))
    render_verts = np.concatenate([p.positions for p in render])
    np.testing.assert_allclose(np.sort(positions, axis=0), np.sort(world_to_glb_frame(render_verts), axis=0),
                               atol=1e-5)
    furn = [o for o in objects if o.id > 3][0]
    mine = positions[ids == furn.id]
    np.testing.assert_allclose(mine.min(0), [furn.lo[0], -furn.hi[1], -furn.hi[2]], atol=1e-5)


def test_no_semantic_flag_and_annotating_existing_scenes(tmp_path, capsys):
    files = scene_gen.write_scene(str(tmp_path), "s", _layout(2), semantic=False)
    assert files.semantic is None
    with pytest.raises(EnvError, match=r"no semantic annotations .*scene_gen semantic"):
        scene_objects(files.glb, Layout.load(files.layout))
    assert scene_gen.main(["semantic", files.glb]) == 0
    assert "s_semantic.ply" in capsys.readouterr().out
    assert [o.id for o in scene_objects(files.glb, Layout.load(files.layout))] == \
        [o.id for o in semantic_objects(_layout(2))]


def test_descriptor_that_does_not_match_the_layout_or_is_malformed_is_one_clear_error(tmp_path):
    files = scene_gen.write_scene(str(tmp_path), "s", _layout(3))
    _, txt = semantic_paths(files.glb)
    with open(txt) as f:
        lines = f.read().splitlines()
    with open(txt, "w") as f:
        f.write("\n".join(lines[:-1]) + "\n")
    with pytest.raises(EnvError, match="does not match the scene's layout.json"):
        scene_objects(files.glb, Layout.load(files.layout))
    with open(txt, "w") as f:
        f.write(HM3D_HEADER + "\n7 no quotes here\n")
    with pytest.raises(EnvError, match="line 2 is not"):
        read_descriptor(txt)
    with open(txt, "w") as f:
        f.write("something else\n")
    with pytest.raises(EnvError, match="does not start with"):
        read_descriptor(txt)


def test_cli_semantic_for_a_scene_without_floor_plan_is_one_line_exit_2(tmp_path, capsys):
    (tmp_path / "x.glb").write_bytes(b"")
    assert scene_gen.main(["semantic", str(tmp_path / "x.glb")]) == 2
    out = capsys.readouterr().out.strip()
    assert out.startswith("error: ") and "no floor plan" in out and "\n" not in out
