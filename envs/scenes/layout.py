"""Procedural indoor floor plans: rooms, doors, furniture-like obstacles.

A `Layout` is a footprint in the floor plane (world X-Z, +Y up) holding
axis-aligned boxes: walls (floor to ceiling) and furniture. It is what
`scene_gen` turns into a GLB mesh and what the grid simulator double reads
(`<scene>.layout.json` next to the GLB).

Generation: the footprint is split recursively (binary space partition) into
rooms; every split adds one wall with one door, so all rooms stay connected.
Furniture is then dropped into rooms and kept only if the free space (eroded
by the agent radius) stays one connected region and the door is not blocked.
Furniture is at least `ceiling - agent_height + margin` tall, so its top is
never a walkable island of the navmesh.
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

import numpy as np

LAYOUT_VERSION = 1
# Voxel height habitat-sim's navmesh is built with (recast's cell_height; habitat's default, set explicitly by
# ddppo.envs.scenes.sim.HabitatSim.recompute_navmesh). Recast puts a walkable surface at the top of the voxel the
# floor lies in, so an agent on a floor at y = 0 stands at y = 0.2, and its camera that much higher.
NAVMESH_CELL_HEIGHT = 0.2
FURNITURE_COLORS = (
    (0.55, 0.27, 0.07), (0.20, 0.35, 0.60), (0.35, 0.55, 0.30), (0.60, 0.20, 0.25), (0.45, 0.45, 0.50),
)


@dataclasses.dataclass
class Box:
    """An axis-aligned box in world coordinates."""

    kind: str  # "wall" | "furniture"
    lo: tuple[float, float, float]
    hi: tuple[float, float, float]
    color: tuple[float, float, float] = (0.8, 0.8, 0.78)


@dataclasses.dataclass
class Layout:
    """A floor plan: footprint [x0, z0, x1, z1], floor and ceiling heights, boxes."""

    footprint: tuple[float, float, float, float]
    floor_y: float
    ceiling_y: float
    boxes: list[Box]
    rooms: list[tuple[float, float, float, float]] = dataclasses.field(default_factory=list)
    doors: list[tuple[float, float, float, float]] = dataclasses.field(default_factory=list)  # gap rects x0,z0,x1,z1

    @property
    def agent_floor_y(self) -> float:
        """Where habitat-sim's navmesh of this layout puts an agent: the top of the floor's voxel."""
        return (math.floor(self.floor_y / NAVMESH_CELL_HEIGHT + 1e-6) + 1) * NAVMESH_CELL_HEIGHT

    def to_json(self) -> dict[str, Any]:
        return {
            "version": LAYOUT_VERSION,
            "footprint": list(self.footprint),
            "floor_y": self.floor_y,
            "ceiling_y": self.ceiling_y,
            "rooms": [list(r) for r in self.rooms],
            "doors": [list(d) for d in self.doors],
            "boxes": [{"kind": b.kind, "lo": list(b.lo), "hi": list(b.hi), "color": list(b.color)}
                      for b in self.boxes],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Layout":
        if data.get("version") != LAYOUT_VERSION:
            raise ValueError(f"layout version {data.get('version')!r} is not {LAYOUT_VERSION}")
        return cls(
            footprint=tuple(data["footprint"]), floor_y=float(data["floor_y"]),
            ceiling_y=float(data["ceiling_y"]),
            rooms=[tuple(r) for r in data.get("rooms", [])], doors=[tuple(d) for d in data.get("doors", [])],
            boxes=[Box(b["kind"], tuple(b["lo"]), tuple(b["hi"]), tuple(b.get("color", (0.8, 0.8, 0.78))))
                   for b in data["boxes"]],
        )

    def save(self, path: str) -> None:
        with open(path, "w") as f:
            json.dump(self.to_json(), f, indent=1)

    @classmethod
    def load(cls, path: str) -> "Layout":
        with open(path) as f:
            return cls.from_json(json.load(f))


@dataclasses.dataclass(frozen=True)
class LayoutParams:
    """Knobs of the floor-plan generator (lengths in metres)."""

    size_min: float = 6.0  # footprint side, lower bound
    size_max: float = 10.0  # footprint side, upper bound
    max_rooms: int = 5  # rooms made by recursive splits (at most)
    min_room: float = 2.2  # smallest room side
    wall_thickness: float = 0.1
    door_width: float = 1.0
    ceiling_y: float = 2.6
    max_furniture: int = 3  # furniture pieces per room (at most)
    furniture_min: float = 0.4  # furniture footprint side bounds
    furniture_max: float = 1.2
    agent_radius: float = 0.1  # for the connectivity check
    agent_height: float = 1.5  # furniture is taller than ceiling - agent_height, so its top is not walkable
    check_cell: float = 0.05  # grid resolution of the connectivity check


# ---------------------------------------------------------------------- grids
@dataclasses.dataclass(frozen=True)
class Grid:
    """A boolean raster of a layout: cell (i, j) covers x0 + j*cell, z0 + i*cell."""

    blocked: np.ndarray  # (nz, nx) bool
    x0: float
    z0: float
    cell: float

    def cell_of(self, x: float, z: float) -> tuple[int, int]:
        return int(math.floor((z - self.z0) / self.cell)), int(math.floor((x - self.x0) / self.cell))

    def center(self, i: int, j: int) -> tuple[float, float]:
        return self.x0 + (j + 0.5) * self.cell, self.z0 + (i + 0.5) * self.cell

    def inside(self, i: int, j: int) -> bool:
        return 0 <= i < self.blocked.shape[0] and 0 <= j < self.blocked.shape[1]

    def free_at(self, x: float, z: float) -> bool:
        i, j = self.cell_of(x, z)
        return self.inside(i, j) and not self.blocked[i, j]


def rasterize(layout: Layout, cell: float, inflate: float = 0.0, kinds: tuple[str, ...] = ("wall", "furniture"),
              extra: list[Box] = ()) -> Grid:
    """Cells whose centre lies within `inflate` of a box (or outside the footprint) are blocked."""
    x0, z0, x1, z1 = layout.footprint
    nx, nz = int(math.ceil((x1 - x0) / cell)), int(math.ceil((z1 - z0) / cell))
    xs = x0 + (np.arange(nx) + 0.5) * cell
    zs = z0 + (np.arange(nz) + 0.5) * cell
    blocked = np.zeros((nz, nx), dtype=bool)
    blocked[:, (xs < x0 + inflate) | (xs > x1 - inflate)] = True
    blocked[(zs < z0 + inflate) | (zs > z1 - inflate), :] = True
    for b in list(layout.boxes) + list(extra):
        if b.kind not in kinds:
            continue
        bx = (xs >= b.lo[0] - inflate) & (xs <= b.hi[0] + inflate)
        bz = (zs >= b.lo[2] - inflate) & (zs <= b.hi[2] + inflate)
        blocked[np.ix_(bz, bx)] = True
    return Grid(blocked, x0, z0, cell)


def flood_fill(free: np.ndarray, start: tuple[int, int]) -> np.ndarray:
    """Cells of `free` 4-connected to `start` (vectorised breadth-first growth)."""
    reached = np.zeros_like(free)
    if not free[start]:
        return reached
    reached[start] = True
    while True:
        grown = reached.copy()
        grown[1:, :] |= reached[:-1, :]
        grown[:-1, :] |= reached[1:, :]
        grown[:, 1:] |= reached[:, :-1]
        grown[:, :-1] |= reached[:, 1:]
        grown &= free
        if np.array_equal(grown, reached):
            return reached
        reached = grown


def is_connected(layout: Layout, params: LayoutParams, extra: list[Box] = ()) -> bool:
    """True if the free space, eroded by the agent radius, is one region."""
    grid = rasterize(layout, params.check_cell, inflate=params.agent_radius, extra=extra)
    free = ~grid.blocked
    cells = np.argwhere(free)
    if len(cells) == 0:
        return False
    return bool(np.array_equal(flood_fill(free, tuple(cells[0])), free))


# ---------------------------------------------------------------- generation
def _wall(lo_x: float, lo_z: float, hi_x: float, hi_z: float, layout_floor: float, ceiling: float) -> Box:
    return Box("wall", (lo_x, layout_floor, lo_z), (hi_x, ceiling, hi_z))


def _split_room(room, doors, rng: np.random.Generator, p: LayoutParams):
    """Try to split `room`; returns (room_a, room_b, wall boxes, door rect) or None."""
    x0, z0, x1, z1 = room
    w, d = x1 - x0, z1 - z0
    along_x = w >= d  # split with a wall of constant x when the room is wide
    length = w if along_x else d
    if length < 2 * p.min_room:
        return None
    t, dw = p.wall_thickness, p.door_width
    for _ in range(20):
        s = rng.uniform((x0 if along_x else z0) + p.min_room, (x1 if along_x else z1) - p.min_room)
        # the new wall must not end inside an existing door gap
        if any(_touches_door(s, along_x, room, door, margin=t + 0.2) for door in doors):
            continue
        lo, hi = (z0, z1) if along_x else (x0, x1)
        if hi - lo < dw + 2 * (t + 0.3):
            return None
        g = rng.uniform(lo + t + 0.3, hi - t - 0.3 - dw)
        if along_x:
            walls = [(s - t / 2, lo, s + t / 2, g), (s - t / 2, g + dw, s + t / 2, hi)]
            door = (s - t / 2, g, s + t / 2, g + dw)
            return (x0, z0, s, z1), (s, z0, x1, z1), walls, door
        walls = [(lo, s - t / 2, g, s + t / 2), (g + dw, s - t / 2, hi, s + t / 2)]
        door = (g, s - t / 2, g + dw, s + t / 2)
        return (x0, z0, x1, s), (x0, s, x1, z1), walls, door
    return None


def _touches_door(s: float, along_x: bool, room, door, margin: float) -> bool:
    """Would a wall at coordinate `s` (x if along_x else z) across `room` end in `door`?"""
    dx0, dz0, dx1, dz1 = door
    x0, z0, x1, z1 = room
    if along_x:  # new wall at x = s from z0 to z1: its ends touch walls at z0 / z1
        on_edge = abs(dz0 - z0) < 0.2 or abs(dz1 - z1) < 0.2 or abs(dz1 - z0) < 0.2 or abs(dz0 - z1) < 0.2
        return on_edge and dx0 - margin <= s <= dx1 + margin
    on_edge = abs(dx0 - x0) < 0.2 or abs(dx1 - x1) < 0.2 or abs(dx1 - x0) < 0.2 or abs(dx0 - x1) < 0.2
    return on_edge and dz0 - margin <= s <= dz1 + margin


def _furniture(room, rng: np.random.Generator, p: LayoutParams, floor_y: float) -> Box:
    x0, z0, x1, z1 = room
    t = p.wall_thickness
    sx, sz = rng.uniform(p.furniture_min, p.furniture_max, size=2)
    sx, sz = min(sx, x1 - x0 - 2 * t - 0.1), min(sz, z1 - z0 - 2 * t - 0.1)
    if rng.random() < 0.6:  # against a wall, like a cabinet or a sofa
        side = rng.integers(4)
        cx = rng.uniform(x0 + t / 2, x1 - t / 2 - sx)
        cz = rng.uniform(z0 + t / 2, z1 - t / 2 - sz)
        cx = {0: x0 + t / 2, 1: x1 - t / 2 - sx}.get(int(side), cx)
        cz = {2: z0 + t / 2, 3: z1 - t / 2 - sz}.get(int(side), cz)
    else:
        cx = rng.uniform(x0 + t / 2, x1 - t / 2 - sx)
        cz = rng.uniform(z0 + t / 2, z1 - t / 2 - sz)
    min_h = p.ceiling_y - p.agent_height + 0.15
    h = rng.uniform(min_h, max(min_h, min(2.0, p.ceiling_y - 0.3)))
    color = FURNITURE_COLORS[int(rng.integers(len(FURNITURE_COLORS)))]
    return Box("furniture", (cx, floor_y, cz), (cx + sx, floor_y + h, cz + sz), color)


def _blocks_door(box: Box, doors, clearance: float) -> bool:
    for dx0, dz0, dx1, dz1 in doors:
        if (box.lo[0] < dx1 + clearance and box.hi[0] > dx0 - clearance
                and box.lo[2] < dz1 + clearance and box.hi[2] > dz0 - clearance):
            return True
    return False


def generate_layout(rng: np.random.Generator, params: LayoutParams = LayoutParams()) -> Layout:
    """A random connected floor plan (deterministic given the generator state)."""
    p = params
    if p.ceiling_y <= p.agent_height:
        raise ValueError(f"ceiling_y={p.ceiling_y} must exceed agent_height={p.agent_height}")
    w, d = rng.uniform(p.size_min, p.size_max, size=2)
    x0, z0, x1, z1 = -w / 2, -d / 2, w / 2, d / 2
    floor_y, t = 0.0, p.wall_thickness
    boxes = [
        _wall(x0, z0, x1, z0 + t, floor_y, p.ceiling_y), _wall(x0, z1 - t, x1, z1, floor_y, p.ceiling_y),
        _wall(x0, z0, x0 + t, z1, floor_y, p.ceiling_y), _wall(x1 - t, z0, x1, z1, floor_y, p.ceiling_y),
    ]
    rooms, doors = [(x0, z0, x1, z1)], []
    while len(rooms) < p.max_rooms:
        order = sorted(range(len(rooms)), key=lambda k: -(rooms[k][2] - rooms[k][0]) * (rooms[k][3] - rooms[k][1]))
        for k in order:
            result = _split_room(rooms[k], doors, rng, p)
            if result is not None:
                a, b, walls, door = result
                rooms[k:k + 1] = [a, b]
                boxes += [_wall(*wall, floor_y, p.ceiling_y) for wall in walls]
                doors.append(door)
                break
        else:
            break
    layout = Layout((x0, z0, x1, z1), floor_y, p.ceiling_y, boxes, rooms, doors)
    for room in rooms:
        for _ in range(int(rng.integers(0, p.max_furniture + 1))):
            for _attempt in range(5):
                box = _furniture(room, rng, p, floor_y)
                if _blocks_door(box, doors, clearance=0.6):
                    continue
                if is_connected(layout, p, extra=[box]):
                    layout.boxes.append(box)
                    break
    return layout
