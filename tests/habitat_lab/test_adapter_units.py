"""The habitat-lab adapter's pure parts, without habitat-lab: spaces, actions, measures, the episode shares."""

from __future__ import annotations

import dataclasses

import gymnasium
import numpy as np
import pytest
import torch

from ddppo.envs.base import EnvError
from ddppo.field_metadata import section_problems
from ddppo.envs.habitat_lab.env import scene_share
from ddppo.envs.habitat_lab.options import HabitatLabOptions
from ddppo.envs.habitat_lab.spaces import ActionMap, convert_observation_space, scalar_metrics
from ddppo.envs.registry import families, section_for

Box, Discrete, Dict = gymnasium.spaces.Box, gymnasium.spaces.Discrete, gymnasium.spaces.Dict


class EmptySpace(gymnasium.spaces.Space):
    """Stands in for habitat-lab's EmptySpace (an action without arguments); read by class name."""


def nav_obs_space() -> Dict:
    return Dict({"depth": Box(0.0, 1.0, (8, 6, 1), np.float32), "rgb": Box(0, 255, (8, 6, 3), np.uint8),
                 "pointgoal_with_gps_compass": Box(-np.inf, np.inf, (2,), np.float32),
                 "objectgoal": Box(0, 5, (1,), np.int64), "compass": Box(-np.pi, np.pi, (1,), np.float64),
                 "episode_steps": Box(0, 10 ** 9, (1,), np.int64)})


def test_observations_map_to_encoder_kinds():
    space, convert = convert_observation_space(nav_obs_space())
    assert space["depth"] == Box(0.0, 1.0, (8, 6, 1), np.float32)
    assert space["rgb"].dtype == np.uint8 and space["rgb"].shape == (8, 6, 3)
    assert space["objectgoal"] == Discrete(6)  # a category: embedded by the policy
    assert space["compass"].dtype == np.float32
    assert isinstance(space["episode_steps"], Box)  # too wide a range to be a category: a number
    obs = convert({"depth": np.ones((8, 6, 1)), "rgb": np.full((8, 6, 3), 7, np.uint8),
                   "pointgoal_with_gps_compass": np.array([1.5, -0.5]), "objectgoal": np.array([4]),
                   "compass": np.array([0.25]), "episode_steps": np.array([3])})
    assert obs["objectgoal"].dtype == np.int64 and obs["objectgoal"].shape == () and int(obs["objectgoal"]) == 4
    assert obs["depth"].dtype == np.float32 and obs["rgb"].dtype == np.uint8
    assert all(space[k].contains(v) for k, v in obs.items())


def test_category_offset_by_the_box_low():
    space, convert = convert_observation_space(Dict({"goal": Box(3, 9, (1,), np.int64)}))
    assert space["goal"] == Discrete(7)
    assert int(convert({"goal": np.array([3])})["goal"]) == 0 and int(convert({"goal": np.array([9])})["goal"]) == 6


def test_discrete_actions_follow_the_task_order_not_the_sorted_space():
    names = ["STOP", "MOVE_FORWARD", "TURN_LEFT", "TURN_RIGHT"]
    space = Dict({n: EmptySpace() for n in names})  # habitat-lab's ActionSpace sorts its keys
    amap = ActionMap(names, space)
    assert amap.space == Discrete(4)
    assert [amap.to_habitat(np.array([i]))["action"] for i in range(4)] == names
    with pytest.raises(ValueError):
        amap.to_habitat(np.array([4]))


def test_one_action_with_box_arguments_is_a_flat_box():
    args = Dict({"linear_velocity": Box(-1.0, 1.0, (1,), np.float32),
                 "angular_velocity": Box(-2.0, 2.0, (1,), np.float32)})
    amap = ActionMap(["VELOCITY_CONTROL"], Dict({"VELOCITY_CONTROL": args}))
    assert amap.space == Box(np.array([-2.0, -1.0], np.float32), np.array([2.0, 1.0], np.float32))
    step = amap.to_habitat(np.array([5.0, 0.5]))  # sorted argument order: angular, then linear; clipped
    assert step["action"] == "VELOCITY_CONTROL"
    assert step["action_args"] == {"angular_velocity": 2.0, "linear_velocity": 0.5}  # scalars, as habitat-lab's


def test_mixed_discrete_and_continuous_actions_are_refused():
    args = Dict({"v": Box(-1.0, 1.0, (1,), np.float32)})
    with pytest.raises(EnvError, match="take arguments"):
        ActionMap(["STOP", "VELOCITY_CONTROL"], Dict({"STOP": EmptySpace(), "VELOCITY_CONTROL": args}))


