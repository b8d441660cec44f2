"""Options of the habitat-sim PointNav environment (env.habitat.*).

Defaults follow the DD-PPO paper (Wijmans et al., 2020) and habitat's PointNav
task: 256x256 depth clipped to 0-10 m, STOP within 0.2 m (geodesic) of the goal,
500-step limit, reward -0.01 per step + decrease in geodesic distance + 2.5 on
success, forward 0.25 m, turns of 10 degrees.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ddppo.field_metadata import doc

BACKENDS = ("habitat", "grid")


def _scene_name_problem(item: object) -> str | None:
    """None for a scene name: a non-empty string (a scene file's stem)."""
    return None if isinstance(item, str) and item else "must be scene names, non-empty strings (e.g. [gen_000])"


def episode_split_field() -> Any:
    """The field of env.habitat.episode_split and env.habitat_lab.episode_split: both environments deal their
    episode files by one rule (envs/scenes/dataset.group_runs), described once."""
    return dataclasses.field(default="cost", metadata=doc(
        "how the dataset's episodes are dealt to (rank, worker) groups: scenes (whole scenes per group where every "
        "group still has an episode per env; each group reads only its scene files, but a scene's share of the "
        "experience is its groups' share, whatever its share of the episodes) | episodes (every scene's episodes "
        "cut evenly over the groups: a scene's share of the experience follows its share of the episodes; every "
        "group reads every file) | cost (whole scenes placed so every group's summed cost, the scenes' measured "
        "seconds per env step, is as equal as whole scenes allow: preemption then rarely cuts a rank; costs from "
        "scene_costs, or the run directory's scene_costs.json on resume, else every scene alike until measured; "
        "during the run the scenes move by the step times measured so far: env.placement_interval_updates)",
        choices=("scenes", "episodes", "cost")))


def scene_costs_field() -> Any:
    """The field of env.habitat.scene_costs and env.habitat_lab.scene_costs (episode_split=cost)."""
    return dataclasses.field(default="", metadata=doc(
        "with episode_split=cost: a JSON file mapping scene names to seconds per env step (a run's scene_costs.json, "
        "which training writes in its run directory at every checkpoint; scenes it lacks get the median); empty = "
        "the run directory's own where it has one (a resumed run), else every scene alike",
        hint="e.g. runs/first/scene_costs.json"))


def scene_costs_problem(section: str, split: str, costs: str) -> list[str]:
    """A cost file named while the episodes are not placed by cost."""
    if costs and split != "cost":
        return [f"scene_costs={costs} is used only with episode_split=cost (now {split}): set "
                f"env.{section}.episode_split=cost or leave scene_costs empty"]
    return []


@dataclasses.dataclass(frozen=True)
class HabitatOptions:
    """habitat-sim PointNav (see envs/habitat/)."""

    dataset: str = dataclasses.field(default="",
                                     metadata=doc("PointNav episodes: a .json.gz file, or a folder with "
                                                  "content/*.json.gz (habitat format)",
                                                  required="a PointNav .json.gz file or a folder with "
                                                           "content/*.json.gz (make one with `python -m "
                                                           "ddppo.envs.scenes.episode_gen`)"))
    scenes_dir: str = dataclasses.field(default="data/scene_datasets",
                                        metadata=doc("root that episodes' scene_id paths are relative to"))
    scenes: list = dataclasses.field(default_factory=list,
                                     metadata=doc("only episodes of these scene names (file stem); empty = all",
                                                  each=_scene_name_problem))
    episode_split: str = episode_split_field()
    scene_costs: str = scene_costs_field()
    backend: str = dataclasses.field(default="habitat",
                                     metadata=doc("habitat (habitat-sim) | grid (built-in 2-D double of the scene's "
                                                  "floor plan, for tests)", choices=BACKENDS))
    shuffle: bool = dataclasses.field(default=True,
                                      metadata=doc("shuffle each env's episodes every pass (grouped by scene, seeded)"))
    max_episode_steps: int = dataclasses.field(default=500,
                                               metadata=doc("time limit (a truncation, not a termination)", gt=0))
    success_distance: float = dataclasses.field(default=0.2,
                                                metadata=doc("STOP within this geodesic distance (m) of the goal is a "
                                                             "success", gt=0))
    slack_reward: float = dataclasses.field(default=-0.01, metadata=doc("reward added every step"))
    success_reward: float = dataclasses.field(default=2.5, metadata=doc("reward for a successful STOP"))
    distance_reward_scale: float = dataclasses.field(default=1.0,
                                                     metadata=doc("weight of the per-step decrease in geodesic "
                                                                  "distance"))
    forward_step: float = dataclasses.field(default=0.25, metadata=doc("MOVE_FORWARD distance (m)", gt=0))
    turn_angle: float = dataclasses.field(default=10.0, metadata=doc("TURN_LEFT / TURN_RIGHT angle (degrees)", gt=0))
    depth_width: int = dataclasses.field(default=256, metadata=doc("depth image width (pixels)", gt=0))
    depth_height: int = dataclasses.field(default=256, metadata=doc("depth image height (pixels)", gt=0))
    min_depth: float = dataclasses.field(default=0.0, metadata=doc("depth clip minimum (m)", ge=0))
    max_depth: float = dataclasses.field(default=10.0, metadata=doc("depth clip maximum (m)"))
    normalize_depth: bool = dataclasses.field(default=True, metadata=doc("map [min_depth, max_depth] to [0, 1]"))
    rgb: bool = dataclasses.field(default=False, metadata=doc("also observe an RGB image (uint8, key \"rgb\")"))
    rgb_width: int = dataclasses.field(default=256, metadata=doc("RGB image width (pixels)", gt=0))
    rgb_height: int = dataclasses.field(default=256, metadata=doc("RGB image height (pixels)", gt=0))
    hfov: float = dataclasses.field(default=90.0,
                                    metadata=doc("horizontal field of view of both cameras (degrees)", gt=0, lt=180))
    sensor_height: float = dataclasses.field(default=1.25,
                                             metadata=doc("camera height above the agent's feet (m)", gt=0))
    agent_height: float = dataclasses.field(default=1.5,
                                            metadata=doc("agent cylinder height (m); must match the navmesh", gt=0))
    agent_radius: float = dataclasses.field(default=0.1,
                                            metadata=doc("agent cylinder radius (m); must match the navmesh", gt=0))
    allow_sliding: bool = dataclasses.field(default=True,
                                            metadata=doc("slide along walls on collision instead of stopping"))
    gpu_device_id: int = dataclasses.field(default=-2,
                                           metadata=doc("renderer: -2 = the rank's GPU when training on CUDA, else "
                                                        "-1; -1 = software (Mesa llvmpipe); N = CUDA device N", ge=-2,
                                                        hint="-2 = local GPU, -1 = CPU rendering"))

    def problems(self) -> list[str]:
        """What one field's metadata cannot say: the rules across min_depth and max_depth, and across
        episode_split and scene_costs."""
        found = scene_costs_problem("habitat", self.episode_split, self.scene_costs)
        if not self.min_depth < self.max_depth:
            found.append(f"min_depth={self.min_depth}, max_depth={self.max_depth}: need 0 <= min_depth < max_depth")
        return found
