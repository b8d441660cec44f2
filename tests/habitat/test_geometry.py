import math

import numpy as np
import pytest

from ddppo.envs.scenes.geometry import (forward_vector, polar_in_agent_frame, quat_from_yaw, quat_multiply, quat_rotate,
                                   wrap_angle, yaw_from_quat)


def test_identity_faces_minus_z_and_left_turn_is_positive_yaw():
    assert np.allclose(forward_vector(quat_from_yaw(0.0)), [0, 0, -1])
    assert np.allclose(forward_vector(quat_from_yaw(math.pi / 2)), [-1, 0, 0])  # turned left: facing -X


@pytest.mark.parametrize("yaw", [0.0, 0.3, -1.2, 3.0])
def test_yaw_round_trip_and_composition(yaw):
    assert yaw_from_quat(quat_from_yaw(yaw)) == pytest.approx(wrap_angle(yaw))
    q = quat_multiply(quat_from_yaw(yaw), quat_from_yaw(0.5))
    assert yaw_from_quat(q) == pytest.approx(wrap_angle(yaw + 0.5))


def test_quat_rotate_matches_rotation_matrix():
    yaw = 0.7
    r = np.array([[math.cos(yaw), 0, math.sin(yaw)], [0, 1, 0], [-math.sin(yaw), 0, math.cos(yaw)]])
    v = np.array([0.3, -1.0, 2.0])
    assert np.allclose(quat_rotate(quat_from_yaw(yaw), v), r @ v)


def test_pointgoal_polar_in_agent_frame():
    pos = np.array([1.0, 0.0, 1.0])
    ahead = polar_in_agent_frame(pos, quat_from_yaw(0.0), pos + [0, 0, -2])
    assert ahead == pytest.approx([2.0, 0.0], abs=1e-6)
    left = polar_in_agent_frame(pos, quat_from_yaw(0.0), pos + [-1, 0.5, 0])  # height ignored
    assert left == pytest.approx([1.0, math.pi / 2], abs=1e-6)
    # after turning left by 90 degrees the same point is straight ahead
    assert polar_in_agent_frame(pos, quat_from_yaw(math.pi / 2), pos + [-1, 0, 0]) == pytest.approx([1, 0], abs=1e-6)
    right_behind = polar_in_agent_frame(pos, quat_from_yaw(0.0), pos + [1, 0, 1])
    assert right_behind[1] == pytest.approx(-3 * math.pi / 4, abs=1e-6)
