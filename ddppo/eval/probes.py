"""What evaluation can see of an environment beyond observations, duck-typed (ddppo imports no concrete env).

- gridnav-like envs (`topdown(i)`, `geodesic_distance()`, `set_episode`,
  `observe`): episode descriptors (map, start, goal, heading), a top-down map
  in cells, and episode planning: a fixed list of episodes is drawn once and
  each env is set to its next planned episode whenever one starts, so every
  checkpoint plays exactly the same episodes, whatever the policy does.
- habitat-like envs (`simulators`, `current_episodes()`): episode ids, and a
  top-down map in metres from each simulator's `topdown_map` (habitat-sim's
  navmesh, or the grid double's raster). Their episodes come from the dataset
  (see ddppo/eval/command.py).
- dataset envs without a map (habitat-lab tasks: `current_episodes()` only):
  episode ids.
- anything else: the blind base probe (metrics only).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

POINTNAV_ACTIONS = ("STOP", "MOVE_FORWARD", "TURN_LEFT", "TURN_RIGHT")  # gridnav and habitat PointNav


@dataclasses.dataclass
class MapView:
    """A top-down map in plot coordinates (x right, y down, as an image)."""

    blocked: np.ndarray  # (H, W) bool, True = not navigable
    extent: tuple[float, float, float, float]  # imshow extent (left, right, bottom, top)
    agent: tuple[float, float]
    heading: tuple[float, float]  # unit vector the agent faces
    goal: tuple[float, float]
    goal_radius: float  # success distance, in plot units
    unit: str  # "cells" | "m"


# ------------------------------------------------------------------------------ probes
class EnvProbe:
    """What evaluation can see of env i beyond observations; this base sees nothing."""

    action_names: tuple[str, ...] = ()
    can_render = False

    def episode_key(self, i: int) -> dict[str, Any]:
        """A JSON-able descriptor of env i's current episode (call at the episode's start)."""
        return {}

    def map_view(self, i: int) -> MapView | None:
        return None

    def distance(self, i: int) -> float | None:
        """Geodesic distance of env i's agent to its goal."""
        return None

    def ego_goal(self, obs: dict[str, np.ndarray]) -> tuple[float, float] | None:
        """(distance, angle counter-clockwise from straight ahead) of the goal in one env's observation."""
        return None

    def scan(self) -> tuple[np.ndarray, float] | None:
        """(ray angles counter-clockwise from straight ahead, max range) of a 1-D range-scan observation."""
        return None

    can_plan = False

    def draw_episodes(self, count: int) -> list[dict[str, Any]]:
        """`count` episode descriptors drawn by the env's own episode sampler (can_plan only)."""
        raise NotImplementedError

    def start_episode(self, i: int, key: dict[str, Any]) -> dict[str, np.ndarray]:
        """Put env i at the start of episode `key` (from draw_episodes); its observation row."""
        raise NotImplementedError


class GridNavProbe(EnvProbe):
    can_render = True

    def __init__(self, envs: Any):
        self.envs = envs
        self.action_names = POINTNAV_ACTIONS

    def episode_key(self, i: int) -> dict[str, Any]:
        td = self.envs.topdown(i)
        key = {"start": [int(v) for v in td["agent"]], "goal": [int(v) for v in td["goal"]],
               "heading": int(td["heading"])}
        if "map_index" in td:
            key = {"map_index": int(td["map_index"]), **key}
        return key

    def map_view(self, i: int) -> MapView:
        td = self.envs.topdown(i)
        h, w = td["occupancy"].shape
        a = float(td["heading_angle"])  # counter-clockwise from east; rows grow downwards
        return MapView(td["occupancy"], (-0.5, w - 0.5, h - 0.5, -0.5), (td["agent"][1], td["agent"][0]),
                       (math.cos(a), -math.sin(a)), (td["goal"][1], td["goal"][0]),
                       float(self.envs.options.success_distance), "cells")

    def distance(self, i: int) -> float:
        return float(self.envs.geodesic_distance()[i])

    @property
    def can_plan(self) -> bool:
        return hasattr(self.envs, "set_episode") and hasattr(self.envs, "observe")

    def draw_episodes(self, count: int) -> list[dict[str, Any]]:
        """Episodes as the env draws them: reset, then STOP everywhere (each STOP starts a fresh episode).
        Leaves the env mid-way; the caller restores its state."""
        envs, out = self.envs, []
        envs.reset()
        while True:
            out += [self.episode_key(i) for i in range(envs.num_envs)]
            if len(out) >= count:
                return out[:count]
            envs.step(np.zeros(envs.num_envs, np.int64))  # STOP

    def start_episode(self, i: int, key: dict[str, Any]) -> dict[str, np.ndarray]:
        self.envs.set_episode(i, tuple(key["start"]), tuple(key["goal"]), key["heading"], key["map_index"])
        return {k: v[0] for k, v in self.envs.observe(np.array([i])).items()}

    def ego_goal(self, obs: dict[str, np.ndarray]) -> tuple[float, float] | None:
        if "pointgoal" not in obs:  # env.gridnav.goal_sensor=false: the goal is only seen
            return None
        pg = obs["pointgoal"]  # (distance / (map_size / 2), cos, sin)
        return float(pg[0]) * max(self.envs.map_shape) / 2.0, math.atan2(float(pg[2]), float(pg[1]))

    def scan(self) -> tuple[np.ndarray, float] | None:
        opt = self.envs.options  # rays right to left over fov_degrees (envs/gridnav/maps.py ray_offsets)
        if getattr(opt, "camera", "none") != "none":  # `depth` is a camera image, drawn as one
            return None
        n = opt.num_rays
        if opt.fov_degrees >= 360.0:
            angles = -np.pi + 2.0 * np.pi * (np.arange(n) + 0.5) / n
        else:
            half = math.radians(opt.fov_degrees) / 2.0
            angles = np.linspace(-half, half, n) if n > 1 else np.zeros(1)
        return angles, float(opt.max_range)


