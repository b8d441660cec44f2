"""A corridor of LENGTH cells: start at the left end, walk to the goal at the right end.

Two gymnasium environments, registered when this module is imported:

- Corridor-v0: a Dict observation (where the agent is, and what it sees of the cells beside it) and
  Discrete actions (0 left, 1 stay, 2 right);
- CorridorContinuous-v0: a Box observation and a Box action (how far to move, -1 to 1 cells).

Both put `success` (1.0 at the goal, else 0.0) in the info of an episode's last step: with
`env.gym.episode_metrics=[success]` ddppo reports it as train/success and `ddppo eval`'s success.

Train with it from the folder that holds this file:

    ddppo train cartpole env.name=gym:corridor:Corridor-v0 env.gym.episode_metrics=[success]
"""

import gymnasium as gym
import numpy as np
from gymnasium import spaces

LENGTH = 8


class Corridor(gym.Env):
    """Reward: +1 at the goal (the episode terminates), -0.01 for every other step."""

    def __init__(self, length: int = LENGTH, continuous: bool = False):
        self.length, self.continuous = length, continuous
        if continuous:
            self.observation_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
            self.action_space = spaces.Box(-1.0, 1.0, (1,), np.float32)
        else:
            self.observation_space = spaces.Dict({
                "position": spaces.Box(0.0, 1.0, (1,), np.float32),  # 0 at the start, 1 at the goal
                "beside": spaces.Box(0.0, 1.0, (2,), np.float32),  # is the cell to the left / right a wall?
            })
            self.action_space = spaces.Discrete(3)
        self.pos = 0.0

    def _obs(self):
        where = self.pos / self.length
        if self.continuous:
            return np.array([where, 1.0 - where], np.float32)
        walls = [float(self.pos < 1), float(self.pos > self.length - 1)]
        return {"position": np.array([where], np.float32), "beside": np.array(walls, np.float32)}

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.pos = 0.0
        return self._obs(), {}

    def step(self, action):
        move = float(np.asarray(action).reshape(())) if self.continuous else int(action) - 1
        self.pos = float(np.clip(self.pos + move, 0.0, self.length))
        success = self.pos >= self.length - 0.5
        reward = 1.0 if success else -0.01
        return self._obs(), reward, success, False, {"success": float(success)}


gym.register("Corridor-v0", entry_point=Corridor, max_episode_steps=4 * LENGTH)
gym.register("CorridorContinuous-v0", entry_point=Corridor, kwargs={"continuous": True},
             max_episode_steps=4 * LENGTH)
