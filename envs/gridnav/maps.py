"""Maps and per-map lookup tables of the grid world (used by envs/gridnav/env.py).

Geometry. A map is a (H, W) bool occupancy array, True = blocked, with blocked
border cells. The agent lives on cell centres. Heading `h` of `num_headings`
(4 or 8) points at angle 2*pi*h/num_headings, counter-clockwise from east
(+column), with north up (-row). Moving forward goes to the neighbouring cell
along the heading (a diagonal one with 8 headings, length sqrt(2)); a diagonal
move needs both cells it squeezes between to be free (no corner cutting).
Geodesic distances use exactly this move set, so they are exact shortest path
lengths of the agent, and an agent that only moves along them has SPL 1.

Everything here runs once per map at construction; stepping only gathers from
the tables built here (see `MapTables`).
"""

from __future__ import annotations

import collections
import dataclasses
import math

import numpy as np

from ddppo.envs.base import EnvError


def parse_ascii(lines: list[str] | str) -> np.ndarray:
    """A hand-made map from text: '#' blocked, anything else free. Returns (H, W) bool."""
    if isinstance(lines, str):
        lines = [ln for ln in lines.strip().splitlines()]
    rows = [ln.strip() for ln in lines if ln.strip()]
    if len({len(r) for r in rows}) != 1:
        raise EnvError(f"ascii map rows must have equal length, got {[len(r) for r in rows]}")
    return np.array([[ch == "#" for ch in r] for r in rows], dtype=bool)


