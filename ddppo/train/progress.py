"""Training progress, the same on every rank: a saved-state owner of its own (namespace "counters", shared).

    update             updates done
    env_steps          env steps collected over every rank
    skipped_in_a_row   updates in a row with skipped (non-finite) optimiser steps
    window             the recent updates' episode statistics (train/* is windowed over log.window updates), with
                       the names of its columns (`episode_metrics`, the ranks' agreed metric names)
    scene_window       the same window per scene (train/scene/*: train/stats.py's SceneWindow, with its scene names)
    kl_beta            the KL reference's coefficient (ppo.kl_ref, adapted every update); None without a reference
    metrics_record     rank 0's metrics.jsonl line of the last update (a checkpoint's copy: a resume puts it back
                       where a kill tore it, train/metrics.py); None elsewhere and before the first update

The checkpoint manager owns it directly (train/builder.py registers it); the loop advances it.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np

from ddppo.rollout.episode_metrics import EPISODE_KEYS


class Progress:
    def __init__(self, metric_names: tuple[str, ...], window: int, kl_beta: float | None = None,
                 scene_window: Any = None):
        self.metric_names = tuple(metric_names)  # the window's columns, in order (same on every rank)
        self.update, self.env_steps, self.skipped_in_a_row = 0, 0, 0
        self.window: deque = deque(maxlen=window)  # (episode sums, episode counts, env steps, update seconds)
        self.kl_beta = kl_beta
        self.scene_window = scene_window  # a SceneWindow (train/stats.py); None: no per-scene window
        self.metrics_record: str | None = None

    # ------------------------------------------------------------ the loop's
    def advance(self, update: int, env_steps: int, skipped_steps: int) -> None:
        """Update `update` is done: it collected `env_steps` over every rank and skipped `skipped_steps` steps."""
        self.update = update
        self.env_steps += env_steps
        self.skipped_in_a_row = self.skipped_in_a_row + 1 if skipped_steps else 0

    def record(self, sums: np.ndarray, counts: np.ndarray, env_steps: int, seconds: float) -> None:
        """One update's episode statistics into the window."""
        self.window.append((sums, counts, env_steps, seconds))

    def window_scalars(self) -> dict[str, float]:
        """The windowed scalars: fps, and train/<metric> where the window has episodes of it."""
        sums = sum(w[0] for w in self.window)
        counts = sum(w[1] for w in self.window)
        fps = sum(w[2] for w in self.window) / max(sum(w[3] for w in self.window), 1e-9)
        out = {"fps": fps, "perf/fps": fps}
        names = {"return": "reward", "length": "episode_length"}
        for i, key in enumerate(self.metric_names):
            if counts[i] > 0:
                out[f"train/{names.get(key, key)}"] = float(sums[i] / counts[i])
        return out

    # ------------------------------------------------------------ saved state
    def state_dict(self) -> dict[str, Any]:
        state = {"update": self.update, "env_steps": self.env_steps, "skipped_in_a_row": self.skipped_in_a_row,
                 "kl_beta": self.kl_beta if self.kl_beta is not None else 0.0,
                 "window": [list(w) for w in self.window], "episode_metrics": list(self.metric_names),
                 "metrics_record": self.metrics_record}
        if self.scene_window is not None:
            state["scene_window"] = self.scene_window.state_dict()
        return state

    def load_state_dict(self, counters: dict[str, Any]) -> None:
        self.update, self.env_steps = counters["update"], counters["env_steps"]
        self.skipped_in_a_row = counters["skipped_in_a_row"]
        self.window.clear()
        saved = tuple(counters.get("episode_metrics") or EPISODE_KEYS)  # the window's columns
        for sums, counts, steps, seconds in counters["window"]:
            self.window.append((self.remap(sums, saved), self.remap(counts, saved), steps, seconds))
        if self.kl_beta is not None and counters["kl_beta"] is not None:
            self.kl_beta = float(counters["kl_beta"])
        if self.scene_window is not None:  # older checkpoints have none: an empty window
            self.scene_window.load_state_dict(counters.get("scene_window"))
        self.metrics_record = counters.get("metrics_record")  # older checkpoints have none

    def remap(self, values: Any, saved: tuple[str, ...]) -> np.ndarray:
        """A saved window row (columns `saved`) in this run's metric columns; a name this run lacks is dropped."""
        out = np.zeros(len(self.metric_names))
        index = {n: i for i, n in enumerate(self.metric_names)}
        for name, value in zip(saved, np.asarray(values, np.float64)):
            if name in index:
                out[index[name]] = value
        return out
