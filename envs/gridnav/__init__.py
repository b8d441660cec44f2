"""The built-in PointNav grid world (env.name=gridnav, options env.gridnav.*): options (the env.gridnav config
section), env (the VecEnv: episodes, rewards, the shortest-path expert), maps (map generation and per-map lookup
tables), camera (the first-person depth/RGB view ray-cast per image column), gym_ids (the variants as gymnasium ids, one env
under gymnasium's API, registered when ddppo.envs is imported)."""

from ddppo.envs.family import EnvFamily
from ddppo.envs.gridnav.options import GridNavOptions

FAMILY = EnvFamily("gridnav", GridNavOptions, "ddppo.envs.gridnav.env:make_gridnav", names=("gridnav",),
                   grouped_episodes=True)
