"""A shortest-path follower: the expert that walks each episode's geodesic path.

Works with any `NavSimulator` (habitat-sim or the grid double): it asks for the
shortest path from the agent to the goal, turns until the next path corner is
within half a turn of straight ahead, then moves forward; it calls STOP once
the geodesic distance is within the success radius. Useful as a sanity check
of a scene + dataset (it should reach success 1 and SPL close to 1) and for
imitation data.
"""

from __future__ import annotations

import math

import numpy as np

from ddppo.envs.scenes.geometry import polar_in_agent_frame
from ddppo.envs.scenes.interface import MOVE_FORWARD, STOP, TURN_LEFT, TURN_RIGHT, NavSimulator


class ShortestPathFollower:
    def __init__(self, sim: NavSimulator, success_distance: float = 0.2, turn_angle: float = 10.0):
        self.sim = sim
        self.success_distance = success_distance
        self.half_turn = math.radians(turn_angle) / 2 + 1e-6

    def act(self, goal: np.ndarray) -> int:
        """The next action (index) towards `goal` from the agent's current pose."""
        goal = np.asarray(goal, dtype=np.float64)
        position, rotation = self.sim.agent_pose()
        # a little margin: the distance after STOP is measured from the same pose
        if self.sim.geodesic_distance(position, goal) <= self.success_distance * 0.95:
            return STOP
        path = self.sim.shortest_path(position, goal)
        if len(path) < 2:
            return STOP  # unreachable: nothing better to do
        target = next((p for p in path[1:] if math.hypot(p[0] - position[0], p[2] - position[2]) > 1e-2), path[-1])
        angle = float(polar_in_agent_frame(position, rotation, target)[1])
        if abs(angle) <= self.half_turn:
            return MOVE_FORWARD
        return TURN_LEFT if angle > 0 else TURN_RIGHT
