"""Helpers shared by the habitat tests (a plain module: conftest.py names are not importable safely)."""

from __future__ import annotations

import os


def habitat_gpu() -> int:
    """Renderer device for real-simulator tests: $DDPPO_HABITAT_GPU, else 0 with CUDA, else -1 (software EGL)."""
    if "DDPPO_HABITAT_GPU" in os.environ:
        return int(os.environ["DDPPO_HABITAT_GPU"])
    try:
        import torch

        return 0 if torch.cuda.is_available() else -1
    except ImportError:
        return -1
