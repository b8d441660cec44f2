"""Semantic annotations of generated scenes, in the form habitat-sim 0.2.x loads for a bare .glb scene.

For a scene `<name>.glb` opened without a scene dataset config, habitat-sim 0.2.2's stage defaults
(`StageAttributesManager`) take the semantic mesh `<name>_semantic.ply` and the semantic scene descriptor
`<name>_semantic.txt` from next to it; the descriptor is read as HM3D's format when its first line says
`HM3D Semantic Annotations` (`id,RRGGBB,"category",region` per instance; instance 0 is habitat-sim's own
"Unknown"). The mesh must carry vertex colours; a per-vertex `object_id` gives the instance id that SEMANTIC
sensors render. Frame: habitat-sim turns a semantic PLY from Z-up to Y-up when it reads it, and then places it
with the stage's frame, which for a bare .glb is Z-up too; so its vertices are the .glb's mesh-frame vertices
turned once more by the same rotation (world (x, y, z) stored as (x, -y, -z)). Checked by rendering: a SEMANTIC
sensor's instance masks cover the pixels of each object's colour in the RGB view (tests/habitat).
The AABBs habitat-sim 0.2.2 reports for these `semantic_scene.objects` are not the boxes (right in x and y, but
of zero extent in z); use `semantic_objects` for the boxes.

Instances: 1 = the walls, 2 = the floor, 3 = the ceiling, then one per furniture box (layout order). A
furniture box's category follows from its colour (`layout.FURNITURE_COLORS`), so RGB tells them apart.
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np

from ddppo.envs.base import EnvError
from ddppo.envs.scenes.glb import world_to_glb_frame
from ddppo.envs.scenes.layout import FURNITURE_COLORS, Box, Layout

HM3D_HEADER = "HM3D Semantic Annotations"
# category name -> Matterport3D category index (mpcat40), written as the ObjectNav dataset's
# category_to_mp3d_category_id
MP3D_CATEGORY_ID = {"wall": 1, "floor": 2, "table": 5, "cabinet": 7, "sofa": 10, "bed": 11, "plant": 14,
                    "ceiling": 17, "furniture": 36}
FURNITURE_CATEGORIES = ("cabinet", "sofa", "plant", "bed", "table")  # one per FURNITURE_COLORS entry
STRUCTURE = ("wall", "floor", "ceiling")  # instance ids 1, 2, 3


@dataclasses.dataclass(frozen=True)
class SemanticObject:
    """One annotated instance: id (what a SEMANTIC sensor renders), category, world AABB, room index."""

    id: int
    category: str
    lo: tuple[float, float, float]
    hi: tuple[float, float, float]
    region: int = -1

    @property
    def color_hex(self) -> str:
        return "".join(f"{c:02X}" for c in instance_color(self.id))


def category_of(box: Box) -> str:
    """A furniture box's category, from its colour ("furniture" for a colour outside the palette)."""
    for color, name in zip(FURNITURE_COLORS, FURNITURE_CATEGORIES):
        if np.allclose(box.color, color, atol=1e-6):
            return name
    return "furniture"


def instance_color(instance_id: int) -> tuple[int, int, int]:
    """A distinct RGB colour per instance id (unique for ids below 65536; 0 is black, like HM3D's Unknown)."""
    if not 0 <= instance_id < 65536:
        raise ValueError(f"instance id {instance_id} does not fit the 16-bit ids habitat-sim renders")
    return (instance_id * 97) % 256 if instance_id else 0, instance_id >> 8, instance_id & 0xFF


def _room_of(layout: Layout, box: Box) -> int:
    cx, cz = (box.lo[0] + box.hi[0]) / 2, (box.lo[2] + box.hi[2]) / 2
    for k, (x0, z0, x1, z1) in enumerate(layout.rooms):
        if x0 <= cx <= x1 and z0 <= cz <= z1:
            return k
    return -1


def semantic_objects(layout: Layout) -> list[SemanticObject]:
    """The instances of a floor plan: walls, floor, ceiling, then each furniture box."""
    x0, z0, x1, z1 = layout.footprint
    lo, hi = (x0, layout.floor_y, z0), (x1, layout.ceiling_y, z1)
    objects = [SemanticObject(k + 1, name, lo, hi) for k, name in enumerate(STRUCTURE)]
    for box in layout.boxes:
        if box.kind != "wall":
            objects.append(SemanticObject(len(objects) + 1, category_of(box), tuple(box.lo), tuple(box.hi),
                                          _room_of(layout, box)))
    return objects


def semantic_paths(scene_glb: str) -> tuple[str, str]:
    """(`<scene>_semantic.ply`, `<scene>_semantic.txt`) next to a scene .glb."""
    stem = os.path.splitext(scene_glb)[0]
    return stem + "_semantic.ply", stem + "_semantic.txt"


def descriptor_text(objects: list[SemanticObject]) -> str:
    lines = [HM3D_HEADER] + [f'{o.id},{o.color_hex},"{o.category}",{o.region}' for o in objects]
    return "\n".join(lines) + "\n"


