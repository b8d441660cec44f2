"""A cheap environment with controllable step cost, for distributed and performance tests.

Observation `obs` (obs_dim,) float32 is fresh Gaussian noise each step. The
reward is 1 when the action equals argmax(W @ obs) for a fixed random matrix W
(drawn from the seed), else 0: learnable by a linear policy, with a known best
return of `episode_length` per episode. Episodes last exactly `episode_length`
steps and end by truncation.

Each batched step sleeps `step_sleep_s` (times `slow_factor` on `slow_ranks`;
times a factor exp(N(0, step_sleep_sigma^2)) redrawn at each episode, for
heterogeneous env speeds; plus `reset_sleep_s` when an episode ends) and, with
`step_compute` > 0, multiplies two (step_compute, step_compute) matrices to burn CPU. `fail_at_step` > 0
raises an error at that batched step (counted since construction), for tests of error handling. `nan_reward_at_step` > 0
makes the rewards NaN for `nan_reward_steps` batched steps from that step on (on
`nan_reward_ranks`, or every rank), for tests of non-finite updates. `nan_obs_at_step` > 0
makes env 0's observation after that batched step NaN, for tests of non-finite observations.

Scenes (`num_scenes` > 0; issue 44's preemption-bias benchmark): scene s has its own matrix W_s, the same on
every rank, and the observation ends with a one-hot of the env's scene, so one policy has to learn a mapping
per scene. Every scene holds the same number of env slots over all ranks, placed by `scene_placement`
(envs/placement.py): whole scenes in order (`contiguous`), spread by the costs the step factors give (`cost`), or
whole in order until the trainer offers measured costs, then spread by those (`measured`, the default:
`place_by_cost`). Scene s's steps cost `scene_step_factors[s]` x `step_sleep_s`; the envs of a batch step in turn
(as in one simulator process), each sleeping its own share, so a batched step sleeps the mean over its envs and
each env's step time is measured (`EpisodeInfo.step_s`). Episodes report their scene (`EpisodeInfo.scene`,
"scene<s>") and `success`: the fraction of their steps that earned the reward.
"""

from __future__ import annotations

import time
from typing import Any

import gymnasium
import numpy as np

from ddppo.envs.base import RESEED, EnvError, EpisodeInfo, Obs, StepClock, StepResult
from ddppo.field_metadata import section_problems
from ddppo.envs.synthetic.options import SyntheticOptions
from ddppo.envs.placement import place_scenes, replacement, scene_costs

SCENE_SEED = 0x5CE7E  # the scenes' matrices come from this, scene_seed and the scene index: alike on every rank


