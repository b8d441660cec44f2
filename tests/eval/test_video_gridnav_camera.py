"""Eval videos of gridnav with its camera: the camera's images are drawn as images (not as a range scan), and
without the goal sensor no goal arrow is read from an observation that has none."""

from __future__ import annotations

from ddppo.envs.base import EnvSpec
from ddppo.envs.gridnav.env import GridNav
from ddppo.envs.gridnav.options import GridNavOptions
from ddppo.eval.probes import probe_for
from ddppo.eval.video import FrameRenderer


def first(obs):
    return {k: v[0] for k, v in obs.items()}


def test_camera_images_are_drawn_as_images_and_no_goal_without_the_sensor():
    env = GridNav(GridNavOptions(num_maps=2, camera="rgbd", camera_size=16, goal_sensor=False),
                  EnvSpec(num_envs=1, seed=0))
    obs = first(env.reset())
    probe = probe_for(env)
    assert probe.scan() is None and probe.ego_goal(obs) is None
    renderer = FrameRenderer(probe, list(obs))
    assert renderer.scan_key is None and set(renderer.obs_axes) == {"rgb", "depth"}


def test_the_range_scan_is_still_drawn_as_a_scan():
    env = GridNav(GridNavOptions(num_maps=2), EnvSpec(num_envs=1, seed=0))
    obs = first(env.reset())
    probe = probe_for(env)
    assert probe.scan() is not None and probe.ego_goal(obs) is not None
    assert FrameRenderer(probe, list(obs)).scan_key == "depth"
