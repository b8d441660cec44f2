"""The gridnav family's options (`env.gridnav.*`): a frozen dataclass, each field's rules in its metadata
(ddppo/field_metadata.py `doc`), a `problems()` method for the rules across fields (key names relative to the
section). Kept free of heavy imports: ddppo's config schema is built from it."""

from __future__ import annotations

import dataclasses
from typing import Any

from ddppo.field_metadata import doc


@dataclasses.dataclass(frozen=True)
class GridNavOptions:
    """Built-in PointNav grid world (see envs/gridnav/env.py)."""

    map_size: int = dataclasses.field(default=12, metadata=doc("side of the square map in cells", ge=5,
                                                               hint="walls need room"))
    num_maps: int = dataclasses.field(default=256,
                                      metadata=doc("maps generated per rank (seeded); each episode draws one", gt=0))
    max_room_splits: int = dataclasses.field(default=3,
                                             metadata=doc("recursive wall splits that carve the map into rooms joined "
                                                          "by doors", ge=0))
    door_width: int = dataclasses.field(default=2, metadata=doc("cells per door", gt=0))
    obstacle_density: float = dataclasses.field(default=0.04,
                                                metadata=doc("fraction of free cells turned into furniture-like "
                                                             "obstacles", ge=0, lt=0.5))
    num_headings: int = dataclasses.field(default=4,
                                          metadata=doc("heading increments in a full turn: 4 (90 degree turns) or 8 "
                                                       "(diagonal moves too)", choices=(4, 8),
                                                       hint="moves go to neighbouring cells"))
    num_rays: int = dataclasses.field(default=16, metadata=doc("rays of the egocentric range scan", shape=True, gt=0))
    fov_degrees: float = dataclasses.field(default=360.0,
                                           metadata=doc("field of view of the range scan (360 = all around)", gt=0,
                                                        le=360))
    max_range: float = dataclasses.field(default=6.0,
                                         metadata=doc("range scan and depth camera clip, in cells (depth is divided "
                                                      "by it)", gt=0))
    success_distance: float = dataclasses.field(default=0.5,
                                                metadata=doc("STOP within this geodesic distance (cells) is a success",
                                                             gt=0))
    max_episode_steps: int = dataclasses.field(default=100,
                                               metadata=doc("time limit (a truncation, not a termination)", gt=0))
    min_geodesic: float = dataclasses.field(default=2.0, metadata=doc("minimum start->goal geodesic distance (cells)",
                                                                      ge=0))
    goals_per_map: int = dataclasses.field(default=32,
                                           metadata=doc("goal cells per map with precomputed geodesic distance fields",
                                                        gt=0))
    slack_reward: float = dataclasses.field(default=-0.01, metadata=doc("reward added every step"))
    success_reward: float = dataclasses.field(default=2.5, metadata=doc("reward for a successful STOP"))
    camera: str = dataclasses.field(default="none",
                                    metadata=doc("what the agent sees instead of the range scan: none (the "
                                                 "num_rays scan as `depth` (num_rays,)) | depth (a depth image "
                                                 "`depth` (H, W, 1)) | rgb (a colour image `rgb` (H, W, 3) uint8) "
                                                 "| rgbd (both); a first-person view ray-cast per image column "
                                                 "(envs/gridnav/camera.py)", shape=True,
                                                 choices=("none", "depth", "rgb", "rgbd")))
    camera_size: Any = dataclasses.field(default_factory=lambda: [64, 64],
                                         metadata=doc("camera image size in pixels: [height, width], or one int for "
                                                      "a square image", shape=True))
    camera_fov: float = dataclasses.field(default=90.0,
                                          metadata=doc("camera horizontal field of view in degrees (a pinhole "
                                                       "camera: square pixels, so the vertical field follows from "
                                                       "the image's aspect)", gt=0, lt=180))
    camera_depth_dtype: str = dataclasses.field(default="float32",
                                                metadata=doc("dtype of the depth image: float32 in [0, 1] or uint8 "
                                                             "(0-255, a quarter of the rollout memory); depth is "
                                                             "divided by max_range and clipped", shape=True,
                                                             choices=("float32", "uint8")))
    goal_sensor: bool = dataclasses.field(default=True,
                                          metadata=doc("observe the goal vector `pointgoal`; false: the goal must be "
                                                       "found by sight (an ObjectNav of the grid: use camera=rgb, "
                                                       "where the goal is a red pillar)", shape=True))
    goal_visible_steps: int = dataclasses.field(default=0,
                                                metadata=doc("a memory task: >0 shows `pointgoal` for the first this "
                                                             "many steps of an episode only (zeros afterwards), so "
                                                             "only a policy with memory can reach the goal; 0 = "
                                                             "always shown", ge=0))

    @property
    def camera_shape(self) -> tuple[int, int]:
        """(height, width) of the camera image (camera_size as given: an int or [height, width])."""
        size = self.camera_size
        if isinstance(size, int) and not isinstance(size, bool):
            return size, size
        return int(size[0]), int(size[1])

    def problems(self) -> list[str]:
        out = []
        size = self.camera_size
        square = isinstance(size, int) and not isinstance(size, bool)
        pair = isinstance(size, (list, tuple)) and len(size) == 2 and all(
            isinstance(v, int) and not isinstance(v, bool) for v in size)
        if not (square or pair) or not all(1 <= v <= 1024 for v in ([size] if square else size if pair else [0])):
            out.append(f"camera_size={size!r} must be an int or [height, width], each in [1, 1024] pixels "
                       "(e.g. 64 or [48, 64])")
        if self.goal_visible_steps and not self.goal_sensor:
            out.append(f"goal_visible_steps={self.goal_visible_steps} needs goal_sensor=true (it hides the goal "
                       "vector after that many steps; without the sensor there is none to show)")
        if not self.goal_sensor and self.camera not in ("rgb", "rgbd"):
            out.append(f"goal_sensor=false with camera={self.camera!r}: the goal is then nowhere in the "
                       "observation; use camera=rgb or rgbd (the goal is a red pillar) or goal_sensor=true")
        return out

