"""Procedural indoor scenes for habitat-sim: GLB floor plans plus their navmesh.

    python -m ddppo.envs.scenes.scene_gen generate --out data/scene_datasets/gen --num-scenes 4 --seed 0
    python -m ddppo.envs.scenes.scene_gen navmesh data/scene_datasets/gen/*.glb
    python -m ddppo.envs.scenes.scene_gen semantic data/scene_datasets/gen/*.glb

`generate` writes, per scene, `<name>.glb` (floor, walls with doors,
furniture-like boxes, a ceiling), `<name>.layout.json` (the floor plan, read by
the grid simulator double), its semantic annotations `<name>_semantic.ply` +
`<name>_semantic.txt` (instances and categories, see ddppo.envs.scenes.semantic;
`semantic` writes them for existing scenes from their layout.json) and, when
habitat-sim imports, `<name>.navmesh`
(habitat-sim only computes navmeshes at simulator creation when a renderer
exists, so it is computed here once and saved next to the scene). Without
habitat-sim it says so; run `navmesh` later where habitat-sim is installed.

Mesh facts this relies on (habitat-sim 0.2.x): a bare GLB is read Z-up, so
vertices are written in that frame; the ceiling is one downward-facing quad
(a closed box's top would become a walkable island); colours are material
base colours, since flat shading ignores vertex colours.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import sys

import numpy as np

from ddppo.envs.base import EnvError
from ddppo.envs.scenes.glb import Primitive, world_to_glb_frame, write_glb
from ddppo.envs.scenes.interface import SimSettings
from ddppo.envs.scenes.layout import Box, Layout, LayoutParams, generate_layout
from ddppo.envs.scenes.semantic import instance_color, semantic_objects, write_semantic

log = logging.getLogger(__name__)

FLOOR_COLOR = (0.55, 0.42, 0.30)
WALL_COLOR = (0.82, 0.80, 0.74)
CEILING_COLOR = (0.95, 0.95, 0.95)


class MeshBuilder:
    """Collects world-space quads per colour, then emits GLB primitives."""

    def __init__(self) -> None:
        self._parts: dict[tuple[str, tuple[float, float, float]], list[tuple[np.ndarray, np.ndarray]]] = {}

    def quad(self, name: str, color, corners, normal) -> None:
        """Add a planar quad (4 corners in order around it) facing `normal`."""
        c = np.asarray(corners, dtype=np.float64)
        n = np.asarray(normal, dtype=np.float64)
        if np.dot(np.cross(c[1] - c[0], c[2] - c[0]), n) < 0:
            c = c[::-1].copy()
        self._parts.setdefault((name, tuple(color)), []).append((c, n))

    def box(self, name: str, color, lo, hi, top: bool = True, bottom: bool = False) -> None:
        (x0, y0, z0), (x1, y1, z1) = lo, hi
        self.quad(name, color, [(x0, y0, z0), (x0, y1, z0), (x0, y1, z1), (x0, y0, z1)], (-1, 0, 0))
        self.quad(name, color, [(x1, y0, z0), (x1, y1, z0), (x1, y1, z1), (x1, y0, z1)], (1, 0, 0))
        self.quad(name, color, [(x0, y0, z0), (x1, y0, z0), (x1, y1, z0), (x0, y1, z0)], (0, 0, -1))
        self.quad(name, color, [(x0, y0, z1), (x1, y0, z1), (x1, y1, z1), (x0, y1, z1)], (0, 0, 1))
        if top:
            self.quad(name, color, [(x0, y1, z0), (x1, y1, z0), (x1, y1, z1), (x0, y1, z1)], (0, 1, 0))
        if bottom:
            self.quad(name, color, [(x0, y0, z0), (x1, y0, z0), (x1, y0, z1), (x0, y0, z1)], (0, -1, 0))

    def primitives(self) -> list[Primitive]:
        """One primitive per (name, colour), vertices in the bare-GLB (Z-up) frame."""
        out = []
        for (name, color), quads in self._parts.items():
            corners = np.concatenate([q for q, _ in quads])  # (4Q, 3)
            normals = np.repeat(np.stack([n for _, n in quads]), 4, axis=0)
            base = np.arange(len(quads))[:, None] * 4
            indices = (base + np.array([0, 1, 2, 0, 2, 3])).reshape(-1)
            out.append(Primitive(name, world_to_glb_frame(corners), world_to_glb_frame(normals), indices, color))
        return out


def furniture_paint(kind: str, box: Box | None) -> tuple[str, tuple[float, float, float]]:
    """The render mesh's (material name, colour) of a part: flat colours per kind, furniture its own."""
    flat = {"floor": FLOOR_COLOR, "ceiling": CEILING_COLOR, "wall": WALL_COLOR}
    return (kind, flat[kind]) if kind in flat else (f"furniture_{_color_name(box)}", box.color)


