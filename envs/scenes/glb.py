"""A minimal glTF 2.0 binary (.glb) writer and reader, numpy only.

Only what scene files need: triangle meshes (POSITION, NORMAL, uint32 indices)
with one flat-coloured material per primitive (`baseColorFactor`: habitat-sim's
flat shading ignores vertex colours but uses material base colours).

habitat-sim reads a bare .glb as Z-up (mesh +Z is world +Y, mesh +Y is world
-Z). `world_to_glb_frame` maps habitat world coordinates (Y-up) into that mesh
frame, so a scene authored in world coordinates appears upright.
"""

from __future__ import annotations

import dataclasses
import json
import struct
from typing import Any

import numpy as np

GLB_MAGIC = 0x46546C67  # b"glTF"
CHUNK_JSON = 0x4E4F534A  # b"JSON"
CHUNK_BIN = 0x004E4942  # b"BIN\0"
FLOAT, UINT32 = 5126, 5125
ARRAY_BUFFER, ELEMENT_ARRAY_BUFFER = 34962, 34963
TRIANGLES = 4


@dataclasses.dataclass
class Primitive:
    """One flat-coloured triangle mesh."""

    name: str
    positions: np.ndarray  # (N, 3) float
    normals: np.ndarray  # (N, 3) float
    indices: np.ndarray  # (M*3,) int
    color: tuple[float, float, float] = (0.8, 0.8, 0.8)


def world_to_glb_frame(v: np.ndarray) -> np.ndarray:
    """Habitat world (x, y, z), Y-up -> bare-GLB mesh frame (x, -z, y), Z-up."""
    v = np.asarray(v, dtype=np.float64)
    return np.stack([v[..., 0], -v[..., 2], v[..., 1]], axis=-1)


def glb_frame_to_world(v: np.ndarray) -> np.ndarray:
    """Inverse of `world_to_glb_frame`."""
    v = np.asarray(v, dtype=np.float64)
    return np.stack([v[..., 0], v[..., 2], -v[..., 1]], axis=-1)


def _pad(data: bytes, fill: bytes) -> bytes:
    return data + fill * (-len(data) % 4)


def encode_glb(primitives: list[Primitive], generator: str = "ddppo ddppo.envs.scenes.glb") -> bytes:
    """The .glb bytes of one node holding one mesh with one primitive per entry."""
    bin_parts: list[bytes] = []
    views: list[dict[str, Any]] = []
    accessors: list[dict[str, Any]] = []
    offset = 0

    def add(array: np.ndarray, component: int, kind: str, target: int, bounds: bool) -> int:
        nonlocal offset
        raw = array.tobytes()
        views.append({"buffer": 0, "byteOffset": offset, "byteLength": len(raw), "target": target})
        bin_parts.append(_pad(raw, b"\0"))
        offset += len(bin_parts[-1])
        acc = {"bufferView": len(views) - 1, "componentType": component, "count": int(array.shape[0]),
               "type": kind}
        if bounds:
            acc["min"] = [float(x) for x in array.min(axis=0)]
            acc["max"] = [float(x) for x in array.max(axis=0)]
        accessors.append(acc)
        return len(accessors) - 1

    gl_prims, materials = [], []
    for prim in primitives:
        pos = np.ascontiguousarray(prim.positions, dtype=np.float32).reshape(-1, 3)
        nrm = np.ascontiguousarray(prim.normals, dtype=np.float32).reshape(-1, 3)
        idx = np.ascontiguousarray(prim.indices, dtype=np.uint32).reshape(-1)
        if len(pos) == 0 or len(idx) == 0 or len(idx) % 3 or idx.max() >= len(pos) or nrm.shape != pos.shape:
            raise ValueError(f"primitive {prim.name!r} is not a valid triangle mesh")
        materials.append({
            "name": prim.name,
            "pbrMetallicRoughness": {"baseColorFactor": [*map(float, prim.color), 1.0],
                                     "metallicFactor": 0.0, "roughnessFactor": 1.0},
            "doubleSided": False,
        })
        gl_prims.append({
            "attributes": {"POSITION": add(pos, FLOAT, "VEC3", ARRAY_BUFFER, True),
                           "NORMAL": add(nrm, FLOAT, "VEC3", ARRAY_BUFFER, False)},
            "indices": add(idx.reshape(-1, 1), UINT32, "SCALAR", ELEMENT_ARRAY_BUFFER, False),
            "material": len(materials) - 1,
            "mode": TRIANGLES,
        })
    binary = b"".join(bin_parts)
    doc = {
        "asset": {"version": "2.0", "generator": generator},
        "scene": 0,
        "scenes": [{"nodes": [0]}],
        "nodes": [{"mesh": 0, "name": "scene"}],
        "meshes": [{"name": "scene", "primitives": gl_prims}],
        "materials": materials,
        "buffers": [{"byteLength": len(binary)}],
        "bufferViews": views,
        "accessors": accessors,
    }
    json_chunk = _pad(json.dumps(doc, separators=(",", ":")).encode(), b" ")
    total = 12 + 8 + len(json_chunk) + 8 + len(binary)
    return b"".join([
        struct.pack("<III", GLB_MAGIC, 2, total),
        struct.pack("<II", len(json_chunk), CHUNK_JSON), json_chunk,
        struct.pack("<II", len(binary), CHUNK_BIN), binary,
    ])


