"""A cheap environment with a controllable step cost (env.name=synthetic, options env.synthetic.*), for the
distribution and performance tests: options (the env.synthetic config section), env (the VecEnv)."""

from ddppo.envs.family import EnvFamily
from ddppo.envs.synthetic.options import SyntheticOptions

FAMILY = EnvFamily("synthetic", SyntheticOptions, "ddppo.envs.synthetic.env:make_synthetic", names=("synthetic",))
