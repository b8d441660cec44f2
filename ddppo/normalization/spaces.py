"""What the on | off | auto settings of the `normalize` section (and policy.critic) resolve to on the envs'
spaces: `auto` is on for continuous control."""

from __future__ import annotations

import gymnasium


def is_vector(space: gymnasium.spaces.Space) -> bool:
    """A Box observation that is not an image (an image has 3 dims): what normalisation applies to."""
    return isinstance(space, gymnasium.spaces.Box) and len(space.shape) != 3


def continuous_control(obs_space: gymnasium.spaces.Dict, action_space: gymnasium.spaces.Space) -> bool:
    """A 1-D Box action space and only vector Box observations (MuJoCo, classic control's Pendulum): where
    `auto` turns on observation and reward normalisation and a critic of its own."""
    return (isinstance(action_space, gymnasium.spaces.Box) and len(action_space.shape) == 1
            and all(is_vector(s) for s in obs_space.spaces.values()))


def resolve(setting: str, obs_space: gymnasium.spaces.Dict, action_space: gymnasium.spaces.Space) -> bool:
    """An on | off | auto setting: auto is on for continuous control."""
    return setting == "on" or (setting == "auto" and continuous_control(obs_space, action_space))