def scene_counts(options: SyntheticOptions, spec: Any) -> list[int]:
    """Env slots of each scene over all ranks (as equal as they divide)."""
    S = options.num_scenes
    total = spec.num_envs * max(1, spec.worker_count) * spec.world_size
    return [total // S + (1 if s < total % S else 0) for s in range(S)]


def placement_costs(options: SyntheticOptions, measured: dict[str, float] | None) -> list[float] | None:
    """Each scene's cost per env slot that `scene_placement` places by; None: whole scenes in order (contiguous, or
    measured with nothing measured yet)."""
    S = options.num_scenes
    if options.scene_placement == "cost":
        return [scene_factor(options, s) for s in range(S)]  # known: the step time each scene's factor gives
    if options.scene_placement == "measured" and measured:
        return scene_costs([f"scene{s}" for s in range(S)], measured)
    return None


def rank_layouts(options: SyntheticOptions, spec: Any, costs: list[float] | None) -> list[list[int]]:
    """Per rank, the scene index of each of its env slots: placed by `costs` (envs/placement.py), or whole scenes
    in order where None. A rank is the group that runs at one speed: it waits for its slowest batched step."""
    counts = scene_counts(options, spec)
    if costs is None:
        return place_scenes(counts, [1.0] * len(counts), spec.world_size, "contiguous")
    return place_scenes(counts, costs, spec.world_size, "cost")


def worker_share(layouts: list[list[int]], spec: Any) -> np.ndarray:
    """(spec.num_envs,) this batch's scenes: a worker's share of its rank's slots in env order, assuming the rank's
    envs split evenly over its workers."""
    lo = spec.worker_index * spec.num_envs
    return np.asarray(layouts[spec.rank][lo:lo + spec.num_envs], np.int64)


def scene_factor(options: SyntheticOptions, s: int) -> float:
    factors = options.scene_step_factors
    return float(factors[s % len(factors)]) if factors else 1.0


class SyntheticFailure(RuntimeError):
    """The deliberate failure asked for with `fail_at_step`."""


class SyntheticEnv:
    """Implements ddppo.envs.base.VecEnv."""

    def __init__(self, options: SyntheticOptions, spec: Any):
        problems = section_problems(options)
        if problems:
            raise EnvError("synthetic options: " + "; ".join(problems))
        self.options = options
        self.num_envs = spec.num_envs
        S = options.num_scenes
        self.observation_space = gymnasium.spaces.Dict(
            {"obs": gymnasium.spaces.Box(-np.inf, np.inf, (options.obs_dim + S,), np.float32)})
        self.action_space = gymnasium.spaces.Discrete(options.num_actions)
        self._projection = np.random.default_rng([spec.seed, 1]).standard_normal(
            (options.obs_dim, options.num_actions)).astype(np.float32)
        self._spec = spec
        slow = spec.rank in [int(r) for r in options.slow_ranks]
        self._sleep_s = options.step_sleep_s * (options.slow_factor if slow else 1.0)  # without scenes: per batch
        self._scene = np.zeros(self.num_envs, np.int64)
        self._placed_by: list[float] | None = None  # the costs the scenes are placed by (None: whole, in order)
        if S:
            self._scene_projection = np.stack([np.random.default_rng([SCENE_SEED, options.scene_seed, s]).standard_normal(
                (options.obs_dim, options.num_actions)).astype(np.float32) for s in range(S)])
            self.scenes = tuple(f"scene{s}" for s in range(S))  # ddppo.envs.base.declared_scenes
            self.episode_metrics = ("success",)
            self.step_clock = StepClock(self.num_envs)  # each env's step time per episode (EpisodeInfo.step_s)
            self._place(placement_costs(options, None))
        self._seed = spec.seed
        self._rng = np.random.default_rng([spec.seed, 2])
        self._nan_rank = not options.nan_reward_ranks or spec.rank in [int(r) for r in options.nan_reward_ranks]
        self._speed_rng = np.random.default_rng([spec.seed, 3])  # apart from the observations' stream
        self._speed = self._draw_speed()
        self._work = np.ones((options.step_compute, options.step_compute), np.float32) / max(1, options.step_compute)
        self._obs = np.zeros((self.num_envs, options.obs_dim + S), np.float32)
        self._steps = np.zeros(self.num_envs, np.int64)
        self._ret = np.zeros(self.num_envs, np.float64)
        self._total_steps = 0

    def _place(self, costs: list[float] | None) -> None:
        """Put this batch's envs on the scenes a placement by `costs` gives them (rank_layouts)."""
        self._placed_by = None if costs is None else [float(c) for c in costs]
        self._scene = worker_share(rank_layouts(self.options, self._spec, self._placed_by), self._spec)
        self._one_hot = np.eye(self.options.num_scenes, dtype=np.float32)[self._scene]
        self.env_scenes = [self.scenes[s] for s in self._scene]
        # each env's own share of a batched step's sleep: the envs step in turn, as in one simulator process
        self._env_sleep_s = np.asarray([self._sleep_s * scene_factor(self.options, int(s)) for s in self._scene])
        self._env_sleep_s /= self.num_envs

    def place_by_cost(self, measured: dict[str, float]) -> bool:
        """scene_placement=measured: the scenes re-placed by the measured costs where that makes the slowest rank
        measurably faster (envs/placement.py `replacement`; ddppo.envs.base.place_by_cost); True where this
        batch's scenes changed (the running episodes are left to the caller, who starts fresh ones)."""
        if self.options.scene_placement != "measured" or not self.options.num_scenes or not measured:
            return False
        costs = placement_costs(self.options, measured)
        current = rank_layouts(self.options, self._spec, self._placed_by)
        better = replacement(current, scene_counts(self.options, self._spec), costs, self._spec.world_size)
        if better is None:
            return False
        before = self._scene.copy()
        self._place(costs)
        return not np.array_equal(before, self._scene)

    def reset(self, seed: int | None = None) -> Obs:
        if seed is not None:  # fresh episodes from a stream of their own (see ddppo.envs.base.fresh_reset)
            self._rng = np.random.default_rng([self._seed, 2, RESEED, int(seed)])
        self._obs = self._draw(self.num_envs)
        self._steps[:] = 0
        if self.options.step_sleep_sigma > 0 or self.options.reset_sleep_s > 0:
            # heterogeneous envs: first episodes cut at random points, so resets spread as in habitat
            self._steps[:] = self._speed_rng.integers(0, self.options.episode_length, self.num_envs)
        self._ret[:] = 0.0
        if self.options.num_scenes:
            self.step_clock = StepClock(self.num_envs)
        return {"obs": self._obs.copy()}

    def step(self, actions: np.ndarray) -> StepResult:
        self._total_steps += 1
        if self.options.fail_at_step and self._total_steps == self.options.fail_at_step:
            raise SyntheticFailure(f"synthetic env: deliberate failure at step {self._total_steps} (fail_at_step)")
        self._sleep()
        a = np.asarray(actions).reshape(self.num_envs)
        reward = (a == self.best_actions({"obs": self._obs})).astype(np.float32)
        first_nan = self.options.nan_reward_at_step
        if self._nan_rank and first_nan and first_nan <= self._total_steps < first_nan + self.options.nan_reward_steps:
            reward[:] = np.nan
        self._ret += reward
        self._steps += 1
        truncated = self._steps >= self.options.episode_length
        terminated = np.zeros(self.num_envs, dtype=bool)
        final = self._draw(self.num_envs)  # the observation after this step
        episodes = []
        obs = final
        if truncated.any():
            idx = np.flatnonzero(truncated)
            episodes = [self._episode(int(i)) for i in idx]
            obs = final.copy()
            obs[idx] = self._draw(len(idx), idx)
            if self.options.reset_sleep_s > 0:
                time.sleep(self.options.reset_sleep_s)
            self._speed = self._draw_speed()
            self._steps[idx] = 0
            self._ret[idx] = 0.0
        if self.options.nan_obs_at_step and self._total_steps == self.options.nan_obs_at_step:
            obs = obs.copy()
            obs[0] = np.nan
        self._obs = obs
        return StepResult({"obs": obs.copy()}, reward, terminated, truncated, {"obs": final}, episodes)

    def close(self) -> None:
        pass

    def best_actions(self, obs: Obs) -> np.ndarray:
        """(N,) the rewarded action for each observation (an optimal policy); with scenes, row n is env n's."""
        x = np.asarray(obs["obs"], np.float32)
        if not self.options.num_scenes:
            return (x @ self._projection).argmax(axis=1)
        W = self._scene_projection[self._scene]  # (N, obs_dim, A)
        return np.einsum("nd,nda->na", x[:, :self.options.obs_dim], W).argmax(axis=1)

    def _episode(self, i: int) -> EpisodeInfo:
        metrics = {"return": float(self._ret[i]), "length": float(self._steps[i])}
        if not self.options.num_scenes:
            return EpisodeInfo(i, metrics)
        metrics["success"] = float(self._ret[i] / max(self._steps[i], 1))
        step_s = self.step_clock.lap(i, self.step_clock.clock(), ended=True)
        return EpisodeInfo(i, metrics, self.scenes[int(self._scene[i])], step_s=step_s)

    def state_dict(self) -> dict[str, Any]:
        return {"rng": self._rng.bit_generator.state, "obs": self._obs.copy(), "steps": self._steps.copy(),
                "ret": self._ret.copy(), "total_steps": self._total_steps, "projection": self._projection.copy(),
                "speed_rng": self._speed_rng.bit_generator.state, "speed": self._speed,
                "placed_by": None if self._placed_by is None else list(self._placed_by)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if np.shape(state["obs"]) != self._obs.shape:
            raise EnvError(f"synthetic state has obs shape {np.shape(state['obs'])}, expected {self._obs.shape}")
        if np.shape(state["projection"]) != self._projection.shape:
            raise EnvError("synthetic state has another obs_dim or num_actions")
        placed_by = state.get("placed_by")
        if self.options.num_scenes and placed_by is not None and len(placed_by) != self.options.num_scenes:
            raise EnvError(f"synthetic state was placed by {len(placed_by)} scene costs, this run has "
                           f"num_scenes={self.options.num_scenes}")
        self._projection = np.array(state["projection"], np.float32)
        if self.options.num_scenes and "placed_by" in state:
            self._place(placed_by)  # the placement the saved episodes were played under
        self._rng.bit_generator.state = state["rng"]
        self._obs = np.array(state["obs"], np.float32)
        self._steps = np.array(state["steps"], np.int64)
        self._ret = np.array(state["ret"], np.float64)
        self._total_steps = int(state["total_steps"])
        if "speed_rng" in state:
            self._speed_rng.bit_generator.state = state["speed_rng"]
            self._speed = float(state["speed"])

    def _draw(self, n: int, rows: np.ndarray | None = None) -> np.ndarray:
        """Fresh observations of `n` envs (the rows `rows` of the batch, default all), their scenes' one-hot last."""
        x = self._rng.standard_normal((n, self.options.obs_dim)).astype(np.float32)
        if not self.options.num_scenes:
            return x
        return np.concatenate([x, self._one_hot if rows is None else self._one_hot[rows]], axis=1)

    def _draw_speed(self) -> float:
        sigma = self.options.step_sleep_sigma
        return float(np.exp(self._speed_rng.normal(0.0, sigma))) if sigma > 0 else 1.0

    def _sleep(self) -> None:
        """The batched step's wall time: without scenes one sleep; with scenes each env's own share in turn, timed
        per env (step_s)."""
        if not self.options.num_scenes:
            self._burn(self._sleep_s * self._speed)
            return
        for i, seconds in enumerate(self._env_sleep_s):
            since = self.step_clock.clock()
            if seconds > 0:
                time.sleep(seconds * self._speed)
            self.step_clock.lap(i, since)
        self._burn()

    def _burn(self, sleep_s: float = 0.0) -> None:
        if sleep_s > 0:
            time.sleep(sleep_s)
        if self.options.step_compute > 0:
            self._work = (self._work @ self._work) / np.float32(self.options.step_compute)


def make_synthetic(options: SyntheticOptions, spec: Any) -> SyntheticEnv:
    """Registry factory for env.name=synthetic."""
    return SyntheticEnv(options, spec)
