"""ALE (Atari) ids with the standard preprocessing (env.gym.atari=true), for envs/gym/env.py.

ale-py's `AtariVectorEnv` steps the games in C++ threads and does the preprocessing every anchor ships (SB3's
AtariWrapper, CleanRL's ppo_atari, Sample Factory): up to 30 no-ops at reset, FIRE at reset where the game has it,
frame skip 4 with max-pooling over the last two frames, 84x84 grayscale, 4 stacked frames. At 8 envs it stepped
2.1x to 4.3x as fast as gymnasium's `AtariPreprocessing` + `FrameStackObservation` in a SyncVectorEnv on a shared
2-core machine (`ddppo bench atari-env`), so it is the one used. Its rewards and episodes are left as the game has them (no
clipping, no episodic life): envs/gym/env.py reports the game's score as the episode return and gives the learner
the rewards' signs and a termination at each lost life (`life_lost`), while the game goes on.

`AtariEnvs` has the interface of envs/gym/env.py's SyncEnvs (reset with a seed per env, step with same-step
autoreset and `infos["final_obs"]`, the single spaces, close), with frames channels-last (84, 84, 4): ddppo's image
layout.
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

from ddppo.envs.base import EnvError


class AtariEnvs:
    """`num_envs` games of ALE id `env_id` (its registered settings: sticky actions, action set, frame limit),
    `kwargs` passed to AtariVectorEnv (e.g. repeat_action_probability=0.0, stack_num, noop_max)."""

    def __init__(self, env_id: str, num_envs: int, kwargs: dict[str, Any], max_episode_steps: int = 0):
        try:
            from ale_py.vector_env import AtariVectorEnv
        except ImportError as exc:
            raise EnvError(f"env.gym.atari=true needs ale-py: pip install ale-py (or ddppo's extra \".[atari]\") "
                           f"({exc})") from None
        name = env_id.split(":", 1)[-1]
        spec = gymnasium.registry.get(name)
        if spec is None or "game" not in spec.kwargs:
            raise EnvError(f"env.gym.atari=true: {name!r} is not an ALE id; use one such as "
                           f"env.name=gym:ale_py:ALE/Breakout-v5, or set env.gym.atari=false")
        params = {k: spec.kwargs[k] for k in ("repeat_action_probability", "full_action_space",
                                              "max_num_frames_per_episode") if k in spec.kwargs}
        params.update(kwargs)
        if max_episode_steps > 0:
            params["max_num_frames_per_episode"] = max_episode_steps * int(params.get("frameskip", 4))
        try:
            self.env = AtariVectorEnv(spec.kwargs["game"], num_envs, autoreset_mode="SameStep",
                                      reward_clipping=False, episodic_life=False, **params)
        except TypeError as exc:
            raise EnvError(f"env.gym.kwargs for AtariVectorEnv: {exc}") from None
        stacked = self.env.single_observation_space  # (stack, H, W) uint8
        self.single_observation_space = spaces.Box(0, 255, (*stacked.shape[1:], stacked.shape[0]), np.uint8)
        self.single_action_space = self.env.single_action_space
        self.lives = np.zeros(num_envs, np.int64)

    def reset(self, seed: list[int]) -> tuple[np.ndarray, dict]:
        obs, info = self.env.reset(seed=np.asarray(seed, np.int64) % 2**31)  # the C++ side takes an int
        self.lives = np.asarray(info["lives"], np.int64)
        return _channels_last(obs), {}

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict]:
        obs, reward, terminated, truncated, info = self.env.step(np.asarray(actions, np.int64))
        lives = np.asarray(info["lives"], np.int64)
        done = np.asarray(terminated, bool) | np.asarray(truncated, bool)
        infos: dict[str, Any] = {"life_lost": (lives < self.lives) & ~done, "final_info": {}}
        if done.any():
            infos["final_obs"] = _channels_last(info["final_obs"])
        self.lives = lives
        return _channels_last(obs), reward, terminated, truncated, infos

    def close(self) -> None:
        self.env.close()


def _channels_last(frames: np.ndarray) -> np.ndarray:
    """(N, stack, H, W) -> (N, H, W, stack), contiguous (storage and the device copy read it whole)."""
    return np.ascontiguousarray(np.moveaxis(frames, 1, -1))
