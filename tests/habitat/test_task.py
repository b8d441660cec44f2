"""PointNav task semantics on the grid double: reward, success, truncation, SPL, sensors."""

import math

import numpy as np
import pytest

from ddppo.envs.scenes.dataset import Episode, Goal
from ddppo.envs.scenes.geometry import quat_from_yaw
from ddppo.envs.scenes.gridsim import GridSim
from ddppo.envs.scenes.interface import MOVE_FORWARD, STOP, TURN_LEFT, TURN_RIGHT, SimSettings
from ddppo.envs.habitat.options import HabitatOptions
from ddppo.envs.habitat.task import GOAL_KEY, PointNavTask


def make_task(room, **kw):
    opt = HabitatOptions(dataset="unused", depth_width=8, depth_height=6, **kw)
    sim = GridSim(SimSettings.from_options(opt, gpu_device_id=-1, seed=0))
    return PointNavTask(sim, opt)


def episode(start, goal, yaw=0.0):
    return Episode("e0", "room.glb", list(start), list(quat_from_yaw(yaw)), [Goal(list(goal), 0.2)],
                   {"geodesic_distance": float(np.linalg.norm(np.subtract(goal, start)))})


def test_forward_reward_is_slack_plus_progress(room):
    task = make_task(room)
    obs = task.reset(episode([0, 0, 1.0], [0, 0, -1.0]), 0, room)
    assert obs[GOAL_KEY] == pytest.approx([2.0, 0.0], abs=1e-5)
    obs, reward, term, trunc, metrics = task.step(MOVE_FORWARD)
    assert reward == pytest.approx(-0.01 + 0.25, abs=1e-6)
    assert obs[GOAL_KEY][0] == pytest.approx(1.75, abs=1e-5)
    assert not term and not trunc and metrics is None
    _, reward, *_ = task.step(TURN_LEFT)
    assert reward == pytest.approx(-0.01, abs=1e-6)
    obs, *_ = task.step(TURN_RIGHT)
    assert obs[GOAL_KEY][1] == pytest.approx(0.0, abs=1e-6)


def test_goal_angle_follows_turns(room):
    task = make_task(room)
    task.reset(episode([0, 0, 0.0], [-1.0, 0, 0.0]), 0, room)  # goal to the left
    obs, *_ = task.step(TURN_LEFT)
    assert obs[GOAL_KEY][1] == pytest.approx(math.radians(80), abs=1e-5)


def test_stop_at_goal_is_success_with_spl_one(room):
    task = make_task(room)
    task.reset(episode([0, 0, 1.0], [0, 0, 0.0]), 0, room)
    total = 0.0
    for _ in range(4):
        _, r, term, _, _ = task.step(MOVE_FORWARD)
        total += r
    obs, r, term, trunc, m = task.step(STOP)
    assert term and not trunc
    assert r == pytest.approx(-0.01 + 2.5)
    assert m["success"] == 1.0 and m["spl"] == pytest.approx(1.0) and m["soft_spl"] == pytest.approx(1.0)
    assert m["distance_to_goal"] == pytest.approx(0.0, abs=1e-6)
    assert m["length"] == 5 and m["collisions"] == 0
    assert m["return"] == pytest.approx(total + r)


def test_stop_far_from_goal_fails_and_soft_spl_counts_progress(room):
    task = make_task(room)
    task.reset(episode([0, 0, 1.0], [0, 0, -1.0]), 0, room)
    task.step(MOVE_FORWARD)
    task.step(MOVE_FORWARD)
    _, r, term, _, m = task.step(STOP)
    assert term and m["success"] == 0.0 and m["spl"] == 0.0
    assert r == pytest.approx(-0.01)
    assert m["distance_to_goal"] == pytest.approx(1.5)
    assert m["soft_spl"] == pytest.approx((1 - 1.5 / 2.0) * 1.0)


def test_spl_penalises_detours(room):
    task = make_task(room)
    task.reset(episode([0, 0, 0.5], [0, 0, 0.0]), 0, room)
    task.step(TURN_LEFT)
    for _ in range(17):
        task.step(TURN_LEFT)  # now facing +Z (away from the goal)
    task.step(MOVE_FORWARD)  # 0.25 away
    for _ in range(18):
        task.step(TURN_LEFT)  # facing the goal again
    for _ in range(3):
        task.step(MOVE_FORWARD)
    *_, m = task.step(STOP)
    assert m["success"] == 1.0
    assert m["spl"] == pytest.approx(0.5 / 1.0, abs=1e-6)  # shortest 0.5 m, walked 1.0 m


def test_time_limit_is_a_truncation(room):
    task = make_task(room, max_episode_steps=3)
    task.reset(episode([0, 0, 1.0], [0, 0, -1.0]), 0, room)
    assert task.step(TURN_LEFT)[3] is False
    assert task.step(TURN_LEFT)[3] is False
    _, _, term, trunc, m = task.step(TURN_LEFT)
    assert trunc and not term and m["success"] == 0.0 and m["length"] == 3


def test_collisions_counted_and_slide(room):
    task = make_task(room)
    task.reset(episode([0, 0, -1.5], [0, 0, 1.5], yaw=0.3), 0, room)  # facing the -Z wall, slightly left
    for _ in range(3):
        task.step(MOVE_FORWARD)
    assert task.state.collisions >= 1
    pos = task.sim.agent_pose()[0]
    assert pos[2] > -1.85  # never inside the (radius-inflated) wall
    assert pos[0] < -0.05  # slid along it


def test_depth_is_normalised_and_shaped(room):
    task = make_task(room, max_depth=10.0)
    obs = task.reset(episode([0, 0, 0.0], [0, 0, 1.0]), 0, room)
    depth = obs["depth"]
    assert depth.shape == (6, 8, 1) and depth.dtype == np.float32
    assert 0.0 <= depth.min() and depth.max() <= 1.0
    # the wall 2 m ahead (inner face at 1.9 m) at the image centre columns, in normalised units
    assert depth[3, 3:5, 0] == pytest.approx(1.9 / 10.0, abs=0.01)
    raw = make_task(room, normalize_depth=False).reset(episode([0, 0, 0.0], [0, 0, 1.0]), 0, room)["depth"]
    assert raw[3, 3:5, 0] == pytest.approx(1.9, abs=0.06)


def test_rgb_optional(room):
    task = make_task(room, rgb=True, rgb_width=5, rgb_height=4)
    obs = task.reset(episode([0, 0, 0.0], [0, 0, 1.0]), 0, room)
    assert obs["rgb"].shape == (4, 5, 3) and obs["rgb"].dtype == np.uint8