def layout_primitives(layout: Layout, paint=furniture_paint) -> list[Primitive]:
    """The mesh of a floor plan: floor, walls, furniture and a downward-facing ceiling.

    `paint(kind, box)` names and colours each part (kind: floor, ceiling, wall, furniture; box None for floor and
    ceiling); parts painted alike become one primitive. The semantic mesh is the same geometry painted by instance.
    """
    x0, z0, x1, z1 = layout.footprint
    y0, y1 = layout.floor_y, layout.ceiling_y
    mb = MeshBuilder()
    mb.quad(*paint("floor", None), [(x0, y0, z0), (x1, y0, z0), (x1, y0, z1), (x0, y0, z1)], (0, 1, 0))
    mb.quad(*paint("ceiling", None), [(x0, y1, z0), (x1, y1, z0), (x1, y1, z1), (x0, y1, z1)], (0, -1, 0))
    for b in layout.boxes:
        mb.box(*paint(b.kind, b), b.lo, b.hi, top=b.kind != "wall")
    return mb.primitives()


def _color_name(b: Box) -> str:
    return "".join(f"{int(round(c * 255)):02x}" for c in b.color)


def write_scene_semantic(glb: str, layout: Layout) -> tuple[str, str]:
    """`<scene>_semantic.ply` + `<scene>_semantic.txt` (see ddppo.envs.scenes.semantic): the scene's geometry
    painted by instance (walls, floor, ceiling, each furniture box), categories from furniture colours."""
    objects = semantic_objects(layout)
    structure = {o.category: o.id for o in objects[:3]}
    furniture = iter(o.id for o in objects[3:])  # layout_primitives paints the boxes in layout order

    def paint(kind: str, box: Box | None):
        ident = structure[kind] if kind in structure else next(furniture)
        return f"instance_{ident}", tuple(c / 255 for c in instance_color(ident))

    parts = [(int(p.name.split("_")[1]), p) for p in layout_primitives(layout, paint)]
    return write_semantic(glb, objects, parts)


@dataclasses.dataclass
class SceneFiles:
    glb: str
    layout: str
    navmesh: str | None  # None when habitat-sim was not available (or not asked)
    semantic: tuple[str, str] | None = None  # (_semantic.ply, _semantic.txt) when written


def write_scene(out_dir: str, name: str, layout: Layout, semantic: bool = True) -> SceneFiles:
    os.makedirs(out_dir, exist_ok=True)
    glb = os.path.join(out_dir, f"{name}.glb")
    plan = os.path.join(out_dir, f"{name}.layout.json")
    write_glb(glb, layout_primitives(layout))
    layout.save(plan)
    return SceneFiles(glb, plan, None, write_scene_semantic(glb, layout) if semantic else None)


