"""Any gymnasium environment (env.name=gym:<id>, options env.gym.*): options (the env.gym config section), env
(the VecEnv over gymnasium's vector envs), atari (ALE ids with the standard preprocessing, env.gym.atari=true)."""

from ddppo.envs.family import EnvFamily
from ddppo.envs.gym.options import GymOptions

FAMILY = EnvFamily("gym", GymOptions, "ddppo.envs.gym.env:make_gym", prefix="gym:", prefix_id="gymnasium id")