def read_descriptor(path: str) -> list[tuple[int, str, int]]:
    """(id, category, region) per instance line of an HM3D-format `_semantic.txt`."""
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError as err:
        raise EnvError(f"semantic descriptor {path!r} is not readable: {err}") from err
    if not lines or HM3D_HEADER not in lines[0]:
        raise EnvError(f"semantic descriptor {path!r} does not start with {HM3D_HEADER!r}")
    out = []
    for n, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        parts = line.split('"')
        try:
            ident, _color = [t.strip() for t in parts[0].split(",") if t.strip()]
            out.append((int(ident), parts[1], int(parts[2].strip(" ,"))))
        except (ValueError, IndexError) as err:
            raise EnvError(f"semantic descriptor {path!r} line {n} is not id,RRGGBB,\"category\",region: "
                           f"{line!r}") from err
    return out


def encode_ply(positions: np.ndarray, colors: np.ndarray, object_ids: np.ndarray, triangles: np.ndarray) -> bytes:
    """A binary little-endian PLY: per-vertex x y z, red green blue, object_id; triangle faces."""
    n, m = len(positions), len(triangles)
    header = (f"ply\nformat binary_little_endian 1.0\nelement vertex {n}\nproperty float x\nproperty float y\n"
              f"property float z\nproperty uchar red\nproperty uchar green\nproperty uchar blue\n"
              f"property ushort object_id\nelement face {m}\nproperty list uchar int vertex_indices\nend_header\n")
    vert = np.zeros(n, dtype=[("p", "<f4", 3), ("c", "u1", 3), ("id", "<u2")])
    vert["p"], vert["c"], vert["id"] = positions, colors, object_ids
    face = np.zeros(m, dtype=[("k", "u1"), ("v", "<i4", 3)])
    face["k"], face["v"] = 3, triangles
    return header.encode() + vert.tobytes() + face.tobytes()


def decode_ply(data: bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(positions, colors, object_ids, triangles) of a PLY written by `encode_ply`."""
    end = data.index(b"end_header\n") + len(b"end_header\n")
    counts = [int(line.split()[2]) for line in data[:end].decode().splitlines() if line.startswith("element")]
    vdt = np.dtype([("p", "<f4", 3), ("c", "u1", 3), ("id", "<u2")])
    vert = np.frombuffer(data, dtype=vdt, count=counts[0], offset=end)
    face = np.frombuffer(data, dtype=[("k", "u1"), ("v", "<i4", 3)], count=counts[1],
                         offset=end + counts[0] * vdt.itemsize)
    return vert["p"].copy(), vert["c"].copy(), vert["id"].copy(), face["v"].copy()


def write_semantic(scene_glb: str, objects: list[SemanticObject], parts: list[tuple[int, object]]) -> tuple[str, str]:
    """Write `<scene>_semantic.ply` from (instance id, glb.Primitive in the .glb mesh frame) parts, and the
    HM3D-format descriptor `<scene>_semantic.txt`."""
    ply, txt = semantic_paths(scene_glb)
    known = {o.id for o in objects}
    positions, colors, ids, tris, base = [], [], [], [], 0
    for ident, prim in parts:
        if ident not in known:
            raise ValueError(f"mesh part of instance {ident} has no entry in the descriptor")
        pos = world_to_glb_frame(np.asarray(prim.positions).reshape(-1, 3)).astype(np.float32)  # see the frame note
        positions.append(pos)
        colors.append(np.tile(np.array(instance_color(ident), dtype=np.uint8), (len(pos), 1)))
        ids.append(np.full(len(pos), ident, dtype=np.uint16))
        tris.append(np.asarray(prim.indices, dtype=np.int64).reshape(-1, 3) + base)
        base += len(pos)
    data = encode_ply(np.concatenate(positions), np.concatenate(colors), np.concatenate(ids), np.concatenate(tris))
    for path, payload in ((ply, data), (txt, descriptor_text(objects).encode())):
        with open(path + ".tmp", "wb") as f:
            f.write(payload)
        os.replace(path + ".tmp", path)
    return ply, txt


def scene_objects(scene_glb: str, layout: Layout) -> list[SemanticObject]:
    """The annotated instances of a generated scene: its layout's, checked against its `_semantic.txt`."""
    ply, txt = semantic_paths(scene_glb)
    for path in (ply, txt):
        if not os.path.isfile(path):
            raise EnvError(f"scene {scene_glb!r} has no semantic annotations ({path!r} is missing); write them "
                           f"with `python -m ddppo.envs.scenes.scene_gen semantic {scene_glb}`")
    objects = semantic_objects(layout)
    if read_descriptor(txt) != [(o.id, o.category, o.region) for o in objects]:
        raise EnvError(f"semantic descriptor {txt!r} does not match the scene's layout.json; rewrite it with "
                       f"`python -m ddppo.envs.scenes.scene_gen semantic {scene_glb}`")
    return objects
