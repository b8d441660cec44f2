"""The synthetic family's options (`env.synthetic.*`): a frozen dataclass, each field's rules in its metadata
(ddppo/field_metadata.py `doc`). Kept free of heavy imports: ddppo's config schema is built from it."""

from __future__ import annotations

import dataclasses

from ddppo.field_metadata import doc


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
