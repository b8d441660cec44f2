"""The PointNav task on one simulator: observations, reward, episode end, metrics.

Follows habitat's PointNav (and the DD-PPO paper):
- actions STOP, MOVE_FORWARD, TURN_LEFT, TURN_RIGHT (indices 0-3);
- observations "depth" (H, W, 1) float32 clipped to [min_depth, max_depth] and
  normalised to [0, 1]; optional "rgb" (H, W, 3) uint8; "pointgoal_with_gps_compass"
  (2,) float32 = (distance, angle) of the goal in the agent's frame (angle
  positive to the left), from the agent's true pose (GPS + compass);
- STOP ends the episode (terminated); success = STOP within `success_distance`
  (geodesic) of the goal; `max_episode_steps` without STOP is a truncation;
- reward = slack_reward + distance_reward_scale * (previous - current geodesic
  distance to the goal) + success_reward on success;
- metrics at the end: success, spl (success * d0 / max(d0, path length)),
  soft_spl ((1 - d/d0 clipped to [0, 1]) * d0 / max(d0, path length)),
  distance_to_goal (geodesic, final), collisions (count), plus return and length.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from ddppo.envs.base import EnvError
from ddppo.envs.scenes.dataset import Episode
from ddppo.envs.scenes.geometry import polar_in_agent_frame
from ddppo.envs.scenes.interface import ACTIONS, STOP, NavSimulator
from ddppo.envs.habitat.options import HabitatOptions

GOAL_KEY = "pointgoal_with_gps_compass"


@dataclasses.dataclass
class EpisodeState:
    """Progress of the running episode (all plain values, for checkpoints)."""

    episode_index: int  # index into the env's episode list
    steps: int = 0
    start_distance: float = 0.0  # geodesic distance from the start (d0)
    distance: float = 0.0  # geodesic distance now
    path_length: float = 0.0  # distance walked (sum of step displacements)
    collisions: int = 0
    total_reward: float = 0.0


class PointNavTask:
    """Drives one `NavSimulator` through PointNav episodes."""

    def __init__(self, sim: NavSimulator, options: HabitatOptions):
        self.sim = sim
        self.opt = options
        self.state: EpisodeState | None = None
        self.episode: Episode | None = None
        self._goal = np.zeros(3)
        self._position = np.zeros(3)

    # ---------------------------------------------------------------- observations
    def _observation(self, raw: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        o = self.opt
        depth = np.clip(raw["depth"], o.min_depth, o.max_depth)
        if o.normalize_depth:
            depth = (depth - o.min_depth) / (o.max_depth - o.min_depth)
        obs = {"depth": depth.astype(np.float32).reshape(o.depth_height, o.depth_width, 1)}
        if o.rgb:
            obs["rgb"] = raw["rgb"].astype(np.uint8).reshape(o.rgb_height, o.rgb_width, 3)
        position, rotation = self.sim.agent_pose()
        obs[GOAL_KEY] = polar_in_agent_frame(position, rotation, self._goal)
        return obs

    # ---------------------------------------------------------------- distances
    def distance_to_goal(self, position: np.ndarray) -> float:
        """Geodesic distance to the nearest goal (Euclidean if the goal is unreachable from here)."""
        best = math.inf
        for g in self.episode.goals:
            best = min(best, self.sim.geodesic_distance(position, np.asarray(g.position, dtype=np.float64)))
        if not math.isfinite(best):
            best = float(np.linalg.norm(np.asarray(self.episode.goals[0].position) - position))
        return best

    # ---------------------------------------------------------------- episode
    def reset(self, episode: Episode, episode_index: int, scene_path: str) -> dict[str, np.ndarray]:
        """Start `episode` (its scene already resolved to `scene_path`)."""
        try:
            self.sim.load_scene(scene_path)
        except EnvError as err:
            raise EnvError(f"episode {episode.episode_id!r} (scene_id {episode.scene_id!r}): {err}") from err
        self.episode = episode
        self._goal = np.asarray(episode.goals[0].position, dtype=np.float64)
        self.sim.set_agent_pose(np.asarray(episode.start_position, np.float64),
                                np.asarray(episode.start_rotation, np.float64))
        self._position = self.sim.agent_pose()[0]
        d0 = self.distance_to_goal(self._position)
        self.state = EpisodeState(episode_index, start_distance=d0, distance=d0)
        return self._observation(self.sim.observe())

    def step(self, action: int) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, float] | None]:
        """(obs, reward, terminated, truncated, metrics if the episode ended else None)."""
        st, o = self.state, self.opt
        if st is None:
            raise RuntimeError("PointNavTask.step before reset")
        action = int(action)
        if not 0 <= action < len(ACTIONS):
            raise ValueError(f"action {action} is not in [0, {len(ACTIONS)})")
        st.steps += 1
        previous = st.distance
        if action == STOP:
            raw = None
        else:
            raw, collided = self.sim.step(ACTIONS[action])
            st.collisions += int(collided)
            position = self.sim.agent_pose()[0]
            st.path_length += float(np.linalg.norm(position - self._position))
            self._position = position
            st.distance = self.distance_to_goal(position)
        terminated = action == STOP
        success = terminated and st.distance <= o.success_distance
        reward = o.slack_reward + o.distance_reward_scale * (previous - st.distance)
        if success:
            reward += o.success_reward
        st.total_reward += reward
        truncated = not terminated and st.steps >= o.max_episode_steps
        obs = self._observation(raw if raw is not None else self.sim.observe())
        metrics = self.metrics(success) if (terminated or truncated) else None
        return obs, float(reward), terminated, truncated, metrics

    def metrics(self, success: bool) -> dict[str, float]:
        st = self.state
        d0 = st.start_distance
        efficiency = d0 / max(d0, st.path_length) if d0 > 0 else 1.0
        soft_success = max(0.0, 1.0 - st.distance / d0) if d0 > 0 else 1.0
        return {
            "return": st.total_reward,
            "length": float(st.steps),
            "success": float(success),
            "spl": float(success) * efficiency,
            "soft_spl": soft_success * efficiency,
            "distance_to_goal": st.distance,
            "collisions": float(st.collisions),
        }

    # ---------------------------------------------------------------- checkpoints
    def state_dict(self) -> dict[str, Any]:
        if self.state is None:
            return {}
        position, rotation = self.sim.agent_pose()
        return {"episode": dataclasses.asdict(self.state), "position": position.tolist(),
                "rotation": rotation.tolist()}

    def load_state_dict(self, state: dict[str, Any], episode: Episode, scene_path: str) -> dict[str, np.ndarray]:
        """Resume `episode` mid-way; returns the current observation."""
        self.reset(episode, int(state["episode"]["episode_index"]), scene_path)
        self.state = EpisodeState(**state["episode"])
        self.sim.set_agent_pose(np.asarray(state["position"], np.float64), np.asarray(state["rotation"], np.float64))
        self._position = self.sim.agent_pose()[0]
        return self._observation(self.sim.observe())
