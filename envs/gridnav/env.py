"""The built-in PointNav grid world: the project's default environment.

PointNav as in habitat: reach a goal given only its position relative to the
agent (GPS + compass) and an egocentric range scan, then call STOP. Maps are
procedurally generated small indoor floors (rooms joined by doors, furniture
blocks), seeded from `EnvSpec.seed`; see envs/gridnav/maps.py for the geometry.

Actions (Discrete(4)): 0 STOP, 1 MOVE_FORWARD (one cell along the heading; a
blocked move leaves the agent in place and counts a collision), 2 TURN_LEFT,
3 TURN_RIGHT (one heading increment, counter-clockwise / clockwise).

Observations:
  pointgoal (3,) float32: (euclidean distance / (map_size / 2), cos, sin) of the goal
                  direction in the agent's frame (angle counter-clockwise from
                  straight ahead); exactly (0, 0, 0) on the goal cell. Absent with
                  goal_sensor=false; zeros from step goal_visible_steps of an
                  episode on, where that is > 0 (a task that needs memory).
  depth (num_rays,) float32: range scan over `fov_degrees`, right to left, clipped
                  at max_range and divided by it (camera=none, the default).
  depth (H, W, 1), rgb (H, W, 3) uint8: the first-person camera (camera=depth,
                  rgb or rgbd; envs/gridnav/camera.py), the goal a red pillar.

STOP ends the episode (terminated) and succeeds if the geodesic distance to
the goal is <= success_distance. Reaching max_episode_steps truncates it.
Reward: slack_reward + (previous - new geodesic distance) + success_reward on
success. Episode metrics: return, length, success, spl, distance_to_goal,
collisions.

Stepping is vectorised over envs: per-map tables (moves, geodesic distance
fields for a set of goals, range scans per cell and heading) are built once at
construction, so a step is a handful of gathers.

Scenes (per-scene statistics, ddppo/rollout/scenes.py): a generated map's scene
is its layout, named by its number of rooms (`rooms1` ... `rooms<max_room_splits
+ 1>`): what the navigation skill depends on (doors to find, longer detours),
the same notion on every rank although each rank generates its own maps, and at
most max_room_splits + 1 of them. Hand-made maps are scenes of their own
(`map0`, `map1`, ...: the user chose each). Each episode reports its map's scene
and the scene of the episode that replaces it (`EpisodeInfo.next_scene`; grouped
episodes start later, so theirs is not known when a member finishes).
"""

from __future__ import annotations

import zlib
from typing import Any, Sequence

import gymnasium
import numpy as np

from ddppo.envs.base import RESEED, EnvError, EpisodeInfo, Obs, StepResult
from ddppo.field_metadata import section_problems
from ddppo.envs.gridnav.camera import GridCamera
from ddppo.envs.gridnav.maps import build_tables, generate_map, geodesic_fields, heading_geometry
from ddppo.envs.gridnav.options import GridNavOptions

STOP, MOVE_FORWARD, TURN_LEFT, TURN_RIGHT = 0, 1, 2, 3
_STATE_KEYS = ("map", "pos", "goal", "heading", "dist", "prev_geo", "shortest", "steps", "ret", "path_len",
               "collisions", "path", "idle")


