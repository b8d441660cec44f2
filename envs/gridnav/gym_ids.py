"""The built-in grid world as gymnasium environments, registered when `ddppo.envs` is imported (`register`):

    GridNav-v0          the default task (configs/gridnav.yaml: a range scan and the goal's direction)
    GridNavDepth-v0     its depth camera (configs/gridnav_depth.yaml's env.gridnav options)
    GridNavMemory-v0    the goal shown only at the first step (configs/gridnav_memory.yaml's options)

`gymnasium.make(ID, seed=0, **options)`: any env.gridnav option overrides the variant's, e.g.
`gymnasium.make("GridNav-v0", camera="rgb")` for the RGB camera. `seed` picks the generated maps. One
option cannot pass through `gymnasium.make`: `max_episode_steps` is make's own (a TimeLimit wrapper, whose cut
episodes end without gridnav's metrics); for gridnav's own limit build `GridNavEnv(max_episode_steps=N)`.

One env under gymnasium's API (ddppo itself steps gridnav batched, envs/gridnav/env.py): a step that ends an episode
returns its last observation and, in `info["metrics"]`, the episode's metrics as `ddppo eval` reads them
(return, length, success, spl, ...); `reset(seed=...)` starts a fresh episode.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import gymnasium
import numpy as np

# id -> the shipped config whose env.gridnav options the variant takes
VARIANTS = {"GridNav-v0": "gridnav", "GridNavDepth-v0": "gridnav_depth",
            "GridNavMemory-v0": "gridnav_memory"}


def register() -> None:
    """Register every variant's id with gymnasium (once; the env itself is imported only when made)."""
    for env_id, config in VARIANTS.items():
        if env_id not in gymnasium.registry:
            gymnasium.register(env_id, entry_point="ddppo.envs.gridnav.gym_ids:GridNavEnv", kwargs={"config": config})


def shipped_options(config: str) -> dict[str, Any]:
    """The env.gridnav options of the shipped config `config` (its YAML; none: the defaults)."""
    import yaml

    from ddppo.configs import find

    with open(find(config)) as f:
        data = yaml.safe_load(f) or {}
    return dict((data.get("env") or {}).get("gridnav") or {})


class GridNavEnv(gymnasium.Env):
    """One gridnav env (module docstring); `config`: the shipped config whose options it takes, `options`: any
    env.gridnav option over them."""

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, config: str = "gridnav", seed: int = 0, **options: Any):
        from ddppo.envs.base import EnvSpec
        from ddppo.envs.gridnav.env import GridNav
        from ddppo.envs.gridnav.options import GridNavOptions

        names = {f.name for f in dataclasses.fields(GridNavOptions)}
        unknown = sorted(set(options) - names)
        if unknown:
            raise TypeError(f"{unknown} are not gridnav options (env.gridnav.*: {', '.join(sorted(names))})")
        chosen = GridNavOptions(**{**shipped_options(config), **options})
        self.env = GridNav(chosen, EnvSpec(num_envs=1, seed=seed))
        self.observation_space = self.env.observation_space
        self.action_space = self.env.action_space

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        super().reset(seed=seed)
        return _first(self.env.reset(seed)), {}

    def step(self, action: Any) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        res = self.env.step(np.asarray([action]))
        done = bool(res.done[0])
        info: dict[str, Any] = {}
        if done:  # gridnav has started the next episode already: the ended one's last observation is returned
            info["metrics"] = dict(res.episodes[0].metrics)
        obs = _first(res.final_obs if done else res.obs)
        return obs, float(res.reward[0]), bool(res.terminated[0]), bool(res.truncated[0]), info

    def close(self) -> None:
        self.env.close()


def _first(obs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {k: np.array(v[0]) for k, v in obs.items()}
