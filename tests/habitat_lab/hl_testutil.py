"""Helpers shared by the habitat-lab tests (a plain module: conftest.py names are not importable safely)."""

from __future__ import annotations

import importlib.util
import os
import sys
import types
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
POINTNAV_TASK = str(REPO / "configs" / "habitat_lab" / "pointnav_gen_task.yaml")


def real_habitat_lab() -> tuple[object | None, str]:
    """(the `habitat` module, "") where habitat-lab and the real habitat-sim both import; else (None, why)."""
    if importlib.util.find_spec("habitat_sim") is None:
        return None, "habitat-sim is not installed (the real habitat-lab tests need it)"
    if importlib.util.find_spec("habitat") is None:
        return None, "habitat-lab is not installed (optional: see docs/guides/habitat-lab.md)"
    return real_habitat_lab_module()


def real_habitat_lab_module() -> tuple[object | None, str]:
    """`import habitat` (habitat-lab, not the tests/habitat folder) through the adapter; (None, why) if it fails."""
    tests = str(REPO / "tests")
    shadow = sys.modules.get("habitat")
    if shadow is not None and getattr(shadow, "__file__", None) is None:  # tests/habitat as a namespace package
        del sys.modules["habitat"]
    saved = list(sys.path)
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != tests]  # tests/habitat is not habitat-lab
    try:
        from ddppo.envs.habitat_lab.compat import import_habitat

        return import_habitat(), ""
    except Exception as err:
        return None, f"habitat-lab does not import here: {err}"
    finally:
        sys.path[:] = saved


def gpu() -> int:
    """Renderer device: $DDPPO_HABITAT_GPU, else -1 (software EGL; habitat-sim 0.2.2 needs it on CPU)."""
    return int(os.environ.get("DDPPO_HABITAT_GPU", "-1"))


# ---------------------------------------------------------------- habitat-lab 0.3.x without habitat-sim
class _Placeholder(types.ModuleType):
    """An inert module whose attributes are further placeholders (classes may subclass them, calls return one)."""

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        sub = _Placeholder(f"{self.__name__}.{name}")
        sub.__path__ = []
        setattr(self, name, sub)
        sys.modules[sub.__name__] = sub
        return sub

    def __call__(self, *args, **kwargs):
        return self

    def __mro_entries__(self, bases):
        return (type(self.__name__.rpartition(".")[2], (), {}),)


class _PlaceholderFinder:
    def __init__(self, roots: list[str]):
        self.roots = roots

    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in self.roots and name not in sys.modules:
            return importlib.util.spec_from_loader(name, self)
        return None

    def create_module(self, spec):
        module = _Placeholder(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module):
        pass


def habitat_lab_v03() -> tuple[object | None, str]:
    """(the `habitat` module, "") where habitat-lab 0.3.x is installed: with habitat-sim, magnum and corrade
    stood in by inert placeholder modules where they are missing (habitat-lab imports them at import time; the
    tests register their own simulator, so nothing of them is called); else (None, why)."""
    if importlib.util.find_spec("habitat") is None:
        return None, "habitat-lab is not installed (CI installs habitat-lab 0.3.x; see .ci/run)"
    missing = [m for m in ("habitat_sim", "magnum", "corrade") if importlib.util.find_spec(m) is None]
    finder = _PlaceholderFinder(missing)
    sys.meta_path.insert(0, finder)
    try:
        habitat, why = real_habitat_lab_module()
    finally:
        sys.meta_path.remove(finder)
        for name in [n for n in sys.modules if n.split(".")[0] in missing]:  # later tests must not see them
            del sys.modules[name]
    if habitat is None:
        return None, why
    from ddppo.envs.habitat_lab.compat import version_of

    if version_of(habitat) < (0, 3):
        return None, f"habitat-lab {habitat.__version__} is installed, not 0.3.x"
    return habitat, ""


def real_habitat_lab_v03() -> tuple[object | None, str]:
    """(the `habitat` module, "") where habitat-lab 0.3.x and the real habitat-sim both import; else (None, why)."""
    habitat, why = real_habitat_lab()
    if habitat is None:
        return None, why
    from ddppo.envs.habitat_lab.compat import version_of

    if version_of(habitat) < (0, 3):
        return None, f"habitat-lab {habitat.__version__} is installed, not 0.3.x (these tests use 0.3.x's configs)"
    return habitat, ""


def run_ddppo(*args: str, timeout: float = 900):
    """`python -m ddppo ARGS` as a user runs it, from a module-scoped fixture (the `cli` fixture is per test):
    (exit code, stdout + stderr)."""
    import subprocess

    from testutil import cli_env

    proc = subprocess.run([sys.executable, "-m", "ddppo", *args], cwd=REPO, env=cli_env(), capture_output=True,
                          text=True, timeout=timeout, check=False)
    return proc.returncode, proc.stdout + proc.stderr
