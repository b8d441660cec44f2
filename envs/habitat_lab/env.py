"""Any habitat-lab task as a VecEnv (env.name: habitat_lab).

`make_habitat_lab(options, spec)` builds `spec.num_envs` habitat-lab `Env`s stepped in this process (subprocess
workers come from ddppo.envs.runtime.vector, which calls this factory once per worker: one process holds the Envs of its
share). Only this package imports `habitat`; the version differences live in envs/habitat_lab/compat.py.

Episodes are shared out so none is played twice in one pass: habitat-lab's dataset lists its scenes
(`get_scenes_to_load`: per-scene content files, or the scenes of one file), and the episodes go to
`world_size * worker_count` groups, one per (rank, worker), by `dataset.group_runs`: whole scenes per group
where that gives every group an episode per env (groups mapped to one scene split its episodes), else every
episode cut evenly over the groups, so no env replays an episode while another goes unused whenever the episodes
are at least the env slots. That needs every scene's episode count, so every group reads the whole dataset where
it is small (COUNT_LIMIT_BYTES); larger ones are dealt out by scenes alone, each group loading only its own
(`content_scenes`). Each group's episodes, ordered by scene, are then cut into one contiguous run per env; each env plays its own
run endlessly, reshuffled every pass (grouped by scene), by setting habitat-lab's `current_episode` before each
reset. With episode_split=cost (the default) whole scenes go to the groups by their measured step times and move
during a run when the trainer offers newer measurements (`place_by_cost`): the moved envs take their new episodes as
`current_episode` at their next reset.

Reward (habitat-lab's task defines measures, not a reward): `slack_reward` + the decrease of `reward_measure`
+ `success_reward` x `success_measure` at the episode's end, + `failed_stop_reward` where the task ended the
episode (STOP) without success (0 by default, habitat-baselines' reward). An episode ends when habitat-lab says so: the task
ended it (STOP: terminated) or the step/time limit did (truncated). Every scalar measure at the end is an
episode metric, under habitat-lab's name, plus ddppo's names for the ones its logs know (soft_spl,
collisions); `episode_metrics` declares them (the task's measures and the flattened parts of its dict measures),
so training aggregates every one of them as train/<name>, the name eval reports it under (eval/<name>).

Resuming: habitat-lab cannot restore a running episode, so `restores_state` is False: `state_dict` keeps the
episode order and position of every env, and after `load_state_dict` the caller starts fresh episodes -- the
ones next in each env's pass.
"""

from __future__ import annotations

import copy
import logging
import os
from typing import Any

import numpy as np

from ddppo.envs.base import EnvError, EnvSpec, EpisodeInfo, Obs, StepClock, StepResult
from ddppo.field_metadata import section_problems
from ddppo.envs.placement import measured_costs, scene_costs
from ddppo.envs.scenes.dataset import (COUNT_LIMIT_BYTES, EpisodeIterator, cost_placement, group_runs, partition,
                                       scene_name)
from ddppo.envs.scenes.moves import SceneMoves, group_of
from ddppo.envs.habitat_lab.compat import Api
from ddppo.envs.habitat_lab.options import HabitatLabOptions
from ddppo.envs.habitat_lab.spaces import ActionMap, convert_observation_space, scalar_metrics

log = logging.getLogger(__name__)
STATE_VERSION = 1
MAX_LISTED = 100_000  # state_dict lists the episodes of each env for datasets up to this size
ALIASES = {"softspl": "soft_spl", "collisions_count": "collisions"}  # habitat-lab measure -> ddppo's metric name