def write_glb(path: str, primitives: list[Primitive]) -> None:
    data = encode_glb(primitives)
    with open(path, "wb") as f:
        f.write(data)


def decode_glb(data: bytes) -> tuple[dict[str, Any], bytes]:
    """(JSON document, BIN chunk) of a .glb; raises ValueError if malformed."""
    if len(data) < 20:
        raise ValueError("too short for a glb")
    magic, version, total = struct.unpack_from("<III", data, 0)
    if magic != GLB_MAGIC or version != 2 or total != len(data):
        raise ValueError(f"bad glb header (magic {magic:#x}, version {version}, length {total} vs {len(data)})")
    doc, binary, pos = None, b"", 12
    while pos < total:
        length, kind = struct.unpack_from("<II", data, pos)
        if length % 4 or pos + 8 + length > total:
            raise ValueError("glb chunk is misaligned or overruns the file")
        chunk = data[pos + 8:pos + 8 + length]
        if kind == CHUNK_JSON:
            doc = json.loads(chunk.decode())
        elif kind == CHUNK_BIN:
            binary = chunk
        pos += 8 + length
    if doc is None:
        raise ValueError("glb has no JSON chunk")
    return doc, binary


def read_accessor(doc: dict[str, Any], binary: bytes, index: int) -> np.ndarray:
    acc = doc["accessors"][index]
    view = doc["bufferViews"][acc["bufferView"]]
    dtype = {FLOAT: np.float32, UINT32: np.uint32}[acc["componentType"]]
    width = {"SCALAR": 1, "VEC3": 3, "VEC4": 4}[acc["type"]]
    start = view.get("byteOffset", 0) + acc.get("byteOffset", 0)
    arr = np.frombuffer(binary, dtype=dtype, count=acc["count"] * width, offset=start)
    return arr.reshape(acc["count"], width) if width > 1 else arr


def read_glb(path: str) -> list[Primitive]:
    """Primitives of a .glb written by `write_glb` (mesh-frame coordinates)."""
    with open(path, "rb") as f:
        doc, binary = decode_glb(f.read())
    out = []
    for mesh in doc["meshes"]:
        for prim in mesh["primitives"]:
            mat = doc["materials"][prim["material"]]
            color = tuple(mat["pbrMetallicRoughness"]["baseColorFactor"][:3])
            out.append(Primitive(
                mat.get("name", ""), read_accessor(doc, binary, prim["attributes"]["POSITION"]),
                read_accessor(doc, binary, prim["attributes"]["NORMAL"]),
                read_accessor(doc, binary, prim["indices"]), color,
            ))
    return out