def generate_scenes(out_dir: str, num_scenes: int, seed: int, params: LayoutParams = LayoutParams(),
                    prefix: str = "gen", navmesh: bool = True, gpu_device_id: int = -1,
                    semantic: bool = True) -> tuple[list[SceneFiles], str]:
    """Write `num_scenes` scenes; returns their files and a note about navmeshes."""
    from ddppo.envs.scenes.sim import compute_navmesh, habitat_sim_available  # lazy: habitat-sim is optional

    do_navmesh = navmesh and habitat_sim_available()
    settings = SimSettings(agent_radius=params.agent_radius, agent_height=params.agent_height,
                           gpu_device_id=gpu_device_id, seed=seed)
    scenes = []
    for k in range(num_scenes):
        rng = np.random.default_rng([seed, k])
        files = write_scene(out_dir, f"{prefix}_{k:03d}", generate_layout(rng, params), semantic=semantic)
        if do_navmesh:
            files.navmesh, area = compute_navmesh(files.glb, settings)
            log.info("navmesh %s: %.1f m^2 navigable", files.navmesh, area)
        scenes.append(files)
    if do_navmesh:
        note = "navmeshes written next to the scenes"
    elif navmesh:
        note = ("habitat-sim is not importable here: navmeshes NOT written. The grid backend works without them; "
                "for habitat-sim run `python -m ddppo.envs.scenes.scene_gen navmesh <scenes>` where it is installed")
    else:
        note = "navmeshes not requested (--no-navmesh)"
    return scenes, note


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m ddppo.envs.scenes.scene_gen", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    g = sub.add_parser("generate", help="write procedural scenes (GLB + layout + navmesh)")
    g.add_argument("--out", required=True, help="output folder")
    g.add_argument("--num-scenes", type=int, default=4)
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--prefix", default="gen", help="scene file name prefix (<prefix>_000.glb, ...)")
    g.add_argument("--size-min", type=float, default=LayoutParams.size_min, help="footprint side lower bound (m)")
    g.add_argument("--size-max", type=float, default=LayoutParams.size_max, help="footprint side upper bound (m)")
    g.add_argument("--max-rooms", type=int, default=LayoutParams.max_rooms)
    g.add_argument("--max-furniture", type=int, default=LayoutParams.max_furniture, help="per room")
    g.add_argument("--ceiling", type=float, default=LayoutParams.ceiling_y, help="ceiling height (m)")
    g.add_argument("--agent-radius", type=float, default=LayoutParams.agent_radius)
    g.add_argument("--agent-height", type=float, default=LayoutParams.agent_height)
    g.add_argument("--no-navmesh", action="store_true", help="do not compute navmeshes even if habitat-sim imports")
    g.add_argument("--gpu-device-id", type=int, default=-1, help="renderer device for the navmesh pass")
    g.add_argument("--no-semantic", action="store_true", help="do not write the semantic annotations")
    n = sub.add_parser("navmesh", help="compute <scene>.navmesh for existing scenes (needs habitat-sim)")
    n.add_argument("scenes", nargs="+", help=".glb files")
    n.add_argument("--agent-radius", type=float, default=LayoutParams.agent_radius)
    n.add_argument("--agent-height", type=float, default=LayoutParams.agent_height)
    n.add_argument("--gpu-device-id", type=int, default=-1)
    m = sub.add_parser("semantic", help="write <scene>_semantic.ply/.txt for existing scenes from their layout.json")
    m.add_argument("scenes", nargs="+", help=".glb files (each with <scene>.layout.json next to it)")
    return p


def _write_semantic_for(scenes: list[str]) -> None:
    for scene in scenes:
        plan = os.path.splitext(scene)[0] + ".layout.json"
        if not os.path.isfile(plan):
            raise EnvError(f"scene {scene!r} has no floor plan {plan!r} (only scene_gen's scenes can be annotated)")
        ply, txt = write_scene_semantic(scene, Layout.load(plan))
        print(f"wrote {ply}, {txt}")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        if args.command == "generate":
            if not 0 < args.size_min <= args.size_max:
                print(f"error: need 0 < --size-min <= --size-max (got {args.size_min}, {args.size_max})")
                return 2
            params = LayoutParams(size_min=args.size_min, size_max=args.size_max, max_rooms=args.max_rooms,
                                  max_furniture=args.max_furniture, ceiling_y=args.ceiling,
                                  agent_radius=args.agent_radius, agent_height=args.agent_height)
            scenes, note = generate_scenes(args.out, args.num_scenes, args.seed, params, args.prefix,
                                           navmesh=not args.no_navmesh, gpu_device_id=args.gpu_device_id,
                                           semantic=not args.no_semantic)
            for s in scenes:
                print(f"wrote {', '.join([s.glb, s.layout, *(s.semantic or ()), *([s.navmesh] if s.navmesh else [])])}")
            print(note)
            return 0
        if args.command == "semantic":
            _write_semantic_for(args.scenes)
            return 0
        from ddppo.envs.scenes.sim import compute_navmesh

        settings = SimSettings(agent_radius=args.agent_radius, agent_height=args.agent_height,
                               gpu_device_id=args.gpu_device_id)
        for scene in args.scenes:
            path, area = compute_navmesh(scene, settings)
            print(f"wrote {path} ({area:.1f} m^2 navigable)")
        return 0
    except (EnvError, ValueError, OSError) as err:
        print(f"error: {err}")
        return 2


if __name__ == "__main__":
    sys.exit(main())
