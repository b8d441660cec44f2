"""Environment names -> option dataclasses and constructors.

`ddppo` sees environments only through this module and the interface of base.py
(VecEnv, EnvSpec, EnvError): it reads the option dataclasses (to build its config
schema) and calls `make_vec_env`. Concrete environment modules are imported lazily,
so a missing optional dependency (habitat-sim) only matters when that environment is
asked for. `envs` is a DAG: base <- options <- environments <- vector <- registry.
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any, Mapping

from ddppo.envs.base import EnvError, EnvSpec, VecEnv
from ddppo.envs.options import GridNavOptions, GymOptions, HabitatLabOptions, HabitatOptions, SyntheticOptions

# config section name -> option dataclass (one sub-section of `env` each)
OPTION_SECTIONS: dict[str, type] = {
    "gridnav": GridNavOptions,
    "gym": GymOptions,
    "habitat": HabitatOptions,
    "habitat_lab": HabitatLabOptions,
    "synthetic": SyntheticOptions,
}

@dataclasses.dataclass(frozen=True)
class EnvEntry:
    """A built-in environment: where its factory lives, the option section it reads, and what it can do that the
    config checks must know before anything is built."""

    module: str
    factory: str
    section: str
    grouped_episodes: bool = False  # it runs EnvSpec.group_size > 1 (envs sharing each episode, in-process): GRPO


# env.name -> its entry
_FACTORIES: dict[str, EnvEntry] = {
    "gridnav": EnvEntry("ddppo.envs.gridnav", "make_gridnav", "gridnav", grouped_episodes=True),
    "habitat_lab": EnvEntry("ddppo.envs.habitat_lab.env", "make_habitat_lab", "habitat_lab"),
    "habitat_pointnav": EnvEntry("ddppo.envs.habitat.env", "make_habitat_pointnav", "habitat"),
    "synthetic": EnvEntry("ddppo.envs.synthetic", "make_synthetic", "synthetic"),
}
GYM_PREFIX = "gym:"
# env.name -> (module, function(options, spec, steps) -> steps/s of one bare simulator, option section):
# environments that wrap a simulator say how fast it runs alone, for `ddppo bench throughput`
_SIMULATOR_FPS: dict[str, tuple[str, str, str]] = {
    "habitat_pointnav": ("ddppo.envs.habitat.env", "simulator_fps", "habitat"),
}


def known_names() -> list[str]:
    return sorted(_FACTORIES) + [GYM_PREFIX + "<gymnasium id>"]


def section_for(name: str) -> str | None:
    """The option section an env name reads, or None if the name is unknown."""
    if name.startswith(GYM_PREFIX) and len(name) > len(GYM_PREFIX):
        return "gym"
    entry = _FACTORIES.get(name)
    return entry.section if entry else None


def grouped_episode_envs() -> list[str]:
    """The environments that run grouped episodes (EnvSpec.group_size > 1, in-process); GRPO's config rules
    (ddppo/advantage/grpo.py) refuse the others, naming the keys, before anything starts."""
    return [name for name, entry in sorted(_FACTORIES.items()) if entry.grouped_episodes]


def make_vec_env(name: str, options: Mapping[str, Any], spec: EnvSpec) -> VecEnv:
    """Build the named environment batch. `options` is its option section as a dict.

    With `spec.num_workers > 0` the envs are split over that many subprocess
    workers (ddppo.envs.vector.SubprocVecEnv); each worker calls this with num_workers=0.
    """
    if spec.num_workers > 0:
        if section_for(name) is None:
            raise EnvError(f"env.name={name!r} is not a known environment; use one of {known_names()}")
        from ddppo.envs.vector import SubprocVecEnv

        return SubprocVecEnv(name, options, spec, spec.num_workers, make_vec_env)
    if name.startswith(GYM_PREFIX):
        from ddppo.envs.gym import make_gym

        return make_gym(name[len(GYM_PREFIX):], GymOptions(**options), spec)
    if name not in _FACTORIES:
        raise EnvError(f"env.name={name!r} is not a known environment; use one of {known_names()}")
    entry = _FACTORIES[name]
    factory = getattr(importlib.import_module(entry.module), entry.factory)
    return factory(OPTION_SECTIONS[entry.section](**options), spec)


def simulator_fps(name: str, options: Mapping[str, Any], spec: EnvSpec, steps: int) -> float | None:
    """Steps/s of one of the env's simulators stepped bare (no task, no batching, random actions), on the
    scene and sensors the env would use; None for envs that are not a wrapped simulator."""
    if name not in _SIMULATOR_FPS:
        return None
    module, func, section = _SIMULATOR_FPS[name]
    return getattr(importlib.import_module(module), func)(OPTION_SECTIONS[section](**options), spec, steps)
