"""Options of the habitat-sim PointNav environment (env.habitat.*).

Defaults follow the DD-PPO paper (Wijmans et al., 2020) and habitat's PointNav
task: 256x256 depth clipped to 0-10 m, STOP within 0.2 m (geodesic) of the goal,
500-step limit, reward -0.01 per step + decrease in geodesic distance + 2.5 on
success, forward 0.25 m, turns of 10 degrees.
"""

from __future__ import annotations

import dataclasses

from ddppo.envs.fields import doc

BACKENDS = ("habitat", "grid")


@dataclasses.dataclass
class HabitatOptions:
    """habitat-sim PointNav (see envs/habitat/)."""

    dataset: str = dataclasses.field(default="",
                                     metadata=doc("PointNav episodes: a .json.gz file, or a folder with "
                                                  "content/*.json.gz (habitat format)"))
    scenes_dir: str = dataclasses.field(default="data/scene_datasets",
                                        metadata=doc("root that episodes' scene_id paths are relative to"))
    scenes: list = dataclasses.field(default_factory=list,
                                     metadata=doc("only episodes of these scene names (file stem); empty = all"))
    backend: str = dataclasses.field(default="habitat",
                                     metadata=doc("habitat (habitat-sim) | grid (built-in 2-D double of the scene's "
                                                  "floor plan, for tests)"))
    shuffle: bool = dataclasses.field(default=True,
                                      metadata=doc("shuffle each env's episodes every pass (grouped by scene, seeded)"))
    max_episode_steps: int = dataclasses.field(default=500,
                                               metadata=doc("time limit (a truncation, not a termination)"))
    success_distance: float = dataclasses.field(default=0.2,
                                                metadata=doc("STOP within this geodesic distance (m) of the goal is a "
                                                             "success"))
    slack_reward: float = dataclasses.field(default=-0.01, metadata=doc("reward added every step"))
    success_reward: float = dataclasses.field(default=2.5, metadata=doc("reward for a successful STOP"))
    distance_reward_scale: float = dataclasses.field(default=1.0,
                                                     metadata=doc("weight of the per-step decrease in geodesic "
                                                                  "distance"))
    forward_step: float = dataclasses.field(default=0.25, metadata=doc("MOVE_FORWARD distance (m)"))
    turn_angle: float = dataclasses.field(default=10.0, metadata=doc("TURN_LEFT / TURN_RIGHT angle (degrees)"))
    depth_width: int = dataclasses.field(default=256, metadata=doc("depth image width (pixels)"))
    depth_height: int = dataclasses.field(default=256, metadata=doc("depth image height (pixels)"))
    min_depth: float = dataclasses.field(default=0.0, metadata=doc("depth clip minimum (m)"))
    max_depth: float = dataclasses.field(default=10.0, metadata=doc("depth clip maximum (m)"))
    normalize_depth: bool = dataclasses.field(default=True, metadata=doc("map [min_depth, max_depth] to [0, 1]"))
    rgb: bool = dataclasses.field(default=False, metadata=doc("also observe an RGB image (uint8, key \"rgb\")"))
    rgb_width: int = dataclasses.field(default=256, metadata=doc("RGB image width (pixels)"))
    rgb_height: int = dataclasses.field(default=256, metadata=doc("RGB image height (pixels)"))
    hfov: float = dataclasses.field(default=90.0, metadata=doc("horizontal field of view of both cameras (degrees)"))
    sensor_height: float = dataclasses.field(default=1.25, metadata=doc("camera height above the agent's feet (m)"))
    agent_height: float = dataclasses.field(default=1.5,
                                            metadata=doc("agent cylinder height (m); must match the navmesh"))
    agent_radius: float = dataclasses.field(default=0.1,
                                            metadata=doc("agent cylinder radius (m); must match the navmesh"))
    allow_sliding: bool = dataclasses.field(default=True,
                                            metadata=doc("slide along walls on collision instead of stopping"))
    gpu_device_id: int = dataclasses.field(default=-2,
                                           metadata=doc("renderer: -2 = the rank's GPU when training on CUDA, else "
                                                        "-1; -1 = software (Mesa llvmpipe); N = CUDA device N"))

    def problems(self) -> list[str]:
        p = []
        if self.backend not in BACKENDS:
            p.append(f"backend={self.backend!r} must be one of {', '.join(BACKENDS)}")
        if not self.dataset:
            p.append("dataset='' must name a PointNav .json.gz file or a folder with content/*.json.gz "
                     "(make one with `python -m ddppo.envs.scenes.episode_gen`)")
        for key in ("max_episode_steps", "depth_width", "depth_height", "rgb_width", "rgb_height"):
            if getattr(self, key) <= 0:
                p.append(f"{key}={getattr(self, key)} must be > 0")
        for key in ("success_distance", "forward_step", "turn_angle", "agent_height", "agent_radius",
                    "sensor_height"):
            if not getattr(self, key) > 0:
                p.append(f"{key}={getattr(self, key)} must be > 0")
        if not 0 < self.hfov < 180:
            p.append(f"hfov={self.hfov} must be in (0, 180) degrees")
        if not 0 <= self.min_depth < self.max_depth:
            p.append(f"min_depth={self.min_depth}, max_depth={self.max_depth}: need 0 <= min_depth < max_depth")
        if self.gpu_device_id < -2:
            p.append(f"gpu_device_id={self.gpu_device_id} must be >= -2 (-2 = local GPU, -1 = CPU rendering)")
        if not all(isinstance(s, str) and s for s in self.scenes):
            p.append(f"scenes={list(self.scenes)} must be a list of scene names (e.g. [gen_000])")
        return p
