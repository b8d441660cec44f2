"""Option dataclasses, one per environment family (the `env.<section>` config keys).

Kept free of heavy imports: `ddppo.config` builds its schema from these.
Each class has `problems()`, returning human-readable problems with its values
(key names relative to the section), so the trainer can report them all at once.
"""

from __future__ import annotations

import dataclasses

from ddppo.envs.fields import doc
from ddppo.envs.habitat.options import HabitatOptions
from ddppo.envs.habitat_lab.options import HabitatLabOptions

__all__ = ["GridNavOptions", "GymOptions", "HabitatLabOptions", "HabitatOptions", "SyntheticOptions"]


@dataclasses.dataclass
class GridNavOptions:
    """Built-in PointNav grid world (see envs/gridnav.py)."""

    map_size: int = dataclasses.field(default=12, metadata=doc("side of the square map in cells"))
    num_maps: int = dataclasses.field(default=256,
                                      metadata=doc("maps generated per rank (seeded); each episode draws one"))
    max_room_splits: int = dataclasses.field(default=3,
                                             metadata=doc("recursive wall splits that carve the map into rooms joined "
                                                          "by doors"))
    door_width: int = dataclasses.field(default=2, metadata=doc("cells per door"))
    obstacle_density: float = dataclasses.field(default=0.04,
                                                metadata=doc("fraction of free cells turned into furniture-like "
                                                             "obstacles"))
    num_headings: int = dataclasses.field(default=4,
                                          metadata=doc("heading increments in a full turn: 4 (90 degree turns) or 8 "
                                                       "(diagonal moves too)"))
    num_rays: int = dataclasses.field(default=16, metadata=doc("rays of the egocentric range scan", shape=True))
    fov_degrees: float = dataclasses.field(default=360.0,
                                           metadata=doc("field of view of the range scan (360 = all around)"))
    max_range: float = dataclasses.field(default=6.0, metadata=doc("range scan clip, in cells"))
    success_distance: float = dataclasses.field(default=0.5,
                                                metadata=doc("STOP within this geodesic distance (cells) is a success"))
    max_episode_steps: int = dataclasses.field(default=100,
                                               metadata=doc("time limit (a truncation, not a termination)"))
    min_geodesic: float = dataclasses.field(default=2.0, metadata=doc("minimum start->goal geodesic distance (cells)"))
    goals_per_map: int = dataclasses.field(default=32,
                                           metadata=doc("goal cells per map with precomputed geodesic distance fields"))
    slack_reward: float = dataclasses.field(default=-0.01, metadata=doc("reward added every step"))
    success_reward: float = dataclasses.field(default=2.5, metadata=doc("reward for a successful STOP"))

    def problems(self) -> list[str]:
        p = []
        for key in ("map_size", "num_maps", "num_rays", "max_episode_steps", "door_width", "goals_per_map"):
            if getattr(self, key) <= 0:
                p.append(f"{key}={getattr(self, key)} must be > 0")
        if self.num_headings not in (4, 8):
            p.append(f"num_headings={self.num_headings} must be 4 or 8 (moves go to neighbouring cells)")
        if not 0 < self.fov_degrees <= 360:
            p.append(f"fov_degrees={self.fov_degrees} must be in (0, 360]")
        if self.map_size < 5:
            p.append(f"map_size={self.map_size} must be >= 5 (walls need room)")
        if not 0.0 <= self.obstacle_density < 0.5:
            p.append(f"obstacle_density={self.obstacle_density} must be in [0, 0.5)")
        if self.max_range <= 0 or self.success_distance <= 0:
            p.append("max_range and success_distance must be > 0")
        if self.max_room_splits < 0 or self.min_geodesic < 0:
            p.append("max_room_splits and min_geodesic must be >= 0")
        return p


