"""Option dataclasses, one per environment family (the `env.<section>` config keys).

Kept free of heavy imports: `ddppo.config` builds its schema from these. Frozen, like the rest of the config.
Each field's choices, range, item check and whether it is required are in its metadata
(envs/field_metadata.py `doc`), where `ddppo config --explain` shows them and the config checks (or
`section_problems`, for an env built directly) refuse what is outside them; a `problems()` method holds only
rules across fields (key names relative to the section).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ddppo.envs.field_metadata import doc
from ddppo.envs.habitat.options import HabitatOptions
from ddppo.envs.habitat_lab.options import HabitatLabOptions

__all__ = ["GridNavOptions", "GymOptions", "HabitatLabOptions", "HabitatOptions", "SyntheticOptions"]


@dataclasses.dataclass(frozen=True)
class GridNavOptions:
    """Built-in PointNav grid world (see envs/gridnav.py)."""

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
                                                 "(envs/gridcam.py)", shape=True,
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


def _episode_metric_problem(item: object) -> str | None:
    """None for an info key ddppo does not count itself."""
    if isinstance(item, str) and item and item not in ("return", "length"):
        return None
    return "must be info keys other than return and length (ddppo counts those itself)"


def _key_problem(item: object) -> str | None:
    return None if isinstance(item, str) and item else "must be observation key names"


@dataclasses.dataclass(frozen=True)
class GymOptions:
    """Any gymnasium environment id, each env made by gymnasium.make (env.name: gym:<id>)."""

    vectorization_mode: str = dataclasses.field(default="sync",
                                                metadata=doc("sync (stepped in turn in this process) or async "
                                                             "(gymnasium's AsyncVectorEnv: one subprocess per env)",
                                                             choices=("sync", "async")))
    max_episode_steps: int = dataclasses.field(default=0,
                                               metadata=doc("0 = the env's registered limit; >0 overrides it", ge=0))
    kwargs: dict = dataclasses.field(default_factory=dict, metadata=doc("passed to gymnasium.make"))
    episode_metrics: list = dataclasses.field(default_factory=list,
                                              metadata=doc("info keys whose numbers at an episode's last step are "
                                                           "episode metrics (train/<key>, ddppo eval's <key>), e.g. "
                                                           "[success]", each=_episode_metric_problem))
    atari: bool = dataclasses.field(default=False,
                                    metadata=doc("ALE ids (gym:ale_py:ALE/Breakout-v5, pip install ale-py): ale-py's "
                                                 "vectorised AtariVectorEnv with the standard preprocessing (noop "
                                                 "reset, FIRE reset, frame skip 4 with max-pooling, 84x84 grayscale, "
                                                 "4 stacked frames); the learner gets the rewards' signs and a "
                                                 "termination at each lost life, while episodes, their returns and "
                                                 "ddppo eval are whole games; env.gym.kwargs go to AtariVectorEnv "
                                                 "(e.g. {repeat_action_probability: 0.0})", shape=True))
    drop_keys: list = dataclasses.field(default_factory=list,
                                        metadata=doc("keys of a Dict observation to leave out (gymnasium's "
                                                     "FilterObservation), e.g. [mission] for MiniGrid's mission "
                                                     "string; a key the env lacks is an error naming its keys",
                                                     shape=True, each=_key_problem))


@dataclasses.dataclass(frozen=True)
class SyntheticOptions:
    """A cheap environment with controllable step cost, for distribution and performance tests."""

    obs_dim: int = dataclasses.field(default=8, metadata=doc("size of the vector observation", shape=True, gt=0,
                                                             le=2**20, hint="each env holds obs_dim x num_actions "
                                                             "floats of rewards"))
    num_actions: int = dataclasses.field(default=4, metadata=doc("discrete actions", shape=True, gt=0, le=2**16))
    episode_length: int = dataclasses.field(default=32, metadata=doc("fixed episode length (a truncation)", gt=0))
    step_sleep_s: float = dataclasses.field(default=0.0, metadata=doc("wall time each batched step sleeps", ge=0))
    slow_ranks: list = dataclasses.field(default_factory=list, metadata=doc("ranks whose steps are slower"))
    slow_factor: float = dataclasses.field(default=1.0, metadata=doc("step_sleep_s multiplier on slow_ranks", gt=0))
    step_compute: int = dataclasses.field(default=0,
                                          metadata=doc("extra busy work per step (matrix size), to make it CPU bound",
                                                       ge=0))
    step_sleep_sigma: float = dataclasses.field(default=0.0,
                                                metadata=doc("heterogeneous speeds: step_sleep_s is scaled by a factor "
                                                             "exp(N(0, sigma^2)) drawn per batch of envs at each "
                                                             "episode (a skewed, scene-like spread); 0 = none", ge=0))
    reset_sleep_s: float = dataclasses.field(default=0.0,
                                             metadata=doc("extra wall time of a batched step in which an episode "
                                                          "ends (a slow reset, e.g. a scene switch)", ge=0))
    num_scenes: int = dataclasses.field(default=0,
                                        metadata=doc("scenes, each with its own reward mapping (the same on every "
                                                     "rank) and a one-hot of it appended to the observation, so one "
                                                     "policy must learn a skill per scene; 0 = one mapping per rank "
                                                     "(no scenes)", shape=True, ge=0))
    scene_seed: int = dataclasses.field(default=0, metadata=doc("with num_scenes: seed of the scenes' reward "
                                                                "mappings (the same on every rank)"))
    scene_step_factors: list = dataclasses.field(default_factory=list,
                                                 metadata=doc("with num_scenes: step_sleep_s multiplier of scene s "
                                                              "(entry s mod length; empty = all 1); a batched step "
                                                              "sleeps the mean over its envs (they step in turn)"))
    scene_placement: str = dataclasses.field(default="measured",
                                             metadata=doc("with num_scenes: contiguous (scenes dealt whole in order "
                                                          "over all ranks' envs, as the episode split deals scene "
                                                          "files) | cost (every scene the same env slots, spread so "
                                                          "each rank's summed step cost, known from "
                                                          "scene_step_factors, is as equal as possible; "
                                                          "envs/placement.py) | measured (contiguous until the "
                                                          "trainer has measured the scenes' step times, then spread "
                                                          "by those: env.placement_interval_updates)",
                                                          choices=("contiguous", "cost", "measured")))
    fail_at_step: int = dataclasses.field(default=0,
                                          metadata=doc(">0: raise an error at this batched step (fault injection for "
                                                       "tests); 0 = never", ge=0))
    nan_reward_at_step: int = dataclasses.field(default=0,
                                                metadata=doc(">0: rewards are NaN from this batched step on, for "
                                                             "nan_reward_steps steps (tests)", ge=0))
    nan_reward_steps: int = dataclasses.field(default=1,
                                              metadata=doc("how many consecutive batched steps get NaN rewards (with "
                                                           "nan_reward_at_step)", gt=0))
    nan_reward_ranks: list = dataclasses.field(default_factory=list,
                                               metadata=doc("ranks that get NaN rewards; empty = all"))
    nan_obs_at_step: int = dataclasses.field(default=0,
                                             metadata=doc(">0: env 0's observation after this batched step is NaN "
                                                          "(tests); 0 = never", ge=0))
