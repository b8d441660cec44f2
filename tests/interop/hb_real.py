"""habitat-baselines' own PointNavResNetPolicy and PointNavBaselinePolicy, where habitat-baselines is installed
(an optional test dependency).

habitat-lab imports habitat_sim, magnum and corrade when it is imported; without habitat-sim the policy
classes still build once those three are importable, so inert in-memory placeholder modules stand in for
them (only where the real ones are missing, and only for the import). So does torchvision where it is
installed but broken (a build for another torch: `operator torchvision::nms does not exist`): the policy
imports it for its CLIP encoder only. Nothing of them is ever called by the policy code.

The placeholders leave sys.modules with the import: these modules are imported while pytest collects, so a
placeholder left there would be what every later test's `import habitat_sim` returns (habitat-sim would look
installed to tests/habitat's without-habitat-sim tests, and their skipifs, read earlier, would not agree).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from typing import Any

PLACEHOLDERS = ["habitat_sim", "magnum", "corrade"]


class _Anything(types.ModuleType):
    """A module whose every attribute is a further placeholder (classes can subclass it, calls return one)."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        sub = _Anything(f"{self.__name__}.{name}")
        sub.__path__ = []  # importable as a package
        setattr(self, name, sub)
        sys.modules[sub.__name__] = sub
        return sub

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self

    def __mro_entries__(self, bases: tuple) -> tuple:
        if "_as_class" not in self.__dict__:
            self._as_class = type(self.__name__.rpartition(".")[2], (), {})
        return (self._as_class,)


class _Finder:
    """Serves any submodule of a placeholder package (e.g. habitat_sim.utils.common)."""

    def __init__(self, roots: list[str]):
        self.roots = roots

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name.split(".")[0] in self.roots and name not in sys.modules:
            return importlib.util.spec_from_loader(name, self)
        return None

    def create_module(self, spec: Any) -> Any:
        module = _Anything(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module: Any) -> None:
        pass


def _imports(name: str) -> bool:
    try:
        importlib.import_module(name)
        return True
    except Exception:
        return False


CLASSES = {"PointNavResNetPolicy": "habitat_baselines.rl.ddppo.policy.resnet_policy",
           "PointNavBaselinePolicy": "habitat_baselines.rl.ppo.policy"}


def habitat_baselines_version() -> str:
    """The installed habitat-baselines' version ("0.2.2": one dist `habitat` then), or ""."""
    from importlib import metadata

    for dist in ("habitat-baselines", "habitat"):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return ""


def load_habitat_baselines(name: str = "PointNavResNetPolicy") -> tuple[Any, str]:
    """(the policy class `name` of CLASSES, "") or (None, why it is not available)."""
    if importlib.util.find_spec("habitat_baselines") is None:
        return None, "habitat-baselines is not installed (optional: pip install habitat-baselines habitat-lab)"
    missing = [m for m in PLACEHOLDERS if importlib.util.find_spec(m) is None]
    if not _imports("torchvision"):
        missing.append("torchvision")
        for module in [n for n in sys.modules if n.split(".")[0] == "torchvision"]:
            del sys.modules[module]
    finder = _Finder(missing)
    if missing:
        sys.meta_path.insert(0, finder)
    try:
        policy = getattr(importlib.import_module(CLASSES[name]), name)
    except Exception as err:  # a habitat-baselines that does not import here: skip, saying why
        return None, f"habitat-baselines does not import here: {type(err).__name__}: {str(err)[:200]}"
    finally:
        if finder in sys.meta_path:
            sys.meta_path.remove(finder)
        for module in [n for n in sys.modules if n.split(".")[0] in missing]:
            del sys.modules[module]
    return policy, ""


def action_space(n: int) -> Any:
    """n discrete actions as this release's policies take them: gym Discrete (0.3.x), or habitat's ActionSpace
    of n actions (0.2.x, whose PointNavResNetPolicy counts a bare Discrete as one action)."""
    from gym import spaces

    if not habitat_baselines_version().startswith("0.2."):
        return spaces.Discrete(n)
    from habitat.core.spaces import ActionSpace, EmptySpace

    return ActionSpace({f"action_{i}": EmptySpace() for i in range(n)})
