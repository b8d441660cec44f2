"""habitat-lab's own evaluation of an agent: `habitat.Benchmark.local_evaluate` (its episode loop over its own
Env and episode iterator, and its metric averaging) on the split the options name, every episode once.

This is the yardstick for ddppo's evaluator: the same checkpoint through both gives the same episodes' means.
`act(obs, start)` is the agent (one observation dict in ddppo's layout, batch of one; start = first step of an
episode) returning an action as the VecEnv would take it; this module never sees a policy.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ddppo.envs.base import EnvSpec
from ddppo.envs.habitat_lab.compat import Api
from ddppo.envs.habitat_lab.env import check_dataset, configured
from ddppo.envs.habitat_lab.options import HabitatLabOptions
from ddppo.envs.habitat_lab.spaces import ActionMap, convert_observation_space


def habitat_lab_metrics(options: HabitatLabOptions, act: Callable[[dict, bool], np.ndarray],
                        api: Api | None = None) -> tuple[dict[str, float], int]:
    """(habitat-lab's averaged metrics, number of episodes) of `act` over the whole split."""
    api = api if api is not None else Api()
    cfg = configured(api, options, EnvSpec(num_envs=1, seed=0))
    check_dataset(api, cfg)
    dataset = api.make_dataset(cfg)
    env = api.make_env(cfg, dataset)
    try:
        _, convert = convert_observation_space(env.observation_space)
        actions = ActionMap(list(env.task.actions.keys()), env.action_space)

        class DdppoAgent(api.habitat.Agent):
            def reset(self) -> None:
                self.start = True

            def act(self, observations: Any) -> dict:
                obs = {k: v[None] for k, v in convert(observations).items()}
                action = act(obs, self.start)
                self.start = False
                return actions.to_habitat(action)

        bench = object.__new__(api.habitat.Benchmark)  # its evaluation loop, on our Env (no config file re-read)
        bench._eval_remote, bench._env = False, env
        count = len(dataset.episodes)
        means = bench.local_evaluate(DdppoAgent(), num_episodes=count)
        return {k: float(v) for k, v in means.items()}, count
    finally:
        env.close()
