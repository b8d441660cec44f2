"""A 2-D simulator double with the `NavSimulator` interface (env.habitat.backend=grid).

It reads the floor plan `scene_gen` writes next to each scene
(`<scene>.layout.json`) instead of the GLB, so the whole pipeline (scene
generator -> episode generator -> PointNav env -> trainer) runs where
habitat-sim cannot be installed. It is a test double, not a renderer:

- navigability: a 0.1 m grid; cells within the agent radius of a wall or a
  piece of furniture are blocked (as a navmesh is eroded by the agent radius);
- motion: MOVE_FORWARD goes `forward_step` along the heading, sliding along
  the blocked axis on collision (habitat-sim's `allow_sliding`); turns are exact;
- geodesic distance: Euclidean with a clear line of sight, else an 8-connected
  Dijkstra field over the grid (cached per goal), so it overestimates by a few %;
- depth: every pixel's ray cast exactly against the layout's boxes (walls and
  furniture, each with its own height: a low cabinet is seen over), the floor
  and the ceiling; the camera stands `sensor_height` above the agent, which
  stands where habitat-sim's navmesh puts it (`Layout.agent_floor_y`);
  "rgb" is that depth as grey levels.
"""

from __future__ import annotations

import heapq
import math
import os
from collections import OrderedDict

import numpy as np

from ddppo.envs.base import EnvError
from ddppo.envs.scenes.geometry import quat_from_yaw, yaw_from_quat
from ddppo.envs.scenes.interface import SimSettings
from ddppo.envs.scenes.layout import Grid, Layout, rasterize

NAV_CELL = 0.1  # navigability grid (m)
MAX_RANGE = 10.0  # rays stop here (m)
# distance fields kept per simulator (least recently used dropped): 32 MB, i.e. every goal of a scene's
# episodes (~300 fields of a 10 x 10 m scene), so each field costs its Dijkstra (~0.1 s) once per run, not per episode
FIELD_CACHE_CELLS = 4_000_000
_SQRT2 = math.sqrt(2.0)


def layout_path_for(scene_path: str) -> str:
    return os.path.splitext(scene_path)[0] + ".layout.json"


