"""The user's own code: modules imported from the working directory as `python -m` imports them, and the names
they register (policy architectures, encoders, memory cores) that config keys choose.

Working directory: `python -m ddppo` puts it first on sys.path; the `ddppo` console script, a torchrun rank
started from it and a sweep's runs would not. `workdir_first` makes every command behave as `python -m` does, so
`env.name=gym:mymod:Corridor-v0` and `policy.architecture=mypolicies:tiny` find `mymod.py` and `mypolicies.py`
beside the user. Processes started afterwards (env workers by forkserver or spawn) inherit this sys.path.

Registries: a `Registry` is a config field's live set of choices (`field(metadata=doc(..., choices=POLICIES))`):
the built-in names are declared here, so validation, `--explain` and the reference know them before any model
code is imported; the builders are registered by decorators (`ddppo.model.build.register_policy`,
`register_encoder`, `register_core`, `ddppo.advantage.register_estimator`). Each registry names its home, the module
that registers the built-in builders: the first lookup of a built-in imports it, so a lower layer (the config checks
asking an advantage estimator for its rules, config/sizes.py asking a core for its sizes) finds them without
importing a layer above. A value `module:name` imports `module` (from the working directory first) before `name` is
looked up, so a stored config (a run directory's, a checkpoint's) finds the user's code again in `ddppo eval`, on
resume and in `ddppo.api.Agent`.
"""

from __future__ import annotations

import functools
import importlib
import os
import sys
from typing import Any, Callable, Iterator


def workdir_first() -> None:
    """Put the working directory first on sys.path (as `python -m` does), unless it is on it already."""
    try:
        cwd = os.getcwd()
    except OSError:  # removed under us: nothing to import from
        return
    if not any(os.path.abspath(p or os.curdir) == cwd for p in sys.path):
        sys.path.insert(0, cwd)


def import_user_module(module: str) -> Any:
    """Import `module` as `python -m` would find it (the working directory first); ImportError with one line
    naming where it was looked for."""
    if not module or not all(part.isidentifier() for part in module.split(".")):
        raise ImportError(f"{module!r} is not a module name (dotted Python identifiers, e.g. my_policies)")
    workdir_first()
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as err:
        if err.name != module.split(".")[0] and err.name != module:
            raise  # the user's module imports something missing: its own error says what
        raise ImportError(f"no module named {module!r} in the working directory {os.getcwd()} or on sys.path"
                          ) from None


