"""The grid world's first-person camera (env.gridnav.camera): depth and RGB images ray-cast per image column.

A pinhole camera sits at the agent's cell centre, at half the height of a wall (walls and furniture are one
cell wide and one unit high), looking along the heading; square pixels, so the focal length in pixels is
f = (width / 2) / tan(camera_fov / 2) both ways. Each image column casts one ray over the map, as in a
raycasting game: the first blocked cell it enters is what the column sees, at the perpendicular distance d
(the distance along the ray times the cosine of the column's angle, so straight walls stay straight); the wall
fills the rows within f * 0.5 / d of the horizon, the floor lies below and the ceiling above, each pixel at the
distance f * 0.5 / |row offset|. The goal is a red pillar (radius GOAL_RADIUS, height GOAL_HEIGHT) standing
on its cell, drawn in front of whatever its column's ray hits behind it; it is not drawn from inside its own
cell.

Depth: the perpendicular distance of each pixel's surface, divided by `max_range` and clipped to [0, 1]
(habitat's depth sensor convention), float32 or uint8 (x 255). RGB (uint8): walls light, furniture blue, the
goal red, a chequered floor and a plain ceiling, every surface darker with distance; a wall's faces along rows
and along columns are shaded differently and the edges of its cells drawn darker, so corners and single blocks
read as such.

The rays' paths through the cells are map-independent (envs/gridnav/maps.py `ray_cells`, one per heading and
column, computed once); a frame is a gather of every env's cells along its columns, an argmax for the first
blocked one, and per-pixel comparisons, all vectorised over envs, rows and columns.
"""

from __future__ import annotations

import math

import numpy as np

from ddppo.envs.gridnav.maps import heading_geometry, ray_cells

GOAL_RADIUS, GOAL_HEIGHT = 0.3, 0.8  # cells, wall heights
WALL, FURNITURE, GOAL = (np.array(c, np.float32) for c in ((205, 200, 188), (60, 105, 200), (235, 30, 25)))
FLOOR, FLOOR_ALT, CEILING = (np.array(c, np.float32) for c in ((120, 112, 100), (95, 88, 78), (165, 170, 180)))
_FADE = 0.07  # brightness 1 / (1 + _FADE * distance)


