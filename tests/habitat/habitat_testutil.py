"""Helpers shared by the habitat tests (a plain module: conftest.py names are not importable safely)."""

from __future__ import annotations

import os
import types

from ddppo.envs.scenes.dataset import scene_name


def habitat_gpu() -> int:
    """Renderer device for real-simulator tests: $DDPPO_HABITAT_GPU, else 0 with CUDA, else -1 (software EGL)."""
    if "DDPPO_HABITAT_GPU" in os.environ:
        return int(os.environ["DDPPO_HABITAT_GPU"])
    try:
        import torch

        return 0 if torch.cuda.is_available() else -1
    except ImportError:
        return -1


class HabitatLabStandIn:
    """What load_share asks of habitat-lab (ddppo.envs.habitat_lab.compat.Api): a config as a dict, a dataset of
    episodes with per-scene content filtering, and the dataset class's scene name of an episode."""

    label = "habitat-lab stand-in"

    def __init__(self, episodes: list):
        self.episodes = episodes
        self.scenes = sorted({scene_name(e.scene_id) for e in episodes})

    def get(self, cfg, key):
        return cfg[key]

    def replace(self, cfg, **values):
        return {**cfg, **values}

    def scenes_to_load(self, cfg):
        return list(self.scenes)

    def dataset_class(self, cfg):
        return types.SimpleNamespace(scene_from_scene_path=scene_name)

    def make_dataset(self, cfg):
        wanted = set(cfg.get("content_scenes", self.scenes))
        return types.SimpleNamespace(episodes=[e for e in self.episodes if scene_name(e.scene_id) in wanted])
