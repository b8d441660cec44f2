"""Helpers shared by the habitat-lab tests (a plain module: conftest.py names are not importable safely)."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
POINTNAV_TASK = str(REPO / "configs" / "habitat_lab" / "pointnav_gen_task.yaml")
IMAGENAV_TASK = str(REPO / "configs" / "habitat_lab" / "imagenav_gen_task.yaml")


def real_habitat_lab() -> tuple[object | None, str]:
    """(the `habitat` module, "") where habitat-lab and the real habitat-sim both import; else (None, why)."""
    if importlib.util.find_spec("habitat_sim") is None:
        return None, "habitat-sim is not installed (the real habitat-lab tests need it)"
    if importlib.util.find_spec("habitat") is None:
        return None, "habitat-lab is not installed (optional: see README 'Training habitat-lab tasks')"
    tests = str(REPO / "tests")
    shadow = sys.modules.get("habitat")
    if shadow is not None and getattr(shadow, "__file__", None) is None:  # tests/habitat as a namespace package
        del sys.modules["habitat"]
    saved = list(sys.path)
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != tests]  # tests/habitat is not habitat-lab
    try:
        from envs.habitat_lab.compat import import_habitat

        return import_habitat(), ""
    except Exception as err:
        return None, f"habitat-lab does not import here: {err}"
    finally:
        sys.path[:] = saved


def gpu() -> int:
    """Renderer device: $DDPPO_HABITAT_GPU, else -1 (software EGL; habitat-sim 0.2.2 needs it on CPU)."""
    return int(os.environ.get("DDPPO_HABITAT_GPU", "-1"))
