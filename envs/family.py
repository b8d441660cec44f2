"""What an environment family declares: its option section and how `env.name` reaches its factory.

A family is one package. A package of ddppo.envs whose `__init__` holds `FAMILY = EnvFamily(...)` is found by
the registry (envs/registry.py); a family of your own is an installed package naming its `EnvFamily` in the
`ddppo.env_families` entry point group (`myfamily = "mypackage:FAMILY"`). Either way its options become the
config section `env.<section>` (validated, explained, in the generated reference), and `env.name` set to one of
its `names` (or `<prefix><id>`) builds it. The declaration imports only the options class, so reading every
family stays cheap; the factory's module is imported when that environment is built.
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any, Callable


@dataclasses.dataclass(frozen=True)
class EnvFamily:
    """An environment family. `factory` and `simulator_fps` are "module:function" strings, imported only when
    called: `factory(options, spec) -> VecEnv` (with a `prefix`: `factory(id, options, spec)`, the id being
    env.name after the prefix); `simulator_fps(options, spec, steps) -> float`, the steps/s of one bare simulator
    (`ddppo bench throughput`), for families that wrap one."""

    section: str  # env.<section>: the option section, and the family's name
    options: type  # a frozen dataclass with a default for every field (field metadata: ddppo.field_metadata.doc)
    factory: str
    names: tuple[str, ...] = ()  # the env.name values that choose it
    prefix: str = ""  # env.name=<prefix><id> chooses it too (gym's "gym:")
    prefix_id: str = "id"  # what follows the prefix, as help texts name it ("gymnasium id")
    grouped_episodes: bool = False  # it runs EnvSpec.group_size > 1 (envs sharing each episode, in-process): GRPO
    simulator_fps: str = ""

    def __post_init__(self) -> None:
        problem = declaration_problem(self)
        if problem:
            raise ValueError(f"env family {self.section!r}: {problem}")

    def chooses(self, name: str) -> bool:
        """Whether env.name=`name` is this family's."""
        prefixed = bool(self.prefix) and name.startswith(self.prefix) and len(name) > len(self.prefix)
        return name in self.names or prefixed

    def function(self, which: str) -> Callable[..., Any]:
        """The function `factory` or `simulator_fps` names, its module imported."""
        module, _, name = getattr(self, which).partition(":")
        return getattr(importlib.import_module(module), name)


def declaration_problem(family: EnvFamily) -> str | None:
    """What makes a declaration unusable, or None."""
    if not family.section.isidentifier():
        return "section must be a Python identifier (it is the config key env.<section>)"
    if not (dataclasses.is_dataclass(family.options) and isinstance(family.options, type)
            and family.options.__dataclass_params__.frozen):
        return "options must be a frozen dataclass class (the config is frozen)"
    if any(f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
           for f in dataclasses.fields(family.options)):
        return "every option needs a default (the config schema builds the section from them)"
    for which in ("factory", "simulator_fps"):
        value = getattr(family, which)
        if (value or which == "factory") and not _names_a_function(value):
            return f"{which}={value!r} must be 'module:function'"
    if not family.names and not family.prefix:
        return "give the env.name values that choose it (names) or a prefix"
    return None


def _names_a_function(value: str) -> bool:
    module, sep, name = value.partition(":")
    return bool(sep) and name.isidentifier() and all(part.isidentifier() for part in module.split("."))