def heading_geometry(num_headings: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per heading: (angle, row step, column step, step length)."""
    if num_headings not in (4, 8):
        raise EnvError(f"num_headings={num_headings} must be 4 or 8 (moves go to neighbouring cells)")
    angles = 2.0 * np.pi * np.arange(num_headings) / num_headings
    drow = -np.rint(np.sin(angles)).astype(np.int64)
    dcol = np.rint(np.cos(angles)).astype(np.int64)
    return angles, drow, dcol, np.hypot(drow, dcol)


def generate_map(rng: np.random.Generator, size: int, max_room_splits: int, door_width: int,
                 obstacle_density: float) -> tuple[np.ndarray, int, np.ndarray]:
    """Rooms by recursive wall splits (each wall has one door), then furniture blocks: (occupancy, rooms,
    furniture), furniture the (H, W) bool mask of the blocked cells that are furniture rather than walls."""
    occ = np.zeros((size, size), dtype=bool)
    occ[0, :] = occ[-1, :] = occ[:, 0] = occ[:, -1] = True
    doors = np.zeros_like(occ)
    regions = [(1, 1, size - 1, size - 1)]  # (r0, c0, r1, c1), half-open interiors
    splits = int(rng.integers(1, max_room_splits + 1)) if max_room_splits > 0 else 0
    for _ in range(splits):
        regions.sort(key=lambda r: (r[2] - r[0]) * (r[3] - r[1]), reverse=True)
        for k, region in enumerate(regions):
            halves = _split(rng, occ, doors, region, door_width)
            if halves:
                regions[k:k + 1] = halves
                break
    walls = occ.copy()
    _place_obstacles(rng, occ, doors, obstacle_density)
    return occ, len(regions), occ & ~walls


def _split(rng, occ, doors, region, door_width):
    """Put a wall with a door across `region`; returns the two sub-regions, or None if it cannot."""
    r0, c0, r1, c1 = region
    height, width = r1 - r0, c1 - c0
    vertical = width > height or (width == height and rng.random() < 0.5)
    lo, hi = (c0, c1) if vertical else (r0, r1)  # the wall position runs over this span
    span = (r1 - r0) if vertical else (c1 - c0)  # the wall's length
    choices = [p for p in range(lo + 2, hi - 2)  # rooms keep >= 2 cells on each side
               if _wall_ends_blocked(occ, doors, region, p, vertical)]
    if not choices or span < door_width + 1:
        return None
    p = int(rng.choice(choices))
    d = int(rng.integers(0, span - door_width + 1))
    if vertical:
        occ[r0:r1, p] = True
        occ[r0 + d:r0 + d + door_width, p] = False
        doors[r0 + d:r0 + d + door_width, p] = True
        return [(r0, c0, r1, p), (r0, p + 1, r1, c1)]
    occ[p, c0:c1] = True
    occ[p, c0 + d:c0 + d + door_width] = False
    doors[p, c0 + d:c0 + d + door_width] = True
    return [(r0, c0, p, c1), (p + 1, c0, r1, c1)]


def _wall_ends_blocked(occ, doors, region, p, vertical):
    """A new wall must not end in an existing door (it would block it)."""
    r0, c0, r1, c1 = region
    ends = [(r0 - 1, p), (r1, p)] if vertical else [(p, c0 - 1), (p, c1)]
    return all(occ[e] and not doors[e] for e in ends)


def _place_obstacles(rng, occ, doors, density):
    """Furniture: 1x1, 1x2 and 2x1 blocks on free cells away from doors."""
    near_door = np.zeros_like(doors)
    for dr in (-1, 0, 1):
        for dc in (-1, 0, 1):
            near_door |= np.roll(np.roll(doors, dr, 0), dc, 1)
    target = int(round(density * np.count_nonzero(~occ)))
    placed, attempts = 0, 0
    while placed < target and attempts < 20 * target + 20:
        attempts += 1
        r, c = (int(v) for v in rng.integers(1, occ.shape[0] - 1, size=2))
        shape = [(1, 1), (1, 2), (2, 1)][int(rng.integers(3))]
        block = (slice(r, r + shape[0]), slice(c, c + shape[1]))
        if r + shape[0] >= occ.shape[0] or c + shape[1] >= occ.shape[1]:
            continue
        if occ[block].any() or near_door[block].any():
            continue
        occ[block] = True
        placed += occ[block].size


def largest_component(free: np.ndarray) -> np.ndarray:
    """Mask of the largest 4-connected free region (8-heading moves reach the same cells)."""
    h, w = free.shape
    label = np.full(free.shape, -1, dtype=np.int64)
    sizes = []
    for start in zip(*np.nonzero(free)):
        if label[start] >= 0:
            continue
        lab, queue, n = len(sizes), collections.deque([start]), 0
        label[start] = lab
        while queue:
            r, c = queue.popleft()
            n += 1
            for rr, cc in ((r + 1, c), (r - 1, c), (r, c + 1), (r, c - 1)):
                if 0 <= rr < h and 0 <= cc < w and free[rr, cc] and label[rr, cc] < 0:
                    label[rr, cc] = lab
                    queue.append((rr, cc))
        sizes.append(n)
    if not sizes:
        return np.zeros_like(free)
    return label == int(np.argmax(sizes))


def move_table(free: np.ndarray, num_headings: int) -> np.ndarray:
    """(H*W, num_headings) bool: moving forward from a cell with a heading succeeds."""
    _, drow, dcol, _ = heading_geometry(num_headings)
    fp = np.pad(free, 1)
    rows, cols = np.indices(free.shape) + 1
    ok = np.empty((free.size, num_headings), dtype=bool)
    for h in range(num_headings):
        dr, dc = drow[h], dcol[h]
        ok[:, h] = (fp[rows, cols] & fp[rows + dr, cols + dc]
                    & fp[rows + dr, cols] & fp[rows, cols + dc]).ravel()
    return ok


def geodesic_fields(free: np.ndarray, goals: np.ndarray, num_headings: int) -> np.ndarray:
    """(len(goals), H*W) float32 shortest path lengths to each flat goal cell (inf if unreachable).

    Bellman-Ford relaxation vectorised over all goals; converges in as many
    sweeps as the longest shortest path has moves.
    """
    _, drow, dcol, step = heading_geometry(num_headings)
    hw, width = free.size, free.shape[1]
    ok = move_table(free, num_headings)
    offsets = drow * width + dcol
    neighbour = np.where(ok, np.arange(hw)[:, None] + offsets[None, :], hw)  # hw = an inf sentinel
    cells = np.flatnonzero(free)
    neighbour = neighbour[cells]
    dist = np.full((len(goals), hw + 1), np.inf)
    dist[np.arange(len(goals)), goals] = 0.0
    current = dist[:, cells]
    while True:
        relaxed = np.minimum(current, (dist[:, neighbour] + step).min(axis=2))
        if np.array_equal(relaxed, current):
            return dist[:, :hw].astype(np.float32)
        dist[:, cells] = current = relaxed


def ray_offsets(num_rays: int, fov_degrees: float) -> np.ndarray:
    """Ray angles relative to the heading (radians, counter-clockwise), right to left."""
    if fov_degrees >= 360.0:
        return -np.pi + 2.0 * np.pi * (np.arange(num_rays) + 0.5) / num_rays
    half = math.radians(fov_degrees) / 2.0
    return np.linspace(-half, half, num_rays) if num_rays > 1 else np.zeros(1)


def ray_cells(angles: np.ndarray, max_range: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Map-independent ray traversal: for each ray, the cells it crosses (row, col offsets from
    the agent's cell) in order and the distance at which it enters each; padded with the agent's
    own cell (never blocked) at max_range. Shapes (*angles.shape, L). A ray through the exact
    corner of two cells counts both (as moves do: no squeezing between diagonal blocks)."""
    flat = angles.ravel()
    traversals = [_traverse(-math.sin(a), math.cos(a), max_range) for a in flat]
    length = max(len(c) for c in traversals) + 1
    dy = np.zeros((len(flat), length), dtype=np.int64)
    dx = np.zeros_like(dy)
    enter = np.full((len(flat), length), max_range)
    for k, cells in enumerate(traversals):
        for j, (cy, cx, te) in enumerate(cells):
            dy[k, j], dx[k, j], enter[k, j] = cy, cx, min(te, max_range)
    shape = (*angles.shape, length)
    return dy.reshape(shape), dx.reshape(shape), enter.reshape(shape)


def _traverse(uy: float, ux: float, max_range: float) -> list[tuple[int, int, float]]:
    """Cells along one ray (direction (uy, ux) in (row, col)) with their entry distances."""
    t = np.arange(1, int(max_range * 64) + 1) / 64.0
    ys, xs = np.floor(0.5 + uy * t).astype(int), np.floor(0.5 + ux * t).astype(int)
    keep = np.ones(len(t), dtype=bool)
    keep[1:] = (ys[1:] != ys[:-1]) | (xs[1:] != xs[:-1])
    keep &= (ys != 0) | (xs != 0)
    cells, prev = [], (0, 0)
    for cy, cx in zip(ys[keep].tolist(), xs[keep].tolist()):
        if cy != prev[0] and cx != prev[1]:  # jumped diagonally: add the corner cells the ray touches
            for corner in ((prev[0], cx), (cy, prev[1])):
                enter, leave = _slab(uy, ux, *corner)
                if enter <= leave + 1e-9:
                    cells.append((*corner, enter))
            cells.sort(key=lambda cell: cell[2])
        cells.append((cy, cx, _slab(uy, ux, cy, cx)[0]))
        prev = (cy, cx)
    return cells


def _slab(uy: float, ux: float, cy: int, cx: int) -> tuple[float, float]:
    """(enter, leave) distances along a ray from the origin cell's centre through cell (cy, cx)."""
    enter, leave = 0.0, math.inf
    for u, c in ((uy, cy), (ux, cx)):
        if abs(u) > 1e-12:
            lo, hi = sorted(((c - 0.5) / u, (c + 0.5) / u))
            enter, leave = max(enter, lo), min(leave, hi)
        elif abs(c) > 0:  # parallel to this axis and outside the slab
            return math.inf, -math.inf
    return enter, leave


@dataclasses.dataclass
class MapTables:
    """Stacked per-map lookup tables (M maps of H x W cells, G goals per map, D headings, R rays)."""

    occupancy: np.ndarray  # (M, H, W) bool, True = blocked
    move_ok: np.ndarray  # (M * H*W * D,) bool: forward from (map, cell, heading) succeeds
    goals: np.ndarray  # (M, G) int64 flat goal cells (rows past num_goals repeat the last goal)
    num_goals: np.ndarray  # (M,) int64
    fields: np.ndarray  # (M, G, H*W) float32 geodesic distance to each goal
    depth: np.ndarray  # (M, H*W, D, R) float16 normalised range scan
    furniture: np.ndarray  # (M, H, W) bool, the blocked cells that are furniture (the rest are walls)


def build_tables(maps: list[np.ndarray], rng: np.random.Generator, goals_per_map: int, min_geodesic: float,
                 num_headings: int, num_rays: int, fov_degrees: float, max_range: float,
                 furniture: list[np.ndarray] | None = None) -> MapTables:
    """Tables for the given maps. Goals are drawn in each map's largest free region among cells
    that have at least one start cell at geodesic >= min_geodesic; a map without any raises.
    `furniture`: per map, the blocked cells that are furniture (None: every blocked cell is a wall)."""
    goal_rows, field_rows = [], []
    for index, occ in enumerate(maps):
        goals, fields = _goals_and_fields(occ, rng, goals_per_map, min_geodesic, num_headings)
        if len(goals) == 0:
            raise EnvError(f"map {index} has no start/goal pair with geodesic >= min_geodesic={min_geodesic}")
        goal_rows.append(goals)
        field_rows.append(fields)
    width = max(len(g) for g in goal_rows)
    goals = np.stack([np.pad(g, (0, width - len(g)), mode="edge") for g in goal_rows])
    fields = np.stack([np.pad(f, ((0, width - len(f)), (0, 0)), mode="edge") for f in field_rows])
    occupancy = np.stack(maps)
    angles, _, _, _ = heading_geometry(num_headings)
    rays = angles[:, None] + ray_offsets(num_rays, fov_degrees)[None, :]
    traversal = ray_cells(rays, max_range)
    return MapTables(
        occupancy=occupancy,
        move_ok=np.stack([move_table(~occ, num_headings) for occ in maps]).ravel(),
        goals=goals,
        num_goals=np.array([len(g) for g in goal_rows], dtype=np.int64),
        fields=fields,
        depth=np.stack([_depth_table(occ, traversal, max_range) for occ in maps]),
        furniture=np.stack(furniture) if furniture is not None else np.zeros_like(occupancy),
    )


def _goals_and_fields(occ, rng, goals_per_map, min_geodesic, num_headings):
    region = np.flatnonzero(largest_component(~occ))
    candidates = rng.permutation(region)
    goals, fields = [], []
    for start in range(0, len(candidates), goals_per_map):  # usually one round
        batch = candidates[start:start + goals_per_map]
        field = geodesic_fields(~occ, batch, num_headings)
        keep = (np.isfinite(field) & (field >= min_geodesic)).any(axis=1)
        goals.extend(batch[keep][: goals_per_map - len(goals)])
        fields.extend(field[keep][: goals_per_map - len(fields)])
        if len(goals) >= goals_per_map:
            break
    return np.array(goals, dtype=np.int64), np.array(fields, dtype=np.float32).reshape(len(goals), occ.size)


def _depth_table(occ: np.ndarray, traversal, max_range: float) -> np.ndarray:
    """(H*W, D, R) float16: normalised distance to the first blocked cell along each ray."""
    dy, dx, enter = traversal
    pad = int(np.abs(dy).max()) + 1
    occ_padded = np.pad(occ, pad, constant_values=True)
    rows, cols = np.indices(occ.shape)
    rows = rows.reshape(-1, 1, 1, 1) + pad
    cols = cols.reshape(-1, 1, 1, 1) + pad
    hits = occ_padded[rows + dy[None], cols + dx[None]]  # (H*W, D, R, L)
    first = hits.argmax(axis=-1)
    entered = np.take_along_axis(np.broadcast_to(enter, hits.shape), first[..., None], -1)[..., 0]
    depth = np.where(hits.any(axis=-1), entered, max_range)
    return (np.minimum(depth, max_range) / max_range).astype(np.float16)