@dataclasses.dataclass
class GymOptions:
    """Any gymnasium environment id, through gymnasium.make_vec (env.name: gym:<id>)."""

    vectorization_mode: str = dataclasses.field(default="sync",
                                                metadata=doc("sync (one process) or async (one subprocess per env)"))
    max_episode_steps: int = dataclasses.field(default=0,
                                               metadata=doc("0 = the env's registered limit; >0 overrides it"))
    kwargs: dict = dataclasses.field(default_factory=dict, metadata=doc("passed to gymnasium.make"))

    def problems(self) -> list[str]:
        p = []
        if self.vectorization_mode not in ("sync", "async"):
            p.append(f"vectorization_mode={self.vectorization_mode!r} must be 'sync' or 'async'")
        if self.max_episode_steps < 0:
            p.append(f"max_episode_steps={self.max_episode_steps} must be >= 0")
        return p


@dataclasses.dataclass
class SyntheticOptions:
    """A cheap environment with controllable step cost, for distribution and performance tests."""

    obs_dim: int = dataclasses.field(default=8, metadata=doc("size of the vector observation", shape=True, gt=0,
                                                             le=2**20, hint="each env holds obs_dim x num_actions "
                                                             "floats of rewards"))
    num_actions: int = dataclasses.field(default=4, metadata=doc("discrete actions", shape=True, gt=0, le=2**16))
    episode_length: int = dataclasses.field(default=32, metadata=doc("fixed episode length (a truncation)", gt=0))
    step_sleep_s: float = dataclasses.field(default=0.0, metadata=doc("wall time each batched step sleeps"))
    slow_ranks: list = dataclasses.field(default_factory=list, metadata=doc("ranks whose steps are slower"))
    slow_factor: float = dataclasses.field(default=1.0, metadata=doc("step_sleep_s multiplier on slow_ranks"))
    step_compute: int = dataclasses.field(default=0,
                                          metadata=doc("extra busy work per step (matrix size), to make it CPU bound"))
    step_sleep_sigma: float = dataclasses.field(default=0.0,
                                                metadata=doc("heterogeneous speeds: step_sleep_s is scaled by a factor "
                                                             "exp(N(0, sigma^2)) drawn per batch of envs at each "
                                                             "episode (a skewed, scene-like spread); 0 = none"))
    reset_sleep_s: float = dataclasses.field(default=0.0,
                                             metadata=doc("extra wall time of a batched step in which an episode "
                                                          "ends (a slow reset, e.g. a scene switch)"))
    fail_at_step: int = dataclasses.field(default=0,
                                          metadata=doc(">0: raise an error at this batched step (fault injection for "
                                                       "tests); 0 = never"))
    nan_reward_at_step: int = dataclasses.field(default=0,
                                                metadata=doc(">0: rewards are NaN from this batched step on, for "
                                                             "nan_reward_steps steps (tests)"))
    nan_reward_steps: int = dataclasses.field(default=1,
                                              metadata=doc("how many consecutive batched steps get NaN rewards (with "
                                                           "nan_reward_at_step)"))
    nan_reward_ranks: list = dataclasses.field(default_factory=list,
                                               metadata=doc("ranks that get NaN rewards; empty = all"))
    nan_obs_at_step: int = dataclasses.field(default=0,
                                             metadata=doc(">0: env 0's observation after this batched step is NaN "
                                                          "(tests); 0 = never"))

    def problems(self) -> list[str]:
        p = []
        if self.step_sleep_s < 0 or self.slow_factor <= 0 or self.step_compute < 0:
            p.append("step_sleep_s and step_compute must be >= 0, slow_factor > 0")
        if self.step_sleep_sigma < 0 or self.reset_sleep_s < 0:
            p.append("step_sleep_sigma and reset_sleep_s must be >= 0")
        if self.fail_at_step < 0:
            p.append(f"fail_at_step={self.fail_at_step} must be >= 0")
        if self.nan_obs_at_step < 0:
            p.append(f"nan_obs_at_step={self.nan_obs_at_step} must be >= 0")
        if self.nan_reward_at_step < 0 or self.nan_reward_steps <= 0:
            p.append(f"nan_reward_at_step={self.nan_reward_at_step} must be >= 0 and "
                     f"nan_reward_steps={self.nan_reward_steps} > 0")
        return p