def test_scalar_measures_are_kept_maps_dropped():
    metrics = {"success": True, "spl": np.float64(0.5), "softspl": 0.75, "distance_to_goal": np.float32(1.25),
               "collisions": {"count": 3, "is_collision": False}, "top_down_map": {"map": np.zeros((4, 4))},
               "nan": float("nan"), "name": "x"}
    out = scalar_metrics(metrics)
    assert out == {"success": 1.0, "spl": 0.5, "softspl": 0.75, "distance_to_goal": 1.25, "collisions_count": 3.0,
                   "collisions_is_collision": 0.0}


@dataclasses.dataclass
class Ep:
    episode_id: str
    scene_id: str


@pytest.mark.parametrize("num_scenes,ranks,workers,envs", [(3, 2, 2, 2), (8, 2, 2, 3), (1, 2, 1, 2), (5, 1, 1, 4)])
def test_every_episode_in_exactly_one_env_of_one_worker_of_one_rank(num_scenes, ranks, workers, envs):
    """The share logic of HabitatLabVecEnv (scenes per (rank, worker), then episodes per env), counted."""
    from ddppo.envs.scenes.dataset import partition

    by_scene = {f"s{k}": [Ep(f"{k}-{j}", f"s{k}") for j in range(7 + k)] for k in range(num_scenes)}
    scenes = sorted(by_scene)
    seen: list[str] = []
    groups = ranks * workers
    for group in range(groups):
        mine, sharing, place = scene_share(scenes, groups, group)
        episodes = [ep for s in mine for ep in by_scene[s]]
        if sharing > 1:
            episodes = [episodes[k] for k in partition(episodes, sharing, place)]
        for i in range(envs):
            seen += [episodes[k].episode_id for k in partition(episodes, envs, i)]
    everything = [ep.episode_id for s in scenes for ep in by_scene[s]]
    assert sorted(seen) == sorted(everything)  # each exactly once


def test_options_section_registered_and_problems_named():
    assert section_for("habitat_lab") == "habitat_lab" and families()["habitat_lab"].options is HabitatLabOptions
    problems = section_problems(HabitatLabOptions(overrides=["NOEQUALS", 3], gpu_device_id=-3, max_episode_steps=-1))
    text = "; ".join(problems)
    assert "config=''" in text and "KEY=VALUE" in text and "gpu_device_id=-3" in text
    assert "max_episode_steps=-1" in text
    assert not section_problems(HabitatLabOptions(config="x.yaml", overrides=["A.B=1"]))
    # Hydra's deletion (habitat-lab 0.3.x: drop an action of the task config) has no '=' and is an override too
    assert not section_problems(HabitatLabOptions(config="x.yaml", overrides=["~habitat.task.actions.stop", "a=b"]))
    assert "KEY=VALUE" in "; ".join(section_problems(HabitatLabOptions(config="x.yaml", overrides=["~"])))


def test_missing_habitat_lab_is_one_clear_error(monkeypatch):
    import builtins

    from ddppo.envs.habitat_lab import compat

    real_import = builtins.__import__

    def no_habitat(name, *args, **kwargs):
        if name == "habitat" or name.startswith("habitat."):
            raise ImportError("No module named 'habitat'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_habitat)
    with pytest.raises(EnvError, match="env.name=habitat_lab needs habitat-lab.*install habitat-lab"):
        compat.import_habitat()


def test_policy_embeds_a_discrete_observation():
    from ddppo.config import PolicyConfig
    from ddppo.model.encoders import EmbeddingEncoder
    from ddppo.model.policy import Policy

    space, _ = convert_observation_space(nav_obs_space())
    policy = Policy(space, Discrete(4), PolicyConfig(hidden_size=16, rnn_type="gru", rnn_layers=1))
    assert isinstance(policy.encoders["objectgoal"], EmbeddingEncoder)
    n = 3
    obs = {k: torch.as_tensor(np.stack([s.sample() for _ in range(n)])).to(
        torch.uint8 if s.dtype == np.uint8 else torch.float32) for k, s in space.spaces.items()}
    obs["objectgoal"] = torch.tensor([0.0, 5.0, 5.0])
    action, logp, value, hidden = policy.act(obs, policy.initial_memory(n), torch.ones(n))
    assert action.shape == (n,) and torch.isfinite(value).all()
    feats = policy.encoders["objectgoal"](obs["objectgoal"])
    assert torch.equal(feats[1], feats[2]) and not torch.equal(feats[0], feats[1])  # same category, same code
