"""The environment families, and `make_vec_env`: an env.name -> its family's factory.

`ddppo` sees environments only through this module and the interface of base.py (VecEnv, EnvSpec, EnvError): it
reads the families' option classes (its config schema has one section `env.<section>` per family) and calls
`make_vec_env`. The families are found, once, where they declare themselves (envs/family.py): the packages of
ddppo.envs holding `FAMILY`, then the `ddppo.env_families` entry points of installed packages. A family's
factory module is imported only when that environment is built, so a missing optional dependency (habitat-sim)
only matters when it is asked for. `envs` is a DAG: base <- family <- families <- runtime <- registry.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any, Mapping

from ddppo.entry_points import entry_points_of
from ddppo.envs.base import EnvError, EnvSpec, VecEnv
from ddppo.envs.family import EnvFamily

ENTRY_POINTS = "ddppo.env_families"
_FAMILIES: dict[str, EnvFamily] = {}  # section -> family, in the order found


def families() -> dict[str, EnvFamily]:
    """Every env family by its section: ddppo.envs' own packages (by name), then installed ones (entry points)."""
    if not _FAMILIES:
        import ddppo.envs

        found: dict[str, EnvFamily] = {}
        for package in pkgutil.iter_modules(ddppo.envs.__path__):
            if package.ispkg:
                declared = getattr(importlib.import_module(f"ddppo.envs.{package.name}"), "FAMILY", None)
                if declared is not None:
                    _add(found, declared, f"ddppo.envs.{package.name}")
        for point in entry_points_of(ENTRY_POINTS):
            try:
                declared = point.load()
            except Exception as err:  # the plugin's own failure, in one line naming it
                raise EnvError(f"env family entry point {point.name} = {point.value!r} ({ENTRY_POINTS}) failed to "
                               f"load: {type(err).__name__}: {err}") from err
            _add(found, declared, f"entry point {point.name} = {point.value!r}")
        _FAMILIES.update(found)
    return _FAMILIES


def _add(found: dict[str, EnvFamily], family: Any, origin: str) -> None:
    """Add `family` to `found`, refusing what is not a declaration or takes a name or prefix already taken."""
    if not isinstance(family, EnvFamily):
        raise EnvError(f"{origin} declares {family!r}, not a ddppo.envs.family.EnvFamily")
    mine = (family.section, *family.names)
    taken = [(other.section, name) for other in found.values() for name in (other.section, *other.names)
             if name in mine]
    taken += [(other.section, other.prefix) for other in found.values() if other.prefix and family.prefix
              and (other.prefix.startswith(family.prefix) or family.prefix.startswith(other.prefix))]
    if taken:
        raise EnvError(f"env family {family.section!r} ({origin}) takes {taken[0][1]!r}, which the family "
                       f"{taken[0][0]!r} has already: rename it")
    found[family.section] = family


def family_of(name: str) -> EnvFamily | None:
    """The family env.name=`name` chooses, or None."""
    return next((family for family in families().values() if family.chooses(name)), None)


def known_names() -> list[str]:
    """The env.name values, sorted (a prefixed family as `<prefix><id>`)."""
    return sorted([name for family in families().values() for name in family.names]
                  + [f"{family.prefix}<{family.prefix_id}>" for family in families().values() if family.prefix])


def section_for(name: str) -> str | None:
    """The option section an env name reads, or None if the name is unknown."""
    family = family_of(name)
    return family.section if family else None


def grouped_episode_envs() -> list[str]:
    """The environments that run grouped episodes (EnvSpec.group_size > 1, in-process); GRPO's config rules
    (ddppo/advantage/grpo.py) refuse the others, naming the keys, before anything starts."""
    return sorted(name for family in families().values() if family.grouped_episodes for name in family.names)


def make_vec_env(name: str, options: Mapping[str, Any], spec: EnvSpec) -> VecEnv:
    """Build the named environment batch. `options` is its option section as a dict.

    With `spec.num_workers > 0` the envs are split over that many subprocess
    workers (ddppo.envs.runtime.vector.SubprocVecEnv); each worker calls this with num_workers=0.
    """
    family = family_of(name)
    if family is None:
        raise EnvError(f"env.name={name!r} is not a known environment; use one of {known_names()}")
    if spec.num_workers > 0:
        from ddppo.envs.runtime.vector import SubprocVecEnv

        return SubprocVecEnv(name, options, spec, spec.num_workers, make_vec_env)
    factory = family.function("factory")
    if family.prefix and name.startswith(family.prefix) and name not in family.names:
        return factory(name[len(family.prefix):], family.options(**options), spec)
    return factory(family.options(**options), spec)


def simulator_fps(name: str, options: Mapping[str, Any], spec: EnvSpec, steps: int) -> float | None:
    """Steps/s of one of the env's simulators stepped bare (no task, no batching, random actions), on the
    scene and sensors the env would use; None for envs that are not a wrapped simulator."""
    family = family_of(name)
    if family is None or not family.simulator_fps:
        return None
    return family.function("simulator_fps")(family.options(**options), spec, steps)