def scene_share(scenes: list[str], groups: int, group: int) -> tuple[list[str], int, int]:
    """(this group's scenes, how many groups share them, this group's place among those)."""
    n = len(scenes)
    if n >= groups:
        return scenes[group * n // groups:(group + 1) * n // groups], 1, 0
    k = group * n // groups
    sharing = [g for g in range(groups) if g * n // groups == k]
    return [scenes[k]], len(sharing), group - sharing[0]


def configured(api: Api, options: HabitatLabOptions, spec: Any) -> Any:
    """The task config with ddppo's settings: data paths from the options, the renderer device."""
    cfg = api.load_config(options.config, list(options.overrides))
    values: dict[str, Any] = {}
    for key in ("dataset", "split", "scenes_dir"):
        if getattr(options, key):
            values["data_path" if key == "dataset" else key] = getattr(options, key)
    if options.max_episode_steps:
        values["max_steps"] = int(options.max_episode_steps)
    gpu = spec.gpu_device_id if options.gpu_device_id == -2 else options.gpu_device_id
    values["gpu"] = int(gpu)
    return api.replace(cfg, **values)


def check_dataset(api: Api, cfg: Any) -> None:
    data_path, split = str(api.get(cfg, "data_path")), str(api.get(cfg, "split"))
    path = data_path.format(split=split)
    if not os.path.isfile(path):
        raise EnvError(f"habitat-lab dataset file {path!r} does not exist (data path {data_path!r}, split {split!r}; "
                       "set env.habitat_lab.dataset / split, or the task config's dataset)")
    scenes_dir = str(api.get(cfg, "scenes_dir"))
    if not os.path.isdir(scenes_dir):
        raise EnvError(f"habitat-lab scenes folder {scenes_dir!r} does not exist (set env.habitat_lab.scenes_dir)")


def check_scenes(episodes: list[Any], data_path: str) -> None:
    """One EnvError naming the first missing scene file and an episode that needs it."""
    seen: set[str] = set()
    for ep in episodes:
        if ep.scene_id in seen:
            continue
        seen.add(ep.scene_id)
        if not os.path.isfile(ep.scene_id):
            raise EnvError(f"scene file {ep.scene_id!r} does not exist; needed by episode {ep.episode_id!r} of "
                           f"dataset {data_path!r} (check env.habitat_lab.scenes_dir)")


def load_share(api: Api, cfg: Any, spec: Any, split: str = "scenes",
               costs: dict[str, float] | None = None) -> tuple[Any, list[Any]]:
    """(the dataset holding this group's episodes, this group's episodes ordered by scene); `split`:
    env.habitat_lab.episode_split (dataset.group_runs), `costs` the measured scene costs it places by (cost)."""
    check_dataset(api, cfg)
    group, groups = group_of(spec)
    scenes = api.scenes_to_load(cfg)
    if not scenes:
        raise EnvError(f"habitat-lab dataset {api.get(cfg, 'data_path')!r} lists no scenes")
    weights = scene_costs(scenes, costs or {}) if split == "cost" else None
    counted = episodes_by_scene(api, cfg, scenes)
    if counted is not None:  # every scene's episodes known: deal them so no env replays while others go unused
        dataset, by_scene = counted
        runs = group_runs([len(by_scene[s]) for s in scenes], groups, group, spec.num_envs, split, weights)
        episodes = [ep for s, a, b in runs for ep in by_scene[scenes[s]][a:b]]
        log.info("%s: rank %d worker %d plays %d episodes of scenes %s", api.label, spec.rank,
                 int(getattr(spec, "worker_index", 0)), len(episodes), sorted({scenes[s] for s, _, _ in runs}))
    else:
        dataset, episodes = _load_scene_wise(api, cfg, spec, scenes, weights)
    if not episodes:
        raise EnvError(f"habitat-lab dataset {api.get(cfg, 'data_path')!r} has no episodes for this worker's "
                       f"scenes ({len(scenes)} scenes)")
    order = sorted(range(len(episodes)), key=lambda k: (episodes[k].scene_id, k))
    return dataset, [episodes[k] for k in order]


def episodes_by_scene(api: Api, cfg: Any, scenes: list[str]) -> tuple[Any, dict[str, list[Any]]] | None:
    """(the dataset of every scene, each scene's episodes in dataset order), where the dataset is small enough for
    every (rank, worker) to read it whole (COUNT_LIMIT_BYTES of per-scene content files; a single file is read
    whole anyway) and its class names an episode's scene; else None."""
    path = str(api.get(cfg, "data_path")).format(split=str(api.get(cfg, "split")))
    content = os.path.join(os.path.dirname(path), "content")
    if os.path.isdir(content):
        files = [os.path.join(content, f) for f in os.listdir(content)]
        if sum(os.path.getsize(f) for f in files if os.path.isfile(f)) > COUNT_LIMIT_BYTES:
            return None
    scene_of = getattr(api.dataset_class(cfg), "scene_from_scene_path", None)
    if scene_of is None:
        return None
    dataset = api.make_dataset(api.replace(cfg, content_scenes=list(scenes)))
    by_scene: dict[str, list[Any]] = {s: [] for s in scenes}
    for ep in dataset.episodes:
        name = scene_of(ep.scene_id)
        if name not in by_scene:
            return None  # an episode of a scene the listing does not name: deal out scenes whole, as listed
        by_scene[name].append(ep)
    return dataset, by_scene


def _load_scene_wise(api: Api, cfg: Any, spec: Any, scenes: list[str],
                     costs: list[float] | None = None) -> tuple[Any, list[Any]]:
    """Whole scenes per (rank, worker) (`scene_share`, or placed by `costs` where they are at least the groups:
    `cost_placement`); only this group's scenes are read (large datasets)."""
    group, groups = group_of(spec)
    mine, sharing, place = scene_share(scenes, groups, group)
    if costs is not None and len(scenes) >= groups:
        mine = [scenes[s] for s in cost_placement(costs, groups)[group]]
    log.info("%s: rank %d worker %d plays scenes %s%s", api.label, spec.rank, int(getattr(spec, "worker_index", 0)),
             mine, f" (share {place + 1} of {sharing} of their episodes)" if sharing > 1 else "")
    dataset = api.make_dataset(api.replace(cfg, content_scenes=mine))
    episodes = list(dataset.episodes)
    if sharing > 1 and episodes:
        episodes = [episodes[k] for k in partition(episodes, sharing, place)]
    return dataset, episodes


class HabitatLabVecEnv(SceneMoves):
    """`num_envs` habitat-lab Envs in this process (implements ddppo.envs.base.VecEnv)."""

    restores_state = False  # habitat-lab cannot put an episode back mid-way: resume starts fresh episodes

    def __init__(self, options: HabitatLabOptions, spec: Any, api: Api | None = None):
        found = section_problems(options)
        if found:
            raise EnvError("invalid env.habitat_lab options: " + "; ".join(found))
        self.opt = options
        self.api = api if api is not None else Api()
        self.num_envs = spec.num_envs
        cfg = configured(self.api, options, spec)
        self._cfg, self._spec = cfg, spec
        self._movable = options.episode_split == "cost"  # moves its scenes by measured costs (place_by_cost)
        # episode_split=cost: the costs the scenes are placed by
        self._placed_by = (measured_costs(options.scene_costs, getattr(spec, "scene_costs", ""),
                                          "env.habitat_lab.scene_costs") if self._movable else None)
        dataset, episodes = load_share(self.api, cfg, spec, options.episode_split, self._placed_by)
        parts = self._assign(episodes)
        self.step_clock = StepClock(self.num_envs)  # each env's step time per episode (EpisodeInfo.step_s)
        self._envs: list[Any] = []
        try:
            for i, part in enumerate(parts):
                seed = int(np.random.SeedSequence([spec.seed, i]).generate_state(1)[0]) & 0x7FFFFFFF
                mine = copy.copy(dataset)
                mine.episodes = [self._episodes[k] for k in part]
                self._envs.append(self.api.make_env(self.api.replace(cfg, seed=seed), mine))
        except EnvError:
            self.close()
            raise
        except Exception as exc:
            self.close()
            raise EnvError(f"{self.api.label} could not build its Env for {options.config!r}: {type(exc).__name__}: "
                           f"{' '.join(str(exc).split())[:300]}") from exc
        first = self._envs[0]
        self.observation_space, self._convert = convert_observation_space(first.observation_space)
        self.actions = ActionMap(list(first.task.actions.keys()), first.action_space)
        self.action_space = self.actions.space
        self.episode_metrics = self._declared_metrics(first, self._episodes[parts[0][0]])
        self._current: list[Any] = [None] * self.num_envs
        self._measure = np.zeros(self.num_envs, np.float64)
        self._ret = np.zeros(self.num_envs, np.float64)
        self._len = np.zeros(self.num_envs, np.int64)
        self.episodes_done = 0

    def _declared_metrics(self, env: Any, episode: Any) -> tuple[str, ...]:
        """The task's measures (their uuids), the flattened names of its dict measures (`collisions_count`,
        `collisions_is_collision`), ddppo's aliases, success, return and length: the episode metrics a trainer
        aggregates (ddppo.envs.base.declared_metrics), so train/<name> and eval/<name> name the same metrics. A
        dict measure's keys are known once it has a value: `env` starts `episode` (its first) to read them;
        `reset` starts it again."""
        measurements = getattr(getattr(env, "task", None), "measurements", None)
        uuids = [str(u) for u in getattr(measurements, "measures", {})]
        env.current_episode = episode
        env.reset()
        flattened = [n for n in scalar_metrics(env.get_metrics()) if n not in uuids]
        reported = uuids + flattened
        aliases = [ours for theirs, ours in ALIASES.items() if theirs in reported or theirs.split("_")[0] in uuids]
        return tuple(dict.fromkeys(reported + aliases + ["success", "return", "length"]))

    def _assign(self, episodes: list[Any]) -> list[list[int]]:
        """This group's episodes, cut into one run per env (returned), each env's iterator over its run."""
        self._episodes = episodes
        if self.num_envs > len(episodes):
            log.warning("only %d episodes for %d envs: some envs replay the same episodes in one pass",
                        len(episodes), self.num_envs)
        parts = [partition(episodes, self.num_envs, i) for i in range(self.num_envs)]
        check_scenes([episodes[k] for part in parts for k in part], str(self.api.get(self._cfg, "data_path")))
        scene_of = [ep.scene_id for ep in episodes]
        self.scenes = tuple(sorted({scene_name(s) for s in scene_of}))  # ddppo.envs.base.declared_scenes
        self._iters = [EpisodeIterator(part, scene_of, [self._spec.seed, i], self.opt.shuffle)
                       for i, part in enumerate(parts)]
        return parts

    def _scene_units(self) -> list[str]:
        return list(self.api.scenes_to_load(self._cfg))  # habitat-lab may read the dataset to list them

    def _read_share(self, costs: dict[str, float]) -> list[Any]:
        """(Each env takes its new episodes as habitat-lab's `current_episode` at its next reset: the Env takes any
        episode.)"""
        return load_share(self.api, self._cfg, self._spec, "cost", costs)[1]

    # ---------------------------------------------------------------- VecEnv
    def _start_next(self, i: int) -> dict[str, np.ndarray]:
        ep = self._episodes[next(self._iters[i])]
        env = self._envs[i]
        env.current_episode = ep
        obs = env.reset()
        self._current[i] = ep
        self._ret[i], self._len[i] = 0.0, 0
        self._measure[i] = self._reward_measure(env.get_metrics())
        return self._convert(obs)

    def _reward_measure(self, metrics: dict[str, Any]) -> float:
        if not self.opt.reward_measure:
            return 0.0
        if self.opt.reward_measure not in metrics:
            raise EnvError(f"env.habitat_lab.reward_measure={self.opt.reward_measure!r} is not one of the task's "
                           f"measures {sorted(metrics)} (add it to the task config's measurements, or set '')")
        return float(metrics[self.opt.reward_measure])

    def _stack(self, rows: list[dict[str, np.ndarray]]) -> Obs:
        return {key: np.stack([r[key] for r in rows]) for key in self.observation_space.spaces}

    def reset(self, seed: int | None = None) -> Obs:
        """Every env starts the next episode of its pass (`seed` is accepted for resume: the episode order
        is the env's own, restored by `load_state_dict`, so fresh episodes are the ones not yet started)."""
        return self._stack([self._start_next(i) for i in range(self.num_envs)])

    def _reward(self, i: int, metrics: dict[str, Any], done: bool, ended: bool = False) -> tuple[float, float]:
        """(reward of this step, success at this step); `ended`: the task ended the episode (STOP)."""
        now = self._reward_measure(metrics)
        reward = self.opt.slack_reward + (self._measure[i] - now)
        self._measure[i] = now
        success = float(metrics.get(self.opt.success_measure, 0.0) or 0.0) if done else 0.0
        failed_stop = self.opt.failed_stop_reward if ended and success <= 0.0 else 0.0
        return float(reward + self.opt.success_reward * success + failed_stop), success

    def step(self, actions: np.ndarray) -> StepResult:
        n = self.num_envs
        actions = np.asarray(actions).reshape(n, -1)
        reward, terminated, truncated = np.zeros(n, np.float32), np.zeros(n, bool), np.zeros(n, bool)
        obs_rows, final_rows, finished = [], [], []
        for i, env in enumerate(self._envs):
            since = self.step_clock.clock()
            obs = self._convert(env.step(self.actions.to_habitat(actions[i])))
            done = bool(env.episode_over)
            ended = done and not env.task.is_episode_active  # the task ended it (STOP), not the limit
            metrics = env.get_metrics()
            reward[i], _ = self._reward(i, metrics, done, ended)
            self._ret[i] += reward[i]
            self._len[i] += 1
            final_rows.append(obs)
            if done:
                terminated[i], truncated[i] = ended, not ended
                info = EpisodeInfo(i, self._episode_metrics(i, metrics), _scene_of(env))
                obs = self._start_next(i)
                info.next_scene = _scene_of(env)
                info.step_s = self.step_clock.lap(i, since, ended=True)
                finished.append(info)
            else:
                self.step_clock.lap(i, since)
            obs_rows.append(obs)
        self.episodes_done += len(finished)
        return StepResult(self._stack(obs_rows), reward, terminated, truncated, self._stack(final_rows), finished)

    def expert_actions(self) -> np.ndarray:
        """(N,) habitat-lab's ShortestPathFollower's next action in each env towards the nearest goal (an ObjectNav
        goal's nearest view point), in this env's action indices (ddppo.envs.base.expert_actions)."""
        if self.actions.continuous is not None:
            raise EnvError("habitat-lab's shortest-path expert acts with discrete actions; this task's are "
                           "continuous: record with --policy")
        if getattr(self, "_followers", None) is None:
            self._followers = [self.api.shortest_path_follower(env.sim, EXPERT_GOAL_RADIUS) for env in self._envs]
        out = np.zeros(self.num_envs, np.int64)
        for i, (env, (follower, names)) in enumerate(zip(self._envs, self._followers)):
            action = follower.get_next_action(_nearest_goal(env))
            name = "stop" if action is None else names.get(int(action))
            if name not in self.actions.names:
                raise EnvError(f"habitat-lab's follower chose {name or action!r}, which is not among this task's "
                               f"actions {self.actions.names}")
            out[i] = self.actions.names.index(name)
        return out

    def _episode_metrics(self, i: int, metrics: dict[str, Any]) -> dict[str, float]:
        out = scalar_metrics(metrics)
        for theirs, ours in ALIASES.items():
            if theirs in out and ours not in out:
                out[ours] = out[theirs]
        if self.opt.success_measure in out and self.opt.success_measure != "success":
            out.setdefault("success", out[self.opt.success_measure])
        out["return"], out["length"] = float(self._ret[i]), float(self._len[i])
        return out

    def close(self) -> None:
        for env in reversed(self._envs):  # last-created first, as for habitat-sim simulators
            try:
                env.close()
            except Exception as exc:  # closing must not hide the error that brought us here
                log.warning("closing a habitat-lab Env failed: %s", exc)
        self._envs = []

    def state_dict(self) -> dict[str, Any]:
        """Episode order and place per env, and (datasets up to MAX_LISTED episodes) which episodes each env
        plays, so a resume checks it continues on the same ones (and a checkpoint shows the shares)."""
        state = {"version": STATE_VERSION, "num_episodes": len(self._episodes), "episodes_done": self.episodes_done,
                 "iterators": [it.state_dict() for it in self._iters], "placed_by": self._placed_by}
        if len(self._episodes) <= MAX_LISTED:
            state["assigned"] = self._assigned_keys()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore each env's episode order and place in it (running episodes are not restored), placed as they
        were when saved (episode_split=cost: by the costs saved with them)."""
        if state.get("version") != STATE_VERSION or len(state["iterators"]) != self.num_envs:
            raise EnvError(f"habitat-lab env state does not match this run: it holds {len(state['iterators'])} envs, "
                           f"this run has {self.num_envs} (same env.num_envs needed)")
        self._place_as_saved(state)  # refused below where it does not fit
        if int(state["num_episodes"]) != len(self._episodes):
            raise EnvError(f"habitat-lab env state does not match this run: it holds {len(state['iterators'])} envs "
                           f"and {state.get('num_episodes')} episodes, this run has {self.num_envs} envs and "
                           f"{len(self._episodes)} episodes (same env.num_envs and dataset needed)")
        if "assigned" in state and [list(a) for a in state["assigned"]] != self._assigned_keys():
            raise EnvError("habitat-lab env state was saved with other episodes per env (the dataset, its scenes or "
                           "the share of this rank changed); fresh episodes needed")
        for it, sub in zip(self._iters, state["iterators"]):
            it.load_state_dict(sub)
        self.episodes_done = int(state["episodes_done"])

    # ---------------------------------------------------------------- introspection
    def assigned_episodes(self) -> list[list[Any]]:
        """For each env, the episodes it plays in every pass."""
        return [[self._episodes[k] for k in it.indices] for it in self._iters]

    def current_episodes(self) -> list[Any]:
        """The episode each env is playing (None before the first reset)."""
        return list(self._current)

    @property
    def env_scenes(self) -> list[str | None]:
        """The scene each env plays (ddppo.envs.base.env_scenes; None before the first reset)."""
        return [_scene_of(env) if ep is not None else None for env, ep in zip(self._envs, self._current)]

    @property
    def habitat_envs(self) -> list[Any]:
        return list(self._envs)


def make_habitat_lab(options: HabitatLabOptions, spec: EnvSpec) -> HabitatLabVecEnv:
    """Registry factory for env.name=habitat_lab (in-process: the registry builds num_workers > 0 itself)."""
    return HabitatLabVecEnv(options, spec)


def _scene_of(env: Any) -> str | None:
    """The scene name of the episode `env` (a habitat.Env) plays, None if it cannot tell."""
    episode = getattr(env, "current_episode", None)
    scene = getattr(episode, "scene_id", None)
    return scene_name(str(scene)) if scene else None


EXPERT_GOAL_RADIUS = 0.1  # the follower stops within this of its goal point (inside the tasks' success distances)


def _nearest_goal(env: Any) -> np.ndarray:
    """The goal point of `env`'s episode nearest to the agent by geodesic distance: each goal's view points where it
    has some (ObjectNav), else its position (PointNav)."""
    points = []
    for goal in env.current_episode.goals:
        views = getattr(goal, "view_points", None) or []
        points += [np.asarray(v.agent_state.position) for v in views] or [np.asarray(goal.position)]
    here = env.sim.get_agent_state().position
    return points[int(np.argmin([env.sim.geodesic_distance(here, p) for p in points]))]
