"""Per-scene statistics of a rollout: each scene's samples, gradient weight and episode outcomes.

A scene is what an env declares (`ddppo.envs.base.declared_scenes`: habitat's scene id, gridnav's map layouts by
number of rooms, the synthetic env's scenes, a gymnasium env's `scene_id`). The ranks agree on the names once at
start (`agree_scene_names` in ddppo/train/stats.py: the union, sorted), so every rank packs the same
(scenes x SCENE_COLUMNS) table into the once-per-update stats all-gather; a scene reported later that was not
declared is not counted.

Attribution: each valid sample, and its weight, counts for the scene of the episode it belongs to. The collector
tells the tally where each finished episode's last step lies in the storage (`add_episodes`), so an env's steps of a
rollout split into its finished episodes, each counted for the scene it reports (`EpisodeInfo.scene`), and the steps
of the episode still running when the rollout ends, counted for that episode's scene: the one the env named when it
started it (`EpisodeInfo.next_scene` of the episode before, or `env_scenes` after a reset or a restored state). An
env that cannot name the scene of an episode it starts (next_scene None) is taken to stay in the scene of the
episode that just finished: then only the running episode's steps at a rollout's end can be counted for the wrong
scene, and its steps of the next rollout count for its own scene once it finishes there. The attribution is worked
out on the host once per rollout, from one read of the rollout's valid-sample mask (`add_samples`). Episode outcomes
count for the scene the episode reports.

Columns, summed over ranks by the stats collective:
  samples   valid samples (steps that take part in the loss)
  weight    their weight in the gradient: each sample's rank weight (preemption.rank_weighting) times its env
            weight (rollout.importance_weights), the factors by which the update weights it against the others
  episodes  finished episodes; then sum and count of `success`, sum and count of `spl`, sum of `return`
  step_s    seconds the envs spent stepping the finished episodes that report it (`EpisodeInfo.step_s`: habitat,
            habitat-lab), and step_n their steps: train/scene/<name>/step_ms, and the run's scene_costs.json
            (train/scene_costs.py)
"""

from __future__ import annotations

import re
from typing import Any, Iterable

import numpy as np

from ddppo.envs.base import EpisodeInfo, declared_scenes, env_scenes
from ddppo.rollout.observers import EpisodeObserver, Stored
from ddppo.rollout.rollout import Rollout

SCENE_COLUMNS = ("samples", "weight", "episodes", "success_sum", "success_n", "spl_sum", "spl_n", "return_sum",
                 "step_s", "step_n")
_COL = {c: i for i, c in enumerate(SCENE_COLUMNS)}


def scene_names(declared: Iterable[str]) -> tuple[str, ...]:
    """The sorted, de-duplicated scene names (the same on every rank for the same set)."""
    return tuple(sorted({str(n) for n in declared}))


def env_scene_names(envs: Any) -> tuple[str, ...]:
    """This rank's scene names (before the ranks agree on their union)."""
    return scene_names([*declared_scenes(envs), *(s for s in env_scenes(envs) if s is not None)])


