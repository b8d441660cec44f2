"""The simulator boundary: what the PointNav task (envs/habitat/) and the episode generators need from a simulator.

Two implementations: `ddppo.envs.scenes.sim.HabitatSim` (habitat-sim, the only
module that imports it) and `ddppo.envs.scenes.gridsim.GridSim` (a 2-D double
that reads a generated scene's floor plan, for tests and demos without
habitat-sim). Both are built from a `SimSettings` by `ddppo.envs.scenes.backends.make_simulator`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol

import numpy as np

# Action index -> name. Same order as habitat's HabitatSimActions.
STOP, MOVE_FORWARD, TURN_LEFT, TURN_RIGHT = 0, 1, 2, 3
ACTIONS = ("stop", "move_forward", "turn_left", "turn_right")


@dataclasses.dataclass(frozen=True)
class SimSettings:
    """Everything a simulator needs besides the scene."""

    depth_width: int = 128
    depth_height: int = 128
    rgb: bool = False
    rgb_width: int = 128
    rgb_height: int = 128
    hfov: float = 90.0  # degrees
    sensor_height: float = 1.25
    agent_height: float = 1.5
    agent_radius: float = 0.1
    forward_step: float = 0.25
    turn_angle: float = 10.0  # degrees
    allow_sliding: bool = True
    gpu_device_id: int = -1
    seed: int = 0
    require_navmesh: bool = True  # a scene without <scene>.navmesh is an error (else it is computed)
    depth_sensor: bool = True  # render depth (habitat-sim only computes a navmesh when some sensor exists)

    @classmethod
    def from_options(cls, options: Any, *, gpu_device_id: int, seed: int) -> "SimSettings":
        """From an env.habitat section (ddppo.envs.habitat.options.HabitatOptions: read by name, not imported, so
        the simulators stay below the environment built on them)."""
        return cls(
            depth_width=options.depth_width, depth_height=options.depth_height, rgb=options.rgb,
            rgb_width=options.rgb_width, rgb_height=options.rgb_height, hfov=options.hfov,
            sensor_height=options.sensor_height, agent_height=options.agent_height,
            agent_radius=options.agent_radius, forward_step=options.forward_step,
            turn_angle=options.turn_angle, allow_sliding=options.allow_sliding,
            gpu_device_id=gpu_device_id, seed=seed,
        )


class NavSimulator(Protocol):
    """One agent in one scene. Positions are world (x, y, z), rotations [x, y, z, w]."""

    scene_path: str  # the loaded scene ("" before the first load_scene)

    def load_scene(self, scene_path: str) -> None:
        """Switch to the scene (a .glb with `<scene>.navmesh` next to it); no-op if already loaded."""
        ...

    def seed(self, seed: int) -> None:
        """Seed point sampling."""
        ...

    def set_agent_pose(self, position: np.ndarray, rotation: np.ndarray) -> None: ...

    def agent_pose(self) -> tuple[np.ndarray, np.ndarray]:
        """(position (3,), rotation (4,) [x, y, z, w]) as float64 arrays."""
        ...

    def observe(self) -> dict[str, np.ndarray]:
        """Raw sensors: "depth" (H, W) float32 metres; "rgb" (H, W, 3) uint8 if enabled."""
        ...

    def step(self, action: str) -> tuple[dict[str, np.ndarray], bool]:
        """Apply "move_forward", "turn_left" or "turn_right"; returns (observe(), collided)."""
        ...

    def sample_navigable_point(self) -> np.ndarray: ...

    def is_navigable(self, point: np.ndarray) -> bool: ...

    def snap_point(self, point: np.ndarray) -> np.ndarray:
        """The closest navigable point (NaNs if there is none)."""
        ...

    def geodesic_distance(self, start: np.ndarray, end: np.ndarray) -> float:
        """Shortest navigable path length; inf if `end` is unreachable from `start`."""
        ...

    def shortest_path(self, start: np.ndarray, end: np.ndarray) -> list[np.ndarray]:
        """Corner points of the shortest path, from start to end; [] if unreachable."""
        ...

    def topdown_map(self, height: float) -> tuple[np.ndarray, tuple[float, float, float, float]]:
        """(blocked (rows, cols) bool, extent (x_left, x_right, z_bottom, z_top)) of the loaded scene's
        navigable floor at `height`, rows running from z_top (row 0) down to z_bottom, for map views."""
        ...

    def close(self) -> None: ...
