"""Poses in habitat's world frame, in plain numpy.

World frame: +Y up, the floor is the X-Z plane. An agent with identity rotation
faces -Z with +X to its right. Rotations are unit quaternions stored as
[x, y, z, w] (the order of `start_rotation` in habitat's episode files). A yaw
is a rotation about +Y; a positive yaw turns the agent to its left (TURN_LEFT).
"""

from __future__ import annotations

import math

import numpy as np


def quat_from_yaw(yaw: float) -> np.ndarray:
    """Rotation by `yaw` radians about +Y, as [x, y, z, w]."""
    return np.array([0.0, math.sin(yaw / 2), 0.0, math.cos(yaw / 2)])


def quat_conjugate(q: np.ndarray) -> np.ndarray:
    q = np.asarray(q, dtype=np.float64)
    return np.array([-q[0], -q[1], -q[2], q[3]])


def quat_multiply(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton product a*b (apply b, then a)."""
    ax, ay, az, aw = np.asarray(a, dtype=np.float64)
    bx, by, bz, bw = np.asarray(b, dtype=np.float64)
    return np.array([
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
        aw * bw - ax * bx - ay * by - az * bz,
    ])


def quat_rotate(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Rotate vector `v` by unit quaternion `q` ([x, y, z, w])."""
    qx, qy, qz, w = (float(c) for c in q)
    vx, vy, vz = (float(c) for c in v)
    # t = 2 u x v;  v' = v + w t + u x t
    tx, ty, tz = 2 * (qy * vz - qz * vy), 2 * (qz * vx - qx * vz), 2 * (qx * vy - qy * vx)
    return np.array([vx + w * tx + (qy * tz - qz * ty),
                     vy + w * ty + (qz * tx - qx * tz),
                     vz + w * tz + (qx * ty - qy * tx)])


def forward_vector(q: np.ndarray) -> np.ndarray:
    """The world direction an agent with rotation `q` faces."""
    return quat_rotate(q, np.array([0.0, 0.0, -1.0]))


def yaw_from_quat(q: np.ndarray) -> float:
    """Heading (radians, about +Y, 0 = facing -Z) of rotation `q`."""
    f = forward_vector(q)
    return math.atan2(-f[0], -f[2])


def wrap_angle(a: float) -> float:
    """Angle in [-pi, pi)."""
    return (a + math.pi) % (2 * math.pi) - math.pi


def polar_in_agent_frame(position: np.ndarray, rotation: np.ndarray, target: np.ndarray) -> np.ndarray:
    """(distance, angle) of `target` seen from the agent, in the floor plane.

    Distance is Euclidean in X-Z; angle is 0 straight ahead and positive to the
    agent's left (the direction TURN_LEFT rotates), as habitat's
    PointGoalWithGPSCompass sensor in POLAR format.
    """
    local = quat_rotate(quat_conjugate(rotation), np.asarray(target, np.float64) - np.asarray(position, np.float64))
    forward, left = -local[2], -local[0]
    return np.array([math.hypot(forward, left), math.atan2(left, forward)], dtype=np.float32)