class Registry:
    """Names -> builders of one kind, the choices of the config key `key`. `in` and iteration give the names
    (built-in first, then registered ones, in order); `problem(value)` says why a value is not one; `get(value)`
    the builder, importing `home` (the module that registers the `builtin` ones) when it is not registered yet."""

    def __init__(self, kind: str, key: str, builtin: tuple[str, ...], decorator: str, home: str):
        self.kind, self.key, self.builtin, self.decorator, self.home = kind, key, builtin, decorator, home
        self._builders: dict[str, Callable[..., Any]] = {}
        self._extra: list[str] = []  # registered names that are not built in, in order

    def register(self, name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Decorator: `@registry.register("name")` on a builder. A name is registered once."""
        if not isinstance(name, str) or not name or ":" in name or not name.strip() == name:
            raise ValueError(f"{self.kind} name {name!r} must be a non-empty string without ':' or spaces")

        def add(builder: Callable[..., Any]) -> Callable[..., Any]:
            if name in self._builders and self._builders[name] is not builder:
                raise ValueError(f"{self.kind} {name!r} is registered already (by {_origin(self._builders[name])})")
            self._builders[name] = builder
            if name not in self.builtin and name not in self._extra:
                self._extra.append(name)
            return builder

        return add

    def _name(self, value: str) -> str:
        """The registered name a config value means: `module:name` imports `module` first."""
        module, sep, name = str(value).rpartition(":")
        if sep:
            import_user_module(module)
        return name

    def problem(self, value: Any, key: str = "") -> str | None:
        """None if `value` names a registered builder (importing its module), else why not, naming `key` (the
        config key that gave it; default the registry's own)."""
        key = key or self.key
        if not isinstance(value, str):
            return f"{key}={value!r} must be a name, one of {', '.join(self)}"
        try:
            name = self._name(value)
        except ImportError as err:
            return (f"{key}={value!r}: {err} (the module named before ':' registers the {self.kind} with "
                    f"{self.decorator})")
        except Exception as err:  # the user's module failed while it was imported: its error, in one line
            return f"{key}={value!r}: importing {value.rpartition(':')[0]!r} failed: {type(err).__name__}: {err}"
        if name in self.builtin or name in self._builders:
            return None
        where = f"module {value.rpartition(':')[0]!r} does not register {name!r}; " if ":" in value else ""
        return (f"{key}={value!r}: {where}must be one of {', '.join(self)} (your own: register it with "
                f"{self.decorator} in a module MODULE and set {key}=MODULE:NAME)")

    def get(self, value: str, key: str = "") -> Callable[..., Any]:
        """The builder `value` names (`name` or `module:name`); ValueError naming the registered ones."""
        problem = self.problem(value, key)
        if problem is not None:
            raise ValueError(problem)
        name = self._name(value)
        if name not in self._builders:  # a built-in name: its home registers it when imported
            importlib.import_module(self.home)
        if name not in self._builders:
            raise ValueError(f"{key or self.key}={value!r}: the built-in {self.kind} {name!r} is not registered by "
                             f"{self.home}")
        return self._builders[name]

    def __contains__(self, value: object) -> bool:
        return self.problem(value) is None

    def __iter__(self) -> Iterator[str]:
        return iter(self.builtin + tuple(self._extra))

    def __len__(self) -> int:
        return len(self.builtin) + len(self._extra)


def _origin(builder: Callable[..., Any]) -> str:
    return f"{getattr(builder, '__module__', '?')}.{getattr(builder, '__qualname__', '?')}"


# policy.architecture: the whole network
POLICIES = Registry("policy", "policy.architecture", ("ddppo", "habitat_baselines", "habitat_baselines_simple"),
                    "@ddppo.model.build.register_policy(NAME)", home="ddppo.model.build")
class EncoderRegistry(Registry):
    """The encoders' registry, which also takes `LIBRARY:NAME` for a vision library's model (torchvision, timm,
    open_clip: ddppo.model.pretrained builds it, importing the library only then)."""

    LIBRARIES = ("torchvision", "timm", "open_clip")
    LIBRARY_HOME = "ddppo.model.pretrained"

    def library_of(self, value: Any) -> tuple[str, str] | None:
        """(library, model name) for `LIBRARY:NAME`; None for any other value."""
        library, sep, name = str(value).partition(":") if isinstance(value, str) else ("", "", "")
        return (library, name) if sep and library in self.LIBRARIES else None

    def problem(self, value: Any, key: str = "") -> str | None:
        found = self.library_of(value)
        if found is None:
            return super().problem(value, key)
        return importlib.import_module(self.LIBRARY_HOME).name_problem(*found, key or self.key)

    def get(self, value: str, key: str = "") -> Callable[..., Any]:
        found = self.library_of(value)
        if found is None:
            return super().get(value, key)
        problem = self.problem(value, key)
        if problem is not None:
            raise ValueError(problem)
        return functools.partial(importlib.import_module(self.LIBRARY_HOME).build, *found)


# policy.rnn_type: the memory core between the encoders and the heads, a ddppo.model.core.Core subclass that also
# states its sizes
CORES = Registry("core", "policy.rnn_type", ("gru", "lstm", "transformer", "none"),
                 "@ddppo.model.build.register_core(NAME)", home="ddppo.model.cores")
# policy.image_encoder / policy.vector_encoder: the encoder of each image / vector observation key, each with its
# own built-in choices; an encoder of your own (ddppo.model.build.register_encoder) is a choice of both
ENCODERS = EncoderRegistry("image encoder", "policy.image_encoder", ("cnn", "nature", "grid", "resnet"),
                           "@ddppo.model.build.register_encoder(NAME)", home="ddppo.model.encoders")
VECTOR_ENCODERS = Registry("vector encoder", "policy.vector_encoder", ("mlp",),
                           "@ddppo.model.build.register_encoder(NAME)", home="ddppo.model.encoders")
# ppo.advantage: the advantage estimator, a class that also states its needs (critic, env groups, config rules)
ADVANTAGES = Registry("advantage estimator", "ppo.advantage", ("gae", "grpo"),
                      "@ddppo.advantage.register_estimator(NAME)", home="ddppo.advantage")
