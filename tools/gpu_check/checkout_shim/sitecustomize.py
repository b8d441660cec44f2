"""A bare checkout imported as the installed package is: `ddppo.envs`, `ddppo.benchmarks`, `ddppo.configs` and
`ddppo.slurm` are the checkout's envs/, benchmarks/, configs/ and slurm/ folders.

Installed, pyproject.toml maps those folders into the `ddppo` namespace; a plain clone has no such mapping, so
`import ddppo.envs` fails there. tools/gpu_check/device.sh puts this folder on PYTHONPATH, so every Python
process of the GPU check (torchrun's workers included) imports this module at start-up (Python's `site` imports
`sitecustomize` from the path) and finds the two packages through the finder below. It is appended to the end
of sys.meta_path: where ddppo is installed, the installed mapping is found first and this one is never asked.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import os
import sys

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
# pyproject.toml's [tool.setuptools.package-dir] (tests/tools/gpu_check/test_gpu_check_bare.py keeps them equal)
_MAPPED = {"ddppo.envs": "envs", "ddppo.benchmarks": "benchmarks", "ddppo.configs": "configs", "ddppo.slurm": "slurm"}


class CheckoutFinder(importlib.abc.MetaPathFinder):
    """Finds the mapped packages in the checkout; their submodules follow from their __path__."""

    def find_spec(self, name, path=None, target=None):
        folder = _MAPPED.get(name)
        init = os.path.join(_ROOT, folder, "__init__.py") if folder else ""
        if not init or not os.path.isfile(init):
            return None
        return importlib.util.spec_from_file_location(name, init,
                                                      submodule_search_locations=[os.path.dirname(init)])


if not any(isinstance(f, CheckoutFinder) for f in sys.meta_path):
    sys.meta_path.append(CheckoutFinder())