class GridNav:
    """A batch of `spec.num_envs` grid-world PointNav episodes (implements ddppo.envs.base.VecEnv).

    `maps`: optional hand-made maps ((H, W) bool, True = blocked, blocked border,
    all the same shape; see ddppo.envs.gridnav.maps.parse_ascii) used instead of generated ones.
    """

    def __init__(self, options: GridNavOptions, spec: Any, maps: Sequence[np.ndarray] | None = None):
        problems = section_problems(options)
        if problems:
            raise EnvError("gridnav options: " + "; ".join(problems))
        if spec.num_envs <= 0:
            raise EnvError(f"num_envs={spec.num_envs} must be > 0")
        self.options = opt = options
        self.num_envs = n = spec.num_envs
        map_rng = np.random.default_rng([spec.seed, 1])
        if maps is not None:
            maps = _check_maps(maps)
            layouts = [f"map{k}" for k in range(len(maps))]
            furniture = None
        else:
            made = [generate_map(map_rng, opt.map_size, opt.max_room_splits, opt.door_width, opt.obstacle_density)
                    for _ in range(opt.num_maps)]
            maps, layouts = [m for m, _, _ in made], [f"rooms{rooms}" for _, rooms, _ in made]
            furniture = [f for _, _, f in made]
        self.scenes = tuple(sorted(set(layouts)))  # ddppo.envs.base.declared_scenes: the maps' layouts
        self._map_scene = np.array([self.scenes.index(s) for s in layouts], np.int64)  # per map
        self.tables = build_tables(maps, map_rng, opt.goals_per_map, opt.min_geodesic, opt.num_headings,
                                   opt.num_rays, opt.fov_degrees, opt.max_range, furniture)
        self._seed = spec.seed
        self._rng = np.random.default_rng([spec.seed, 2])
        self.map_shape = maps[0].shape
        hw = maps[0].size
        self._hw = hw
        self._row, self._col = np.divmod(np.arange(hw), self.map_shape[1])
        angles, drow, dcol, self._step_len = heading_geometry(opt.num_headings)
        self._cos, self._sin = np.cos(angles), np.sin(angles)
        self._offset = drow * self.map_shape[1] + dcol
        self._distance_scale = 2.0 / max(self.map_shape)
        self._maps_crc = zlib.crc32(np.ascontiguousarray(self.tables.occupancy).tobytes())
        self._ar = np.arange(n)
        # per-env episode state
        self._map = np.zeros(n, np.int64)
        self._pos = np.zeros(n, np.int64)  # flat cell index
        self._goal = np.zeros(n, np.int64)
        self._heading = np.zeros(n, np.int64)
        self._dist = np.zeros((n, hw), np.float32)  # geodesic distance field of the env's goal
        self._prev_geo = np.zeros(n, np.float32)
        self._shortest = np.zeros(n, np.float32)
        self._steps = np.zeros(n, np.int64)
        self._ret = np.zeros(n, np.float64)
        self._path_len = np.zeros(n, np.float64)
        self._collisions = np.zeros(n, np.int64)
        self.group_size = g = getattr(spec, "group_size", 1)
        if n % g:
            raise EnvError(f"num_envs={n} must be a multiple of the episode group size {g}")
        self._idle = np.zeros(n, bool)  # grouped episodes: finished, waiting for the rest of the group
        self._path = np.zeros((n, opt.max_episode_steps + 1), np.int64)  # cells visited, per step
        self._started = False

        self.camera = None if opt.camera == "none" else GridCamera(
            self.tables.occupancy, self.tables.furniture, opt.num_headings, opt.camera_shape, opt.camera_fov,
            opt.max_range, opt.camera_depth_dtype)
        self.observation_space = gymnasium.spaces.Dict(_spaces(opt))
        self.action_space = gymnasium.spaces.Discrete(4)

    # ---- VecEnv -----------------------------------------------------------------------------
    def reset(self, seed: int | None = None) -> Obs:
        if seed is not None:  # fresh episodes from a stream of their own (see ddppo.envs.base.fresh_reset)
            self._rng = np.random.default_rng([self._seed, 2, RESEED, int(seed)])
        self._reset_groups(np.arange(self.num_envs // self.group_size))
        self._started = True
        return self.observe()

    def step(self, actions: np.ndarray) -> StepResult:
        if not self._started:
            raise EnvError("gridnav: call reset() before step()")
        a = np.asarray(actions).reshape(-1)
        if a.shape != (self.num_envs,) or ((a < 0) | (a > 3)).any():
            raise EnvError(f"gridnav: actions must be {self.num_envs} ints in [0, 3], got {a!r}")
        if self.group_size > 1:
            return self._grouped_step(a)
        return self._step(a)

    @property
    def env_scenes(self) -> list[str]:
        """The scene of each env's current map (ddppo.envs.base.env_scenes)."""
        return [self.scenes[s] for s in self._map_scene[self._map]]

    def _step(self, a: np.ndarray) -> StepResult:
        res = self._advance(a)
        done = res.done
        if done.any():
            idx = np.flatnonzero(done)
            self._reset_envs(idx)
            for e in res.episodes:
                e.next_scene = self.scenes[self._map_scene[self._map[e.env_index]]]
            fresh = self.observe(idx)
            res.obs = {k: v.copy() for k, v in res.final_obs.items()}
            for k, v in fresh.items():
                res.obs[k][idx] = v
        return res

    def _advance(self, a: np.ndarray) -> StepResult:
        """Move every env one step; no reset (obs is final_obs)."""
        opt, t = self.options, self.tables
        stop, forward = a == STOP, a == MOVE_FORWARD
        self._heading = (self._heading + (a == TURN_LEFT) - (a == TURN_RIGHT)) % opt.num_headings
        moved = forward & t.move_ok[(self._map * self._hw + self._pos) * opt.num_headings + self._heading]
        self._pos = np.where(moved, self._pos + self._offset[self._heading], self._pos)
        self._collisions += forward & ~moved
        self._path_len += moved * self._step_len[self._heading]
        geo = self._dist[self._ar, self._pos]
        success = stop & (geo <= opt.success_distance)
        reward = (opt.slack_reward + (self._prev_geo - geo) + opt.success_reward * success).astype(np.float32)
        self._prev_geo = geo
        self._ret += reward
        self._steps += 1
        self._path[self._ar, np.minimum(self._steps, opt.max_episode_steps)] = self._pos
        terminated = stop
        truncated = ~stop & (self._steps >= opt.max_episode_steps)
        final_obs = self.observe()
        idx = np.flatnonzero(terminated | truncated)
        episodes = self._episode_infos(idx, success[idx], geo[idx]) if idx.size else []
        return StepResult(final_obs, reward, terminated, truncated, final_obs, episodes)

    def _grouped_step(self, a: np.ndarray) -> StepResult:
        """Step with shared group episodes: idle members stay frozen; a finished group restarts together."""
        idle = self._idle.copy()
        frozen = {k: getattr(self, "_" + k)[idle].copy() for k in _STATE_KEYS if k not in ("path", "idle")}
        saved_path = self._path[idle].copy()
        res = self._advance(a)
        for k, v in frozen.items():
            getattr(self, "_" + k)[idle] = v
        self._path[idle] = saved_path
        res.reward[idle] = 0.0
        res.terminated[idle] = False
        res.truncated[idle] = False
        res.episodes = [e for e in res.episodes if not idle[e.env_index]]
        self._idle |= res.done
        g = self.group_size
        finished = np.flatnonzero(self._idle.reshape(-1, g).all(axis=1))
        started = np.zeros(self.num_envs, bool)
        obs = self.observe()
        if finished.size:
            self._reset_groups(finished)
            members = (finished[:, None] * g + np.arange(g)).reshape(-1)
            started[members] = True
            for k, v in self.observe(members).items():
                obs[k][members] = v
        return StepResult(obs, res.reward, res.terminated, res.truncated, res.final_obs, res.episodes,
                          idle=idle, started=started)

    def close(self) -> None:
        pass

    def state_dict(self) -> dict[str, Any]:
        state = {k: getattr(self, "_" + k).copy() for k in _STATE_KEYS}
        state.update(rng=self._rng.bit_generator.state, started=self._started, maps_crc=self._maps_crc)
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state["maps_crc"] != self._maps_crc:
            raise EnvError("gridnav state was saved with different maps (seed or gridnav options changed)")
        for k in _STATE_KEYS:
            current = getattr(self, "_" + k)
            value = np.asarray(state[k], dtype=current.dtype)
            if value.shape != current.shape:
                raise EnvError(f"gridnav state {k!r} has shape {value.shape}, expected {current.shape} "
                               "(num_envs or options changed)")
            setattr(self, "_" + k, value.copy())
        self._rng.bit_generator.state = state["rng"]
        self._started = bool(state["started"])

    # ---- observations and episodes ----------------------------------------------------------
    def observe(self, idx: np.ndarray | None = None) -> Obs:
        """Current observations of all envs (or of envs `idx`), without stepping."""
        opt = self.options
        sel = self._ar if idx is None else idx
        pos, goal, heading = self._pos[sel], self._goal[sel], self._heading[sel]
        obs = {}
        if opt.goal_sensor:
            obs["pointgoal"] = self._pointgoal(pos, goal, heading)
            if opt.goal_visible_steps:  # the memory task: the goal vector only for the episode's first steps
                obs["pointgoal"][self._steps[sel] >= opt.goal_visible_steps] = 0.0
        if self.camera is None:
            obs["depth"] = self.tables.depth[self._map[sel], pos, heading].astype(np.float32)
        else:
            obs.update(self.camera.render(self._map[sel], pos, heading, goal, depth=opt.camera in ("depth", "rgbd"),
                                          rgb=opt.camera in ("rgb", "rgbd")))
        return obs

    def _pointgoal(self, pos: np.ndarray, goal: np.ndarray, heading: np.ndarray) -> np.ndarray:
        drow = self._row[goal] - self._row[pos]
        dcol = self._col[goal] - self._col[pos]
        c, s = self._cos[heading], self._sin[heading]
        ahead = c * dcol - s * drow
        left = -s * dcol - c * drow
        dist = np.hypot(ahead, left)
        norm = np.where(dist > 0, dist, 1.0)
        return np.stack([dist * self._distance_scale, ahead / norm, left / norm], axis=1).astype(np.float32)

    def _episode_infos(self, idx, success, geo) -> list[EpisodeInfo]:
        shortest, path = self._shortest[idx].astype(np.float64), self._path_len[idx]
        spl = success * shortest / np.maximum(shortest, path)
        columns = zip(idx.tolist(), self._ret[idx].tolist(), self._steps[idx].tolist(),
                      success.astype(float).tolist(), spl.tolist(), geo.astype(float).tolist(),
                      self._collisions[idx].tolist())
        return [EpisodeInfo(i, {"return": r, "length": float(n), "success": s, "spl": p, "distance_to_goal": d,
                                "collisions": float(col)}, self.scenes[self._map_scene[self._map[i]]])
                for i, r, n, s, p, d, col in columns]

    def _reset_envs(self, idx: np.ndarray) -> None:
        self._begin(idx, *self._draw(len(idx)))

    def _reset_groups(self, groups: np.ndarray) -> None:
        """Every member of each group starts the same freshly drawn episode."""
        g = self.group_size
        members = (groups[:, None] * g + np.arange(g)).reshape(-1)
        self._begin(members, *(np.repeat(x, g, axis=0) for x in self._draw(len(groups))))
        self._idle[members] = False

    def _draw(self, k: int) -> tuple[np.ndarray, ...]:
        """k random episodes: map, start cell, goal cell, heading, geodesic field."""
        t = self.tables
        maps = self._rng.integers(len(t.occupancy), size=k)
        rows = (self._rng.random(k) * t.num_goals[maps]).astype(np.int64)
        field = t.fields[maps, rows]
        valid = np.isfinite(field) & (field >= self.options.min_geodesic)
        start = np.where(valid, self._rng.random(field.shape), -1.0).argmax(axis=1)
        heading = self._rng.integers(self.options.num_headings, size=k)
        return maps, start, t.goals[maps, rows], heading, field

    def _begin(self, idx, maps, start, goal, heading, field) -> None:
        self._map[idx], self._pos[idx], self._goal[idx], self._heading[idx] = maps, start, goal, heading
        self._dist[idx] = field
        self._shortest[idx] = self._prev_geo[idx] = field[np.arange(len(idx)), start]
        self._steps[idx] = 0
        self._ret[idx] = 0.0
        self._path_len[idx] = 0.0
        self._collisions[idx] = 0
        self._path[idx] = -1
        self._path[idx, 0] = start

    # ---- hooks for tests, evaluation and videos ------------------------------------------
    def set_episode(self, i: int, start: tuple[int, int], goal: tuple[int, int], heading: int = 0,
                    map_index: int = 0) -> None:
        """Start a chosen episode in env `i` (cells as (row, col)); call reset() once before."""
        occ = self.tables.occupancy[map_index]
        width = occ.shape[1]
        s, g = start[0] * width + start[1], goal[0] * width + goal[1]
        if occ.flat[s] or occ.flat[g]:
            raise EnvError(f"set_episode: start {start} and goal {goal} must be free cells")
        field = geodesic_fields(~occ, np.array([g]), self.options.num_headings)
        idx = np.array([i])
        self._begin(idx, np.array([map_index]), np.array([s]), np.array([g]), np.array([heading]), field)
        self._started = True

    def geodesic_distance(self) -> np.ndarray:
        """(N,) current geodesic distance to the goal, in cells."""
        return self._dist[self._ar, self._pos].copy()

    def topdown(self, i: int) -> dict[str, Any]:
        """Top-down state of env i: occupancy (H, W) bool (True = blocked), agent (row, col),
        heading (index) and heading_angle (radians, counter-clockwise from east), goal (row, col),
        path (L, 2) cells visited so far, first = start; map_index (for `set_episode`)."""
        width = self.map_shape[1]
        steps = min(int(self._steps[i]), self.options.max_episode_steps)
        path = self._path[i, :steps + 1]
        return {
            "map_index": int(self._map[i]),
            "occupancy": self.tables.occupancy[self._map[i]].copy(),
            "agent": divmod(int(self._pos[i]), width),
            "heading": int(self._heading[i]),
            "heading_angle": 2.0 * np.pi * int(self._heading[i]) / self.options.num_headings,
            "goal": divmod(int(self._goal[i]), width),
            "path": np.stack(np.divmod(path, width), axis=1),
        }

    def oracle_actions(self) -> np.ndarray:
        """(N,) the shortest-path expert: STOP on success, else turn towards (fewest turns) and
        move to a neighbour on a shortest path. Reaches success 1 and SPL 1."""
        opt, d = self.options, self.options.num_headings
        ok = self.tables.move_ok.reshape(-1, d)[self._map * self._hw + self._pos]  # (N, D)
        target = np.where(ok, self._pos[:, None] + self._offset[None, :], self._pos[:, None])
        value = np.where(ok, self._step_len[None, :] + self._dist[self._ar[:, None], target], np.inf)
        turn = (np.arange(d)[None, :] - self._heading[:, None]) % d  # left turns to reach each heading
        turns_needed = np.minimum(turn, d - turn)
        best = np.argmin(value + 1e-4 * turns_needed, axis=1)
        diff = (best - self._heading) % d
        action = np.where(diff == 0, MOVE_FORWARD, np.where(diff <= d // 2, TURN_LEFT, TURN_RIGHT))
        return np.where(self.geodesic_distance() <= opt.success_distance, STOP, action).astype(np.int64)

    def expert_actions(self) -> np.ndarray:
        """The expert `ddppo record` records (ddppo.envs.base.expert_actions): `oracle_actions`."""
        return self.oracle_actions()


def _spaces(opt: GridNavOptions) -> dict[str, gymnasium.spaces.Box]:
    """The observation spaces the options ask for (see the module docstring)."""
    inf = np.float32(np.inf)
    spaces = {}
    if opt.goal_sensor:
        spaces["pointgoal"] = gymnasium.spaces.Box(np.array([0, -1, -1], np.float32), np.array([inf, 1, 1], np.float32),
                                                   dtype=np.float32)
    if opt.camera == "none":
        spaces["depth"] = gymnasium.spaces.Box(0.0, 1.0, (opt.num_rays,), np.float32)
    if opt.camera in ("depth", "rgbd"):
        high = 255 if opt.camera_depth_dtype == "uint8" else 1.0
        spaces["depth"] = gymnasium.spaces.Box(0, high, (*opt.camera_shape, 1), np.dtype(opt.camera_depth_dtype))
    if opt.camera in ("rgb", "rgbd"):
        spaces["rgb"] = gymnasium.spaces.Box(0, 255, (*opt.camera_shape, 3), np.uint8)
    return spaces


def _check_maps(maps: Sequence[np.ndarray]) -> list[np.ndarray]:
    maps = [np.asarray(m, dtype=bool) for m in maps]
    if not maps or len({m.shape for m in maps}) != 1 or maps[0].ndim != 2:
        raise EnvError("hand-made maps must be a non-empty list of (H, W) arrays of one shape")
    for k, m in enumerate(maps):
        if not (m[0].all() and m[-1].all() and m[:, 0].all() and m[:, -1].all()):
            raise EnvError(f"hand-made map {k} must have blocked border cells")
    return maps


def make_gridnav(options: GridNavOptions, spec: Any, maps: Sequence[np.ndarray] | None = None) -> GridNav:
    """Registry factory for env.name=gridnav."""
    return GridNav(options, spec, maps)
