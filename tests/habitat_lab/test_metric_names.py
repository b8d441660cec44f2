"""train/<name> and eval/<name> name the same metrics (issue 33, item 5 of the review).

habitat-lab's dict measures are reported flattened (`collisions` {count, is_collision} -> `collisions_count`,
`collisions_is_collision`). Eval summarises every metric an episode reports under its own name, but training
aggregates only the names the env declares at start, and the env declared the measures' uuids and ddppo's
aliases only: `collisions_count` reached eval/ but not train/ (only its alias `collisions` did). Run through
HabitatLabVecEnv on a stand-in of habitat-lab's API (no habitat-lab needed), then through training's tally and
eval's summary.
"""

from __future__ import annotations

import types

import gymnasium
import numpy as np

from ddppo.envs.base import EnvSpec
from ddppo.envs.habitat_lab.env import HabitatLabVecEnv
from ddppo.envs.habitat_lab.options import HabitatLabOptions
from ddppo.eval.stats import METRICS, summarize_episodes
from ddppo.rollout.episode_metrics import EpisodeTally, env_metric_names


class EmptySpace(gymnasium.spaces.Space):
    """Stands in for habitat-lab's EmptySpace (an action without arguments); read by class name."""


class _Env:
    """A habitat-lab Env's surface as HabitatLabVecEnv uses it: STOP ends an episode; dict and scalar measures."""

    def __init__(self):
        self.observation_space = gymnasium.spaces.Dict({"gps": gymnasium.spaces.Box(-1.0, 1.0, (2,), np.float32)})
        self.action_space = gymnasium.spaces.Dict({"STOP": EmptySpace(), "MOVE_FORWARD": EmptySpace()})
        self.task = types.SimpleNamespace(actions={"STOP": None, "MOVE_FORWARD": None}, is_episode_active=True,
                                          measurements=types.SimpleNamespace(measures=dict.fromkeys(
                                              ("distance_to_goal", "success", "spl", "softspl", "collisions"))))
        self.current_episode, self.episode_over, self._metrics = None, False, None

    def reset(self):
        self.episode_over, self.task.is_episode_active = False, True
        self._metrics = {"distance_to_goal": 2.0, "success": 0.0, "spl": 0.0, "softspl": 0.0,
                         "collisions": {"count": 0, "is_collision": False}}
        return {"gps": np.zeros(2, np.float32)}

    def step(self, action):
        stop = action["action"] == "STOP"
        self._metrics = {**self._metrics, "distance_to_goal": 1.5, "softspl": 0.25,
                         "collisions": {"count": 2, "is_collision": not stop}}
        self.episode_over, self.task.is_episode_active = stop, not stop
        return {"gps": np.zeros(2, np.float32)}

    def get_metrics(self):
        return self._metrics

    def close(self):
        pass


class _Api:
    label = "habitat-lab stand-in"

    def __init__(self, root):
        self.root = root

    def load_config(self, path, overrides):
        return {"data_path": str(self.root / "{split}.json.gz"), "split": "val", "scenes_dir": str(self.root)}

    def get(self, cfg, key):
        return cfg.get(key)

    def replace(self, cfg, **values):
        return {**cfg, **values}

    def scenes_to_load(self, cfg):
        return ["a"]

    def dataset_class(self, cfg):
        return types.SimpleNamespace(scene_from_scene_path=lambda path: "a")

    def make_dataset(self, cfg):
        scene = str(self.root / "a.glb")
        return types.SimpleNamespace(episodes=[types.SimpleNamespace(episode_id=str(k), scene_id=scene)
                                               for k in range(4)])

    def make_env(self, cfg, dataset):
        return _Env()


def test_every_metric_eval_reports_is_one_training_aggregates_under_the_same_name(tmp_path):
    (tmp_path / "val.json.gz").write_text("")
    (tmp_path / "a.glb").write_text("")
    env = HabitatLabVecEnv(HabitatLabOptions(config="task.yaml"), EnvSpec(num_envs=2, seed=0), api=_Api(tmp_path))
    try:
        env.reset()
        env.step(np.array([1, 1]))
        episodes = env.step(np.array([0, 0])).episodes  # STOP: both end
    finally:
        env.close()
    assert {"collisions_count", "collisions_is_collision", "collisions", "softspl", "soft_spl"} <= set(episodes[0].metrics)
    names = env_metric_names(env)  # training's columns: train/<name> (return -> reward, length -> episode_length)
    tally = EpisodeTally(names)
    sums, counts = tally.zeros()
    tally.add(episodes, sums, counts)
    train = {METRICS.get(n, (n,))[0] for n, c in zip(names, counts) if c > 0}
    evaluated = set(summarize_episodes([{"metrics": e.metrics} for e in episodes]))
    assert evaluated == train, f"eval only: {evaluated - train}; train only: {train - evaluated}"
    assert counts[names.index("collisions_count")] == 2 and sums[names.index("collisions_count")] == 4.0