class GridSim:
    """One agent on the floor plan of a generated scene."""

    def __init__(self, settings: SimSettings):
        self.settings = settings
        self.scene_path = ""
        self._rng = np.random.default_rng(settings.seed)
        self._fields: OrderedDict[tuple[int, int], np.ndarray] = OrderedDict()
        self._pos = np.zeros(3)
        self._yaw = 0.0

    # ---------------------------------------------------------------- scene
    def load_scene(self, scene_path: str) -> None:
        if scene_path == self.scene_path:
            return
        plan = layout_path_for(scene_path)
        if not os.path.isfile(plan):
            raise EnvError(f"floor plan {plan!r} of scene {scene_path!r} does not exist; the grid backend only "
                           f"runs scenes made by `python -m ddppo.envs.scenes.scene_gen generate`")
        try:
            self.layout = Layout.load(plan)
        except (ValueError, KeyError, OSError) as err:
            raise EnvError(f"floor plan {plan!r} of scene {scene_path!r} is unreadable: {err}") from err
        self.nav: Grid = rasterize(self.layout, NAV_CELL, inflate=self.settings.agent_radius)
        boxes = self.layout.boxes
        self._lo = np.array([[b.lo[0], b.lo[2]] for b in boxes], dtype=np.float64).reshape(-1, 2)
        self._hi = np.array([[b.hi[0], b.hi[2]] for b in boxes], dtype=np.float64).reshape(-1, 2)
        self._tops = np.array([b.hi[1] for b in boxes], dtype=np.float64)
        self._full = self._tops >= self.layout.ceiling_y - 1e-6  # floor to ceiling: hides all behind it
        self._free_cells = np.argwhere(~self.nav.blocked)
        if len(self._free_cells) == 0:
            raise EnvError(f"scene {scene_path!r} has no navigable space for agent radius "
                           f"{self.settings.agent_radius}")
        self._fields.clear()
        self.scene_path = scene_path
        self._pos = self._cell_point(*self._free_cells[0])
        self._yaw = 0.0

    def seed(self, seed: int) -> None:
        self._rng = np.random.default_rng(seed)

    def close(self) -> None:
        self.scene_path = ""

    def _cell_point(self, i: int, j: int) -> np.ndarray:
        x, z = self.nav.center(i, j)
        return np.array([x, self.layout.agent_floor_y, z])

    # ---------------------------------------------------------------- agent
    def set_agent_pose(self, position: np.ndarray, rotation: np.ndarray) -> None:
        self._pos = np.array([position[0], self.layout.agent_floor_y, position[2]], dtype=np.float64)
        self._yaw = yaw_from_quat(rotation)

    def agent_pose(self) -> tuple[np.ndarray, np.ndarray]:
        return self._pos.copy(), quat_from_yaw(self._yaw)

    def step(self, action: str) -> tuple[dict[str, np.ndarray], bool]:
        collided = False
        if action == "move_forward":
            collided = self._move_forward()
        elif action in ("turn_left", "turn_right"):
            sign = 1.0 if action == "turn_left" else -1.0
            self._yaw = math.remainder(self._yaw + sign * math.radians(self.settings.turn_angle), 2 * math.pi)
        else:
            raise ValueError(f"GridSim: unknown action {action!r}")
        return self.observe(), collided

    def _move_forward(self) -> bool:
        step = self.settings.forward_step
        delta = np.array([-math.sin(self._yaw) * step, 0.0, -math.cos(self._yaw) * step])
        if self._segment_free(self._pos, self._pos + delta):
            self._pos = self._pos + delta
            return False
        candidates = [delta * f for f in (0.75, 0.5, 0.25)]
        if self.settings.allow_sliding:
            for axis in (0, 2):
                along = np.zeros(3)
                along[axis] = delta[axis]
                candidates += [along * f for f in (1.0, 0.75, 0.5, 0.25)]
        best = max((c for c in candidates if self._segment_free(self._pos, self._pos + c)),
                   key=lambda c: float(np.linalg.norm(c)), default=None)
        if best is not None:
            self._pos = self._pos + best
        return True

    # ---------------------------------------------------------------- sensors
    def observe(self) -> dict[str, np.ndarray]:
        s = self.settings
        obs = {}
        depth = self._depth(s.depth_height, s.depth_width) if s.depth_sensor else None
        if depth is not None:
            obs["depth"] = depth
        if s.rgb:
            d = depth if (depth is not None and depth.shape == (s.rgb_height, s.rgb_width)) \
                else self._depth(s.rgb_height, s.rgb_width)
            grey = (255 * (1.0 - np.clip(d / MAX_RANGE, 0, 1))).astype(np.uint8)
            obs["rgb"] = np.repeat(grey[..., None], 3, axis=-1)
        return obs

    def _depth(self, height: int, width: int) -> np.ndarray:
        """Planar depth (as habitat reports it) of every pixel: exact ray casts against the layout's boxes,
        each with its own height, and the floor and ceiling planes."""
        s = self.settings
        tan_h = math.tan(math.radians(s.hfov) / 2)
        u = (1.0 - 2.0 * (np.arange(width) + 0.5) / width) * tan_h  # +: left of the optical axis
        offsets = np.arctan(u)
        angles = self._yaw + offsets
        cos_off = np.cos(offsets)
        enter, leave = self._box_spans(np.sin(angles), np.cos(angles))  # (width, boxes) metres along the ground
        enter, leave = enter * cos_off[:, None], leave * cos_off[:, None]  # -> planar depth
        v = (2.0 * (np.arange(height) + 0.5) / height - 1.0) * tan_h * height / width  # +: below the axis
        camera = self._pos[1] + s.sensor_height
        floor, ceiling = self.layout.floor_y, self.layout.ceiling_y
        with np.errstate(divide="ignore", invalid="ignore"):
            planes = np.where(v > 0, (camera - floor) / v, np.where(v < 0, (ceiling - camera) / -v, np.inf))
        depth = np.minimum(planes[:, None], np.min(enter[:, self._full], axis=1, initial=np.inf)[None, :])
        # boxes below the ceiling, in front of the nearest wall: each row sees them only where its ray is
        # below their top, i.e. for depths in [below_from, below_to]
        col, box = np.nonzero(~self._full[None, :] & (enter <= leave) & (enter < depth.max(axis=0)[:, None]))
        if len(col):
            tops = self._tops[box]
            with np.errstate(divide="ignore", invalid="ignore"):
                cross = (camera - tops[None, :]) / v[:, None]  # (height, pairs): where the ray crosses the top
            down, up = (v > 0)[:, None], (v < 0)[:, None]
            below_from = np.where(down, cross, np.where(tops[None, :] > camera, -np.inf, np.inf))
            below_to = np.where(up, cross, np.inf)
            hit_depth = np.maximum(enter[col, box][None, :], below_from)
            hit_depth[hit_depth > np.minimum(leave[col, box][None, :], below_to)] = np.inf
            np.minimum.at(depth, (slice(None), col), hit_depth)
        return np.minimum(depth, MAX_RANGE).astype(np.float32)

    def _box_spans(self, sin: np.ndarray, cos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Where each ray (heading given by sin/cos of its yaw; ground distance t moves the agent by
        (-sin t, -cos t)) enters and leaves every box's footprint; (inf, -inf) where it misses."""
        dx, dz = -sin[:, None], -cos[:, None]
        with np.errstate(divide="ignore", invalid="ignore"):
            tx0, tx1 = (self._lo[None, :, 0] - self._pos[0]) / dx, (self._hi[None, :, 0] - self._pos[0]) / dx
            tz0, tz1 = (self._lo[None, :, 1] - self._pos[2]) / dz, (self._hi[None, :, 1] - self._pos[2]) / dz
        # a ray parallel to an axis is inside that slab everywhere or nowhere
        inside_x = (self._lo[None, :, 0] <= self._pos[0]) & (self._pos[0] <= self._hi[None, :, 0])
        inside_z = (self._lo[None, :, 1] <= self._pos[2]) & (self._pos[2] <= self._hi[None, :, 1])
        par_x, par_z = np.broadcast_to(dx == 0, tx0.shape), np.broadcast_to(dz == 0, tz0.shape)
        x_lo = np.where(par_x, np.where(inside_x, -np.inf, np.inf), np.minimum(tx0, tx1))
        x_hi = np.where(par_x, np.where(inside_x, np.inf, -np.inf), np.maximum(tx0, tx1))
        z_lo = np.where(par_z, np.where(inside_z, -np.inf, np.inf), np.minimum(tz0, tz1))
        z_hi = np.where(par_z, np.where(inside_z, np.inf, -np.inf), np.maximum(tz0, tz1))
        enter, leave = np.maximum(np.maximum(x_lo, z_lo), 0.0), np.minimum(x_hi, z_hi)
        missed = enter > leave
        return np.where(missed, np.inf, enter), np.where(missed, -np.inf, leave)

    def topdown_map(self, height: float) -> tuple[np.ndarray, tuple[float, float, float, float]]:
        nz, nx = self.nav.blocked.shape
        return self.nav.blocked.copy(), (self.nav.x0, self.nav.x0 + nx * NAV_CELL, self.nav.z0 + nz * NAV_CELL,
                                         self.nav.z0)

    # ---------------------------------------------------------------- navigation
    def _cell(self, p: np.ndarray) -> tuple[int, int]:
        return self.nav.cell_of(float(p[0]), float(p[2]))

    def is_navigable(self, point: np.ndarray) -> bool:
        if abs(float(point[1]) - self.layout.agent_floor_y) > 0.5:
            return False
        return self.nav.free_at(float(point[0]), float(point[2]))

    def _segment_free(self, a: np.ndarray, b: np.ndarray) -> bool:
        n = max(2, int(math.ceil(math.hypot(b[0] - a[0], b[2] - a[2]) / (NAV_CELL / 3))) + 1)
        f = np.linspace(0.0, 1.0, n)
        i = np.floor((a[2] + f * (b[2] - a[2]) - self.nav.z0) / NAV_CELL).astype(np.int64)
        j = np.floor((a[0] + f * (b[0] - a[0]) - self.nav.x0) / NAV_CELL).astype(np.int64)
        nz, nx = self.nav.blocked.shape
        if (i < 0).any() or (i >= nz).any() or (j < 0).any() or (j >= nx).any():
            return False
        return not self.nav.blocked[i, j].any()

    def sample_navigable_point(self) -> np.ndarray:
        i, j = self._free_cells[self._rng.integers(len(self._free_cells))]
        jitter = self._rng.uniform(-0.45, 0.45, size=2) * NAV_CELL
        p = self._cell_point(i, j)
        return p + np.array([jitter[0], 0.0, jitter[1]])

    def snap_point(self, point: np.ndarray) -> np.ndarray:
        p = np.array([point[0], self.layout.agent_floor_y, point[2]], dtype=np.float64)
        if self.nav.free_at(p[0], p[2]):
            return p
        centers = np.array([self.nav.center(i, j) for i, j in self._free_cells])
        k = int(np.argmin(np.hypot(centers[:, 0] - p[0], centers[:, 1] - p[2])))
        return self._cell_point(*self._free_cells[k])

    def _field(self, goal: np.ndarray) -> np.ndarray:
        """Path length from every cell centre to `goal` (8-connected, no corner cutting)."""
        key = self._cell(goal)
        if key in self._fields:
            self._fields.move_to_end(key)
            return self._fields[key]
        blocked = self.nav.blocked
        nz, nx = blocked.shape
        field = np.full((nz, nx), np.inf)
        cx, cz = self.nav.center(*key)
        field[key] = math.hypot(goal[0] - cx, goal[2] - cz)
        heap = [(field[key], key)]
        c = NAV_CELL
        while heap:
            d, (i, j) = heapq.heappop(heap)
            if d > field[i, j]:
                continue
            for di, dj in ((1, 0), (-1, 0), (0, 1), (0, -1), (1, 1), (1, -1), (-1, 1), (-1, -1)):
                a, b = i + di, j + dj
                if not (0 <= a < nz and 0 <= b < nx) or blocked[a, b]:
                    continue
                if di and dj and (blocked[i + di, j] or blocked[i, j + dj]):
                    continue
                nd = d + (c * _SQRT2 if di and dj else c)
                if nd < field[a, b]:
                    field[a, b] = nd
                    heapq.heappush(heap, (nd, (a, b)))
        self._fields[key] = field
        while len(self._fields) * field.size > FIELD_CACHE_CELLS:
            self._fields.popitem(last=False)
        return field

    def geodesic_distance(self, start: np.ndarray, end: np.ndarray) -> float:
        if not (self.is_navigable(start) and self.is_navigable(end)):
            return math.inf
        if self._segment_free(start, end):
            return float(math.hypot(end[0] - start[0], end[2] - start[2]))
        field = self._field(end)
        i, j = self._cell(start)
        best = math.inf
        for a in range(i - 1, i + 2):
            for b in range(j - 1, j + 2):
                if self.nav.inside(a, b) and math.isfinite(field[a, b]):
                    cx, cz = self.nav.center(a, b)
                    best = min(best, field[a, b] + math.hypot(start[0] - cx, start[2] - cz))
        return float(best)

    def shortest_path(self, start: np.ndarray, end: np.ndarray) -> list[np.ndarray]:
        start = np.asarray(start, dtype=np.float64)
        end = np.asarray(end, dtype=np.float64)
        if not math.isfinite(self.geodesic_distance(start, end)):
            return []
        if self._segment_free(start, end):
            return [start, end]
        field = self._field(end)
        cells, (i, j) = [], self._cell(start)
        goal = self._cell(end)
        while (i, j) != goal and len(cells) < field.size:
            nbrs = [(field[a, b], (a, b)) for a in range(i - 1, i + 2) for b in range(j - 1, j + 2)
                    if self.nav.inside(a, b) and (a, b) != (i, j)]
            d, (i, j) = min(nbrs)
            if not math.isfinite(d):
                return []
            cells.append(self._cell_point(i, j))
        cells.append(end)
        path, current, k = [start], start, 0
        while not self._segment_free(current, end):  # string pulling: farthest visible cell centre
            far = k
            for m in range(k, len(cells)):
                if self._segment_free(current, cells[m]):
                    far = m
            current, k = cells[far], far + 1
            path.append(current)
        path.append(end)
        return path
