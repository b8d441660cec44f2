"""habitat-sim PointNav, the environment (env.name=habitat_pointnav, options env.habitat.*): the task on a
simulator of envs/scenes/.

Modules: options (env.habitat.* config), task (reward, success, SPL), env (the VecEnv), follower (shortest-path
expert), check (`python -m ddppo.envs.habitat.check`: a habitat-sim install end to end).
The scenes, episodes and simulators it runs on, and the tools that make them, are envs/scenes/ (habitat-lab's
environment reads the same episode files). Nothing here imports habitat_sim or torch at import time.
"""

from ddppo.envs.family import EnvFamily
from ddppo.envs.habitat.options import HabitatOptions

FAMILY = EnvFamily("habitat", HabitatOptions, "ddppo.envs.habitat.env:make_habitat_pointnav",
                   names=("habitat_pointnav",), simulator_fps="ddppo.envs.habitat.env:simulator_fps")
