"""The habitat PointNav VecEnv (env.name: habitat_pointnav).

`make_habitat_pointnav(options, spec)` builds `spec.num_envs` PointNav envs
stepped in this process, one simulator each (subprocess workers come from
ddppo.envs.runtime.vector, which calls this factory once per worker).

Episodes are partitioned so none is played twice in one pass over the dataset:
the dataset is cut into `world_size * worker_count` disjoint groups, one per
(rank, worker) -- by per-scene content files when it is a split folder, unless
that leaves some group fewer episodes than its envs (then evenly by episodes:
no env replays while another episode goes unused; `dataset.read_partition`,
`dataset.group_runs`); each group's
episodes, ordered by scene, are cut again into one contiguous run per env. Each env then plays its own episodes endlessly,
reshuffled every pass (grouped by scene, since switching scenes is the
expensive part of a reset).

With episode_split=cost (the default) whole scenes go to the groups by their measured step times, and move during a
run when the trainer offers newer measurements (`place_by_cost`); the saved state carries the costs the placement
was made by, and a resume places by them again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import time
from typing import Any

import gymnasium
import numpy as np

from ddppo.envs.base import EnvError, EnvSpec, EpisodeInfo, Obs, StepClock, StepResult
from ddppo.field_metadata import section_problems
from ddppo.envs.placement import measured_costs
from ddppo.envs.scenes.dataset import (Episode, EpisodeIterator, partition, read_partition, resolve_scene,
                                       scene_file_names, scene_name)
from ddppo.envs.scenes.moves import SceneMoves, group_of
from ddppo.envs.scenes.gridsim import layout_path_for
from ddppo.envs.scenes.backends import make_simulator
from ddppo.envs.scenes.interface import ACTIONS, SimSettings
from ddppo.envs.habitat.follower import ShortestPathFollower
from ddppo.envs.habitat.options import HabitatOptions
from ddppo.envs.habitat.task import GOAL_KEY, PointNavTask

log = logging.getLogger(__name__)
STATE_VERSION = 1


def env_partition(episodes: list[Episode], num_envs: int) -> list[list[int]]:
    """For each env of this batch, the indices (into `episodes`, this group's) of the episodes it plays."""
    if num_envs > len(episodes):
        log.warning("only %d episodes for %d envs: some envs replay the same episodes in one pass",
                    len(episodes), num_envs)
    return [partition(episodes, num_envs, i) for i in range(num_envs)]


def check_files(options: HabitatOptions, episodes: list[Episode], indices: list[int]) -> None:
    """One EnvError naming the first missing scene/navmesh/floor-plan file and an episode that needs it."""
    seen: set[str] = set()
    for k in indices:
        ep = episodes[k]
        if ep.scene_id in seen:
            continue
        seen.add(ep.scene_id)
        scene = resolve_scene(ep.scene_id, options.scenes_dir)
        needed = [("scene file", scene)]
        if options.backend == "habitat":
            needed.append(("navmesh", os.path.splitext(scene)[0] + ".navmesh"))
        else:
            needed = [("floor plan (grid backend)", layout_path_for(scene))]
        for what, path in needed:
            if not os.path.isfile(path):
                raise EnvError(
                    f"{what} {path!r} does not exist; needed by episode {ep.episode_id!r} (scene_id "
                    f"{ep.scene_id!r}) of dataset {options.dataset!r} with env.habitat.scenes_dir="
                    f"{options.scenes_dir!r}")


class HabitatPointNavEnv(SceneMoves):
    """`num_envs` PointNav envs in this process, one simulator each (implements ddppo.envs.base.VecEnv)."""

    def __init__(self, options: HabitatOptions, spec: Any, episodes: list[Episode] | None = None):
        found = section_problems(options)
        if found:
            raise EnvError("invalid env.habitat options: " + "; ".join(found))
        self.opt, self._spec = options, spec
        self.num_envs = spec.num_envs
        group, groups = group_of(spec)
        self._placed_by: dict[str, float] | None = None  # episode_split=cost: the costs the scenes are placed by
        self._movable = episodes is None and options.episode_split == "cost"  # by measured costs (place_by_cost)
        if episodes is None:
            if options.episode_split == "cost":
                self._placed_by = measured_costs(options.scene_costs, getattr(spec, "scene_costs", ""),
                                                 "env.habitat.scene_costs")
            episodes = read_partition(options.dataset, groups, group, list(options.scenes), self.num_envs,
                                      options.episode_split, self._placed_by)
        else:
            episodes = [episodes[k] for k in partition(episodes, groups, group)]
        self._assign(episodes)
        self.env_scenes: list[str | None] = [None] * self.num_envs  # the scene each env plays (after a reset)
        self.step_clock = StepClock(self.num_envs)  # each env's step time per episode (EpisodeInfo.step_s)
        gpu = spec.gpu_device_id if options.gpu_device_id == -2 else options.gpu_device_id
        self._tasks: list[PointNavTask] = []
        try:  # simulators load no scene yet; building them first reports a missing habitat-sim first
            for i in range(self.num_envs):
                seed = int(np.random.SeedSequence([spec.seed, i]).generate_state(1)[0]) & 0x7FFFFFFF  # fits a C int
                settings = SimSettings.from_options(options, gpu_device_id=gpu, seed=seed)
                self._tasks.append(PointNavTask(make_simulator(options.backend, settings), options))
            check_files(options, self._episodes, [k for it in self._iters for k in it.indices])
        except BaseException:
            self.close()
            raise
        self.action_space = gymnasium.spaces.Discrete(len(ACTIONS))
        high = 1.0 if options.normalize_depth else options.max_depth
        spaces = {"depth": gymnasium.spaces.Box(0.0, high, (options.depth_height, options.depth_width, 1), np.float32),
                  GOAL_KEY: gymnasium.spaces.Box(-np.inf, np.inf, (2,), np.float32)}
        if options.rgb:
            spaces["rgb"] = gymnasium.spaces.Box(0, 255, (options.rgb_height, options.rgb_width, 3), np.uint8)
        self.observation_space = gymnasium.spaces.Dict(spaces)

    def _assign(self, episodes: list[Episode]) -> None:
        """This group's episodes, cut into one run per env, each env's iterator over its run."""
        self._episodes = episodes
        scene_of = [ep.scene_id for ep in episodes]
        self.scenes = tuple(sorted({scene_name(s) for s in scene_of}))  # ddppo.envs.base.declared_scenes
        self._iters = [EpisodeIterator(part, scene_of, [self._spec.seed, i], self.opt.shuffle)
                       for i, part in enumerate(env_partition(episodes, self.num_envs))]

    def _scene_units(self) -> list[str]:
        return scene_file_names(self.opt.dataset, list(self.opt.scenes))  # a single-file dataset is parsed to tell

    def _read_share(self, costs: dict[str, float]) -> list[Episode]:
        group, groups = group_of(self._spec)
        episodes = read_partition(self.opt.dataset, groups, group, list(self.opt.scenes), self.num_envs, "cost", costs)
        check_files(self.opt, episodes, range(len(episodes)))
        return episodes

    # ---------------------------------------------------------------- VecEnv
    def _start_next(self, i: int) -> dict[str, np.ndarray]:
        k = next(self._iters[i])
        ep = self._episodes[k]
        self.env_scenes[i] = scene_name(ep.scene_id)
        return self._tasks[i].reset(ep, k, resolve_scene(ep.scene_id, self.opt.scenes_dir))

    def _stack(self, rows: list[dict[str, np.ndarray]]) -> Obs:
        return {key: np.stack([r[key] for r in rows]) for key in self.observation_space.spaces}

    def reset(self) -> Obs:
        return self._stack([self._start_next(i) for i in range(self.num_envs)])

    def step(self, actions: np.ndarray) -> StepResult:
        actions = np.asarray(actions).reshape(self.num_envs)
        n = self.num_envs
        reward = np.zeros(n, np.float32)
        terminated = np.zeros(n, bool)
        truncated = np.zeros(n, bool)
        obs_rows, final_rows, finished = [], [], []
        for i in range(n):
            since = self.step_clock.clock()
            obs, r, term, trunc, metrics = self._tasks[i].step(int(actions[i]))
            reward[i], terminated[i], truncated[i] = r, term, trunc
            final_rows.append(obs)
            if metrics is not None:
                scene = self.env_scenes[i]
                obs = self._start_next(i)
                finished.append(EpisodeInfo(env_index=i, metrics=metrics, scene=scene, next_scene=self.env_scenes[i],
                                            step_s=self.step_clock.lap(i, since, ended=True)))
            else:
                self.step_clock.lap(i, since)
            obs_rows.append(obs)
        return StepResult(self._stack(obs_rows), reward, terminated, truncated, self._stack(final_rows), finished)

    def expert_actions(self) -> np.ndarray:
        """(N,) the shortest-path follower's next action in each env (ddppo.envs.base.expert_actions)."""
        if getattr(self, "_experts", None) is None:
            self._experts = [ShortestPathFollower(sim, self.opt.success_distance, self.opt.turn_angle)
                             for sim in self.simulators]
        goals = [np.asarray(ep.goals[0].position) for ep in self.current_episodes()]
        return np.array([f.act(g) for f, g in zip(self._experts, goals)], np.int64)

    def close(self) -> None:
        for task in reversed(self._tasks):  # last-created first (see ddppo.envs.scenes.sim)
            task.sim.close()
        self._tasks = []

    def state_dict(self) -> dict[str, Any]:
        return {"version": STATE_VERSION, "num_episodes": len(self._episodes), "assigned": self._assigned_digest(),
                "placed_by": self._placed_by,
                "iterators": [it.state_dict() for it in self._iters],
                "tasks": [task.state_dict() for task in self._tasks]}

    def _assigned_digest(self) -> str:
        """A digest of which episodes each env plays: a resume checks it continues on the same ones (a placement
        by cost may give this group other scenes once the measured costs change)."""
        digest = hashlib.sha1()
        for keys in self._assigned_keys():
            digest.update("\n".join(keys).encode() + b"\0")
        return digest.hexdigest()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore episode order and the running episodes (scene, pose, progress) of every env, placed as they were
        when saved (episode_split=cost: by the costs saved with them)."""
        if state.get("version") != STATE_VERSION or len(state["iterators"]) != self.num_envs:
            raise EnvError(f"habitat env state does not match this run: it holds {len(state['iterators'])} envs, "
                           f"this run has {self.num_envs} (same env.num_envs needed)")
        self._place_as_saved(state)  # refused below where it does not fit
        if int(state["num_episodes"]) != len(self._episodes):
            raise EnvError(f"habitat env state does not match this run: it holds {len(state['iterators'])} envs "
                           f"and {state.get('num_episodes')} episodes, this run has {self.num_envs} envs and "
                           f"{len(self._episodes)} episodes (same env.num_envs and dataset needed)")
        if "assigned" in state and state["assigned"] != self._assigned_digest():
            raise EnvError("habitat env state was saved with other episodes per env (the dataset, its scenes or their "
                           "placement by cost changed); fresh episodes needed")
        for it, sub in zip(self._iters, state["iterators"]):
            it.load_state_dict(sub)
        for task, sub in zip(self._tasks, state["tasks"]):
            if sub:
                ep = self._episodes[int(sub["episode"]["episode_index"])]
                task.load_state_dict(sub, ep, resolve_scene(ep.scene_id, self.opt.scenes_dir))
        self.env_scenes = [None if ep is None else scene_name(ep.scene_id) for ep in self.current_episodes()]

    # ---------------------------------------------------------------- introspection
    def assigned_episodes(self) -> list[list[Episode]]:
        """For each env, the episodes it plays in every pass."""
        return [[self._episodes[k] for k in it.indices] for it in self._iters]

    def current_episodes(self) -> list[Episode | None]:
        """The episode each env is playing (None before the first reset)."""
        return [task.episode for task in self._tasks]

    @property
    def simulators(self) -> list[Any]:
        return [task.sim for task in self._tasks]


def simulator_fps(options: HabitatOptions, spec: Any, steps: int) -> float:
    """Steps/s of one bare simulator on the first episode's scene, same sensors, random motion actions."""
    env = HabitatPointNavEnv(options, dataclasses.replace(spec, num_envs=1, num_workers=0))
    try:
        env.reset()
        sim = env.simulators[0]
        moves = np.random.default_rng(0).integers(1, len(ACTIONS), size=steps)
        sim.step(ACTIONS[1])  # warm-up: first render
        start = time.perf_counter()
        for a in moves:
            sim.step(ACTIONS[int(a)])
        return steps / (time.perf_counter() - start)
    finally:
        env.close()


def make_habitat_pointnav(options: HabitatOptions, spec: EnvSpec) -> HabitatPointNavEnv:
    """Registry factory for env.name=habitat_pointnav (in-process: the registry builds num_workers > 0 itself)."""
    return HabitatPointNavEnv(options, spec)