class HabitatProbe(EnvProbe):
    can_render = True
    GOAL_KEY = "pointgoal_with_gps_compass"

    def __init__(self, envs: Any):
        self.envs = envs
        self.action_names = POINTNAV_ACTIONS
        self._maps: dict[tuple[int, str], tuple[np.ndarray, tuple[float, float, float, float]]] = {}

    def episode_key(self, i: int) -> dict[str, Any]:
        ep = self.envs.current_episodes()[i]
        return {"episode_id": str(ep.episode_id), "scene_id": str(ep.scene_id)}

    def _goal(self, i: int) -> np.ndarray:
        return np.asarray(self.envs.current_episodes()[i].goals[0].position, dtype=np.float64)

    def _floor(self, i: int, height: float) -> tuple[np.ndarray, tuple[float, float, float, float]]:
        sim = self.envs.simulators[i]
        key = (i, str(getattr(sim, "scene_path", "")))
        if key not in self._maps:
            self._maps[key] = sim.topdown_map(height)
        return self._maps[key]

    def map_view(self, i: int) -> MapView:
        position, rotation = self.envs.simulators[i].agent_pose()
        blocked, extent = self._floor(i, float(position[1]))
        yaw = 2.0 * math.atan2(float(rotation[1]), float(rotation[3]))  # about +Y; 0 faces -Z (up the map)
        goal = self._goal(i)
        return MapView(blocked, extent, (float(position[0]), float(position[2])), (-math.sin(yaw), -math.cos(yaw)),
                       (float(goal[0]), float(goal[2])), float(self.envs.opt.success_distance), "m")

    def distance(self, i: int) -> float:
        sim = self.envs.simulators[i]
        return float(sim.geodesic_distance(sim.agent_pose()[0], self._goal(i)))

    def ego_goal(self, obs: dict[str, np.ndarray]) -> tuple[float, float] | None:
        pg = obs.get(self.GOAL_KEY)
        return None if pg is None else (float(pg[0]), float(pg[1]))


class DatasetProbe(EnvProbe):
    """Envs that play a dataset's episodes but show no map (habitat-lab tasks: `current_episodes()` only):
    episode ids, so every evaluated episode is named in the JSON."""

    def __init__(self, envs: Any):
        self.envs = envs

    def episode_key(self, i: int) -> dict[str, Any]:
        ep = self.envs.current_episodes()[i]
        return {} if ep is None else {"episode_id": str(ep.episode_id), "scene_id": str(ep.scene_id)}


def probe_for(envs: Any) -> EnvProbe:
    """The probe that fits `envs` (duck-typed), or the blind base probe."""
    if hasattr(envs, "topdown") and hasattr(envs, "geodesic_distance"):
        return GridNavProbe(envs)
    if hasattr(envs, "simulators") and hasattr(envs, "current_episodes"):
        return HabitatProbe(envs)
    if hasattr(envs, "current_episodes"):
        return DatasetProbe(envs)
    return EnvProbe()
