"""Options of the habitat-lab environment (env.habitat_lab.*): a habitat-lab task config plus overrides.

The task (sensors, actions, measures, episode limit, dataset) is habitat-lab's own, from its config file;
these options add what ddppo decides: which reward the measures make, how episodes are shared out, and
the renderer device.
"""

from __future__ import annotations

import dataclasses

from ddppo.field_metadata import doc
from ddppo.envs.habitat.options import episode_split_field, scene_costs_field, scene_costs_problem


def _override_problem(item: object) -> str | None:
    """None for KEY=VALUE, or Hydra's deletion ~KEY (habitat-lab 0.3.x: drop an action or a measure of the task
    config)."""
    if isinstance(item, str) and item.startswith("~"):
        ok = len(item) > 1 and not item.startswith("~=")
    else:
        ok = isinstance(item, str) and "=" in item and not item.startswith("=")
    return None if ok else ("must be KEY=VALUE strings (e.g. SIMULATOR.TURN_ANGLE=30; with 0.3.x also Hydra's ~KEY, "
                            "which deletes a key or defaults entry)")


@dataclasses.dataclass(frozen=True)
class HabitatLabOptions:
    """Any habitat-lab task (see envs/habitat_lab/)."""

    config: str = dataclasses.field(default="",
                                    metadata=doc("habitat-lab task config file (0.2.x: yacs YAML, e.g. "
                                                 "configs/tasks/pointnav.yaml of a habitat-lab checkout; 0.3.x: a "
                                                 "Hydra config, a path or one under habitat/config, e.g. "
                                                 "benchmark/nav/pointnav/pointnav_habitat_test.yaml); on 0.3.x a "
                                                 "file X.yaml with X_v03.yaml beside it means X_v03.yaml (the shipped "
                                                 "configs/habitat_lab/*_gen_task.yaml have such twins)",
                                                 required="a habitat-lab task config file (e.g. "
                                                          "configs/habitat_lab/pointnav_gen_task.yaml)"))
    overrides: list = dataclasses.field(default_factory=list,
                                        metadata=doc("habitat-lab config overrides, KEY=VALUE each, in the keys of "
                                                     "the installed version (0.2.x: SIMULATOR.AGENT_0.SENSORS="
                                                     "[DEPTH_SENSOR]; 0.3.x: habitat.environment.max_episode_steps="
                                                     "200, or Hydra's ~KEY to delete a key)", each=_override_problem))
    dataset: str = dataclasses.field(default="",
                                     metadata=doc("the dataset's data path with {split} (DATASET.DATA_PATH / "
                                                  "habitat.dataset.data_path); empty = the task config's"))
    max_episode_steps: int = dataclasses.field(default=0,
                                               metadata=doc("episode step limit, set in the installed version's "
                                                            "key (ENVIRONMENT.MAX_EPISODE_STEPS / habitat.environment."
                                                            "max_episode_steps), after the overrides; 0 = the task "
                                                            "config's", ge=0, hint="0 = the task config's limit"))
    episode_split: str = episode_split_field()
    scene_costs: str = scene_costs_field()
    split: str = dataclasses.field(default="", metadata=doc("dataset split; empty = the task config's"))
    scenes_dir: str = dataclasses.field(default="", metadata=doc("scenes root; empty = the task config's"))
    reward_measure: str = dataclasses.field(default="distance_to_goal",
                                            metadata=doc("measure whose decrease each step is the dense reward "
                                                         "('' = none)"))
    success_measure: str = dataclasses.field(default="success",
                                             metadata=doc("measure that is 1 on success (rewarded at the episode's "
                                                          "end)", required="a measure (e.g. success)"))
    slack_reward: float = dataclasses.field(default=-0.01, metadata=doc("reward added every step"))
    success_reward: float = dataclasses.field(default=2.5, metadata=doc("reward for a successful episode"))
    failed_stop_reward: float = dataclasses.field(default=0.0,
                                                  metadata=doc("reward when the task ends the episode (STOP) without "
                                                               "success; < 0 keeps a policy that cannot yet find the "
                                                               "goal from stopping at once (e.g. ImageNav)"))
    shuffle: bool = dataclasses.field(default=True,
                                      metadata=doc("shuffle each env's episodes every pass (grouped by scene, seeded)"))
    gpu_device_id: int = dataclasses.field(default=-2,
                                           metadata=doc("renderer (SIMULATOR.HABITAT_SIM_V0.GPU_DEVICE_ID): -2 = the "
                                                        "rank's GPU when training on CUDA, else -1; -1 = software "
                                                        "(required on CPU for habitat-sim 0.2.2); N = CUDA device N",
                                                        ge=-2, hint="-2 = local GPU, -1 = CPU rendering"))

    def problems(self) -> list[str]:
        """What one field's metadata cannot say: the rule across episode_split and scene_costs."""
        return scene_costs_problem("habitat_lab", self.episode_split, self.scene_costs)
