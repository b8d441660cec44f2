"""habitat-lab tasks (PointNav, ImageNav, ObjectNav, ...) as a VecEnv (env.name=habitat_lab, options
env.habitat_lab.*); the only package that imports `habitat`, and that only when the environment is built."""

from ddppo.envs.family import EnvFamily
from ddppo.envs.habitat_lab.options import HabitatLabOptions

FAMILY = EnvFamily("habitat_lab", HabitatLabOptions, "ddppo.envs.habitat_lab.env:make_habitat_lab",
                   names=("habitat_lab",))
