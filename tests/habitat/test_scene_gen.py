"""Procedural scenes: floor-plan geometry and the GLB file format (no habitat-sim needed)."""

import json
import struct

import numpy as np
import pytest

from ddppo.envs.scenes import scene_gen
from ddppo.envs.scenes.glb import (CHUNK_BIN, CHUNK_JSON, GLB_MAGIC, Primitive, decode_glb, encode_glb,
                              glb_frame_to_world, read_glb, world_to_glb_frame)
from ddppo.envs.scenes.layout import Layout, LayoutParams, generate_layout, is_connected, rasterize
from ddppo.envs.scenes.sim import habitat_sim_available


@pytest.mark.parametrize("seed", range(6))
def test_layouts_are_connected_rooms_with_doors_and_unwalkable_furniture(seed):
    p = LayoutParams()
    layout = generate_layout(np.random.default_rng(seed), p)
    x0, z0, x1, z1 = layout.footprint
    assert p.size_min <= x1 - x0 <= p.size_max and p.size_min <= z1 - z0 <= p.size_max
    assert 1 <= len(layout.rooms) <= p.max_rooms and len(layout.doors) == len(layout.rooms) - 1
    assert is_connected(layout, p)
    for b in layout.boxes:
        assert all(lo < hi for lo, hi in zip(b.lo, b.hi))
        if b.kind == "furniture":  # top too close to the ceiling to stand on: never a navmesh island
            assert layout.ceiling_y - b.hi[1] < p.agent_height
        else:
            assert b.hi[1] == layout.ceiling_y
    for dx0, dz0, dx1, dz1 in layout.doors:  # door gaps are free of walls
        cx, cz = (dx0 + dx1) / 2, (dz0 + dz1) / 2
        assert rasterize(layout, 0.05, kinds=("wall",)).free_at(cx, cz)


def test_layout_json_round_trip(tmp_path):
    layout = generate_layout(np.random.default_rng(0))
    layout.save(str(tmp_path / "x.layout.json"))
    again = Layout.load(str(tmp_path / "x.layout.json"))
    assert again.to_json() == json.loads(json.dumps(layout.to_json()))
    assert generate_layout(np.random.default_rng(0)).to_json() == layout.to_json()  # deterministic


def test_glb_is_valid_gltf_binary():
    prim = Primitive("tri", np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0]]), np.array([[0, 0, 1]] * 3),
                     np.array([0, 1, 2]), (0.1, 0.2, 0.3))
    data = encode_glb([prim, prim])
    magic, version, length = struct.unpack_from("<III", data)
    assert (magic, version, length) == (GLB_MAGIC, 2, len(data)) and data[:4] == b"glTF"
    json_len, json_type = struct.unpack_from("<II", data, 12)
    assert json_type == CHUNK_JSON and json_len % 4 == 0
    bin_len, bin_type = struct.unpack_from("<II", data, 20 + json_len)
    assert bin_type == CHUNK_BIN and bin_len % 4 == 0 and 28 + json_len + bin_len == len(data)
    doc, binary = decode_glb(data)
    assert doc["asset"]["version"] == "2.0" and doc["buffers"][0]["byteLength"] == len(binary)
    for view in doc["bufferViews"]:
        assert view["byteOffset"] % 4 == 0 and view["byteOffset"] + view["byteLength"] <= len(binary)
    for prim_doc in doc["meshes"][0]["primitives"]:
        pos = doc["accessors"][prim_doc["attributes"]["POSITION"]]
        assert pos["min"] == [0, 0, 0] and pos["max"] == [1, 1, 0]  # required bounds
        assert doc["materials"][prim_doc["material"]]["pbrMetallicRoughness"]["baseColorFactor"] == \
            pytest.approx([0.1, 0.2, 0.3, 1.0])
    with pytest.raises(ValueError):
        encode_glb([Primitive("bad", np.zeros((3, 3)), np.zeros((3, 3)), np.array([0, 1, 5]))])
    with pytest.raises(ValueError):
        decode_glb(data[:-4])


def test_glb_frame_is_z_up():
    world = np.array([[1.0, 2.0, 3.0]])
    mesh = world_to_glb_frame(world)
    assert mesh.tolist() == [[1.0, -3.0, 2.0]]  # world up (+Y) is mesh +Z; world -Z (forward) is mesh +Y
    assert np.allclose(glb_frame_to_world(mesh), world)


def test_scene_mesh_geometry(tmp_path):
    layout = generate_layout(np.random.default_rng(1), LayoutParams(size_min=5, size_max=6))
    files = scene_gen.write_scene(str(tmp_path), "s", layout)
    prims = {p.name: p for p in read_glb(files.glb)}
    assert {"floor", "ceiling", "wall"} <= set(prims)
    floor, ceiling = prims["floor"], prims["ceiling"]
    # exactly one quad each; the floor faces up, the ceiling down (a closed box would add a walkable top)
    assert len(floor.indices) == 6 and len(ceiling.indices) == 6
    assert np.allclose(glb_frame_to_world(floor.normals), [0, 1, 0])
    assert np.allclose(glb_frame_to_world(ceiling.normals), [0, -1, 0])
    assert np.allclose(glb_frame_to_world(ceiling.positions)[:, 1], layout.ceiling_y)
    for prim in prims.values():  # winding agrees with the normals everywhere
        tri = prim.positions[prim.indices.reshape(-1, 3)]
        face = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
        assert (np.einsum("ij,ij->i", face, prim.normals[prim.indices.reshape(-1, 3)[:, 0]]) > 0).all()
    world = np.concatenate([glb_frame_to_world(p.positions) for p in prims.values()])
    x0, z0, x1, z1 = layout.footprint
    assert np.allclose(world.min(0), [x0, 0, z0]) and np.allclose(world.max(0), [x1, layout.ceiling_y, z1])
    walls = sum(b.kind == "wall" for b in layout.boxes)
    assert len(prims["wall"].indices) == walls * 4 * 6  # 4 sides, no top or bottom
    furniture_colors = {b.color for b in layout.boxes if b.kind == "furniture"}
    assert {p.color for n, p in prims.items() if n.startswith("furniture")} == set(furniture_colors)


def test_cli_generate_writes_scenes_and_says_whether_navmeshes_were_made(tmp_path, capsys, gpu):
    rc = scene_gen.main(["generate", "--out", str(tmp_path), "--num-scenes", "2", "--seed", "3",
                         "--size-min", "5", "--size-max", "6", "--gpu-device-id", str(gpu)])
    out = capsys.readouterr().out
    assert rc == 0
    for k in range(2):
        assert (tmp_path / f"gen_{k:03d}.glb").is_file() and (tmp_path / f"gen_{k:03d}.layout.json").is_file()
    if habitat_sim_available():
        assert (tmp_path / "gen_000.navmesh").is_file()
    else:
        assert "navmeshes NOT written" in out and not (tmp_path / "gen_000.navmesh").exists()


@pytest.mark.skipif(habitat_sim_available(), reason="checks the message shown without habitat-sim")
def test_cli_navmesh_without_habitat_sim_explains_install(tmp_path, capsys):
    assert scene_gen.main(["navmesh", str(tmp_path / "x.glb")]) == 2
    assert "conda install" in capsys.readouterr().out