def metric_key(name: str) -> str:
    """A scene name as a metric path component: characters outside [A-Za-z0-9_.-] become '_'."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name) or "_"


class SceneTally(EpisodeObserver):
    """Adds one rollout's per-scene samples, weights and episodes into a (scenes, SCENE_COLUMNS) table.

    Per rollout: `begin()`, `add_episodes` as episodes finish, then `add_samples` once. `restart(envs)` after the
    envs reset or load a saved state (their `env_scenes` are the running episodes' scenes). As a collector's
    episode observer (rollout/observers.py) it does so into `table`, put into the rollout's tallies as "scenes"."""

    def __init__(self, names: Iterable[str], envs: Any):
        self.names = tuple(names)
        self._index = {n: i for i, n in enumerate(self.names)}
        self.current = self._lookup(env_scenes(envs))  # each env's running episode's scene index (-1: unknown)
        self._ends: list[list[tuple[int, int]]] = [[] for _ in self.current]  # per env: (last slot, scene index)
        self.table = self.zeros()  # the rollout being collected

    def _lookup(self, scenes: Iterable[str | None]) -> np.ndarray:
        return np.array([self._index.get(s, -1) if s is not None else -1 for s in scenes], np.int64)

    def restart(self, envs: Any) -> None:
        """The envs play new episodes (reset) or their saved ones (state restored): take their scenes."""
        self.current = self._lookup(env_scenes(envs))
        self.begin()

    def begin(self) -> None:
        """A rollout starts: no episode has finished in it."""
        self._ends = [[] for _ in self.current]
        self.table = self.zeros()

    def finished(self, episodes: list[EpisodeInfo], at: Stored) -> None:
        if self.names:  # the storage's counters read only where there are scenes
            self.add_episodes(episodes, self.table, at.last_slot)

    def end(self, rollout: Rollout, tallies: dict[str, np.ndarray]) -> None:
        if self.names:  # one host read of the mask per rollout, only where there are scenes
            weight = None if rollout.env_weight is None else rollout.env_weight.double().cpu().numpy()
            self.add_samples(self.table, rollout.valid.double().cpu().numpy(), weight, rollout.rank_weight)
        tallies["scenes"] = self.table

    def zeros(self) -> np.ndarray:
        return np.zeros((len(self.names), len(SCENE_COLUMNS)))

    def add_episodes(self, episodes: list, table: np.ndarray, last_slot: int | np.ndarray) -> None:
        """Finished episodes: outcomes into `table`, and where each ended: `last_slot` is the storage slot (time
        index) of each env's latest stored step, one int for every env or (num_envs,) per env."""
        if not self.names:
            return
        for ep in episodes:
            n = ep.env_index
            known = 0 <= n < len(self.current)
            i = self._index.get(ep.scene, -1) if ep.scene is not None else (int(self.current[n]) if known else -1)
            if known:
                slot = int(last_slot if np.ndim(last_slot) == 0 else last_slot[n])
                self._ends[n].append((slot, i))
                self.current[n] = self._index.get(ep.next_scene, -1) if ep.next_scene is not None else i
            if i < 0:
                continue
            row, m = table[i], ep.metrics
            row[_COL["episodes"]] += 1
            row[_COL["return_sum"]] += float(m.get("return", 0.0))
            if ep.step_s is not None and m.get("length", 0) > 0:
                row[_COL["step_s"]] += float(ep.step_s)
                row[_COL["step_n"]] += float(m["length"])
            for key in ("success", "spl"):
                if key in m and np.isfinite(float(m[key])):
                    row[_COL[f"{key}_sum"]] += float(m[key])
                    row[_COL[f"{key}_n"]] += 1

    def sample_scenes(self, steps: int) -> np.ndarray:
        """(steps, num_envs) the scene index of each slot of this rollout (-1: unknown)."""
        out = np.empty((steps, len(self.current)), np.int64)
        for n, ends in enumerate(self._ends):
            lo = 0
            for slot, i in ends:
                out[lo:slot + 1, n] = i
                lo = slot + 1
            out[lo:, n] = self.current[n]
        return out

    def add_samples(self, table: np.ndarray, valid: np.ndarray, env_weight: np.ndarray | None,
                    rank_weight: float) -> None:
        """`valid` (steps, num_envs): the rollout's valid-sample mask; `env_weight` (num_envs,) each env's sample
        weight in the rank's loss (None: 1)."""
        if not self.names:
            return
        scene = self.sample_scenes(valid.shape[0])
        known = scene >= 0
        w = valid * (1.0 if env_weight is None else np.asarray(env_weight)[None, :]) * rank_weight
        S = len(self.names)
        table[:, _COL["samples"]] += np.bincount(scene[known], valid[known], S)
        table[:, _COL["weight"]] += np.bincount(scene[known], w[known], S)


def step_seconds(table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(seconds, steps) per scene of a table's timed episodes."""
    return table[:, _COL["step_s"]], table[:, _COL["step_n"]]


def scene_scalars(names: tuple[str, ...], table: np.ndarray, prefix: str = "train") -> dict[str, float]:
    """`<prefix>/scene/<name>/{sample_share, weight_share, success, spl, reward, episodes, step_ms}` from a summed
    table (shares: of every scene's samples / weight; outcomes and step_ms, the mean env step time, where the scene
    finished an episode, timed for step_ms), and the spread
    over scenes: `<prefix>/scene_weight_share_min` / `_max`, `<prefix>/scene_success_min` / `_max`."""
    out: dict[str, float] = {}
    if not names:
        return out
    samples, weight = table[:, _COL["samples"]], table[:, _COL["weight"]]
    seconds, steps = step_seconds(table)
    total_s, total_w = samples.sum(), weight.sum()
    successes = []
    for i, name in enumerate(names):
        row, key = table[i], f"{prefix}/scene/{metric_key(name)}"
        if total_s > 0:
            out[f"{key}/sample_share"] = float(samples[i] / total_s)
        if total_w > 0:
            out[f"{key}/weight_share"] = float(weight[i] / total_w)
        n = row[_COL["episodes"]]
        out[f"{key}/episodes"] = float(n)
        if n > 0:
            out[f"{key}/reward"] = float(row[_COL["return_sum"]] / n)
        for m in ("success", "spl"):
            if row[_COL[f"{m}_n"]] > 0:
                out[f"{key}/{m}"] = float(row[_COL[f"{m}_sum"]] / row[_COL[f"{m}_n"]])
        if steps[i] > 0:
            out[f"{key}/step_ms"] = float(1000.0 * seconds[i] / steps[i])
        if f"{key}/success" in out:
            successes.append(out[f"{key}/success"])
    if total_w > 0:
        out[f"{prefix}/scene_weight_share_min"] = float(weight.min() / total_w)
        out[f"{prefix}/scene_weight_share_max"] = float(weight.max() / total_w)
    if successes:
        out[f"{prefix}/scene_success_min"] = min(successes)
        out[f"{prefix}/scene_success_max"] = max(successes)
    return out