class GridCamera:
    """Renders the camera of envs at (map, cell, heading) with their goals. `occupancy` (M, H, W) bool with a
    blocked border, `furniture` (M, H, W) bool; `size` (height, width)."""

    def __init__(self, occupancy: np.ndarray, furniture: np.ndarray, num_headings: int, size: tuple[int, int],
                 fov_degrees: float, max_range: float, depth_dtype: str = "float32"):
        self.height, self.width = h, w = size
        self.max_range, self.depth_dtype = float(max_range), np.dtype(depth_dtype)
        _, m_h, m_w = occupancy.shape
        self._map_width = m_w
        self.focal = f = (w / 2.0) / math.tan(math.radians(fov_degrees) / 2.0)
        offsets = np.arctan((w / 2.0 - np.arange(w) - 0.5) / f)  # column angles, left (counter-clockwise) first
        self._cos = np.cos(offsets).astype(np.float32)
        angles = heading_geometry(num_headings)[0][:, None] + offsets[None, :]  # (D, W)
        self._uy, self._ux = -np.sin(angles), np.cos(angles)  # ray directions in (row, col)
        self._uy32, self._ux32 = self._uy.astype(np.float32), self._ux.astype(np.float32)
        dy, dx, enter = ray_cells(angles, math.hypot(m_h, m_w) + 1.0)  # every ray meets the border before
        self._dy, self._dx, self._enter = dy, dx, enter.astype(np.float32)
        # where each ray enters each cell: which face (a column boundary: the wall runs along rows) and how far
        # along that face (0-1), for the shading
        py, px = enter * self._uy[..., None], enter * self._ux[..., None]
        self._col_face = np.abs(np.abs(px - dx) - 0.5) < 1e-6
        self._along = np.where(self._col_face, py - dy + 0.5, px - dx + 0.5).astype(np.float32)
        self._pad = pad = int(max(np.abs(dy).max(), np.abs(dx).max())) + 1
        self._occ = np.pad(occupancy, ((0, 0), (pad, pad), (pad, pad)), constant_values=True)
        self._furniture = np.pad(furniture, ((0, 0), (pad, pad), (pad, pad)), constant_values=False)
        rows = np.arange(h) + 0.5 - h / 2.0  # pixel rows' offsets from the horizon, + = down
        self._rows = rows.astype(np.float32)
        self._surface = (f * 0.5 / np.maximum(np.abs(rows), 1e-6)).astype(np.float32)  # floor/ceiling distance
        self._reach = self._surface[rows > 0][:, None] / self._cos[None, :]  # (H_low, W) along a ray to the floor

    def render(self, maps: np.ndarray, pos: np.ndarray, heading: np.ndarray, goal: np.ndarray,
               depth: bool, rgb: bool) -> dict[str, np.ndarray]:
        """Images of envs at flat cells `pos` facing `heading` in `maps`, goals at flat cells `goal`:
        {"depth": (N, H, W, 1)} and/or {"rgb": (N, H, W, 3) uint8}."""
        row, col = np.divmod(pos, self._map_width)
        hit = self._cast(maps, row, col, heading)
        goal_t = self._goal_distance(row, col, heading, goal, hit["t"])
        wall_d, goal_d = hit["t"] * self._cos, goal_t * self._cos  # (N, W) perpendicular distances
        pillar = ((self._rows[None, :, None] <= self.focal * 0.5 / goal_d[:, None, :])
                  & (self._rows[None, :, None] >= self.focal * (0.5 - GOAL_HEIGHT) / goal_d[:, None, :]))
        out = {}
        if depth:
            out["depth"] = self._depth(pillar, wall_d, goal_d)
        if rgb:
            out["rgb"] = self._rgb(pillar, wall_d, goal_d, hit, row, col, heading)
        return out

    def _cast(self, maps, row, col, heading) -> dict[str, np.ndarray]:
        """Per env and column, the first blocked cell along the ray: its entry distance `t`, whether it is
        furniture, its face and the position along it."""
        rows = row[:, None, None] + self._pad + self._dy[heading]  # (N, W, L)
        cols = col[:, None, None] + self._pad + self._dx[heading]
        first = self._occ[maps[:, None, None], rows, cols].argmax(axis=-1)[..., None]  # (N, W, 1)

        def pick(table: np.ndarray) -> np.ndarray:
            return np.take_along_axis(table, first, -1)[..., 0]

        return {"t": pick(self._enter[heading]), "furniture": self._furniture[maps[:, None], pick(rows), pick(cols)],
                "col_face": pick(self._col_face[heading]), "along": pick(self._along[heading])}

    def _goal_distance(self, row, col, heading, goal, wall_t) -> np.ndarray:
        """(N, W) distance along each column's ray to the goal pillar, inf where the ray misses it or a wall
        comes first."""
        g_row, g_col = np.divmod(goal, self._map_width)
        py, px = (g_row - row).astype(np.float32)[:, None], (g_col - col).astype(np.float32)[:, None]
        uy, ux = self._uy[heading], self._ux[heading]
        along = py * uy + px * ux  # (N, W)
        miss2 = py * py + px * px - along * along
        t = along - np.sqrt(np.maximum(GOAL_RADIUS ** 2 - miss2, 0.0))
        seen = (miss2 <= GOAL_RADIUS ** 2) & (t > 0) & (t < wall_t)
        return np.where(seen, t, np.inf).astype(np.float32)

    def _depth(self, pillar, wall_d, goal_d) -> np.ndarray:
        # a pixel sees the wall where the wall is nearer than the floor or ceiling along its row
        d = np.minimum(wall_d[:, None, :], self._surface[None, :, None])
        d = np.where(pillar, goal_d[:, None, :], d)
        d = np.minimum(d, self.max_range) / self.max_range
        if self.depth_dtype == np.uint8:
            return np.rint(d * 255.0).astype(np.uint8)[..., None]
        return d.astype(np.float32)[..., None]

    def _rgb(self, pillar, wall_d, goal_d, hit, row, col, heading) -> np.ndarray:
        """Every pixel as a surface kind and a brightness level, looked up in one palette of uint8 colours."""
        wall = self._surface[None, :, None] >= wall_d[:, None, :]  # (N, H, W)
        edge = np.minimum(hit["along"], 1.0 - hit["along"]) < 0.04
        wall_light = np.where(hit["col_face"], 0.8, 1.0) * np.where(edge, 0.55, 1.0) / (1.0 + _FADE * wall_d)
        wall_code = np.where(hit["furniture"], _FURNITURE, _WALL) * _LEVELS + _level(wall_light)  # (N, W)
        goal_code = _GOAL * _LEVELS + _level(1.0 / (1.0 + 0.5 * _FADE * goal_d))  # the goal fades less
        # floor and ceiling: per row, the floor chequered where each pixel's ray meets it
        surface_light = _level(1.0 / (1.0 + _FADE * self._surface))  # (H,)
        low = self._rows > 0
        reach = self._reach[None]  # (1, H_low, W) along the ray
        fy = (row.astype(np.float32) + np.float32(0.5))[:, None, None] + reach * self._uy32[heading][:, None, :]
        fx = (col.astype(np.float32) + np.float32(0.5))[:, None, None] + reach * self._ux32[heading][:, None, :]
        chequer = (np.floor(fy) + np.floor(fx)).astype(np.int16) & 1  # (N, H_low, W)
        code = np.empty(wall.shape, np.int16)
        code[:, ~low, :] = (_CEILING * _LEVELS + surface_light[~low])[None, :, None]
        code[:, low, :] = (_FLOOR + chequer) * _LEVELS + surface_light[low][None, :, None]
        code = np.where(wall, wall_code[:, None, :], code)
        code = np.where(pillar, goal_code[:, None, :], code)
        return _PALETTE[code]


_LEVELS = 64
_CEILING, _FLOOR, _FLOOR_ALT, _WALL, _FURNITURE, _GOAL = range(6)  # surface kinds, rows of the palette
_BRIGHTNESS = np.arange(_LEVELS) / (_LEVELS - 1)
_KINDS = np.stack([CEILING, FLOOR, FLOOR_ALT, WALL, FURNITURE, GOAL])
_PALETTE = np.clip(_KINDS[:, None, :] * _BRIGHTNESS[None, :, None], 0, 255).round().astype(np.uint8).reshape(-1, 3)
# ^ (kind * _LEVELS + level) -> RGB


def _level(light: np.ndarray) -> np.ndarray:
    """Brightness in [0, 1] -> a palette level."""
    return np.rint(np.clip(light, 0.0, 1.0) * (_LEVELS - 1)).astype(np.int16)
