"""The batched environment protocol every environment in `envs/` implements.

A `VecEnv` steps `num_envs` copies of one task at once. Everything is batched
numpy: observations are a dict of arrays shaped `(num_envs, *shape)`; actions
are `(num_envs,)` int64 for discrete spaces and `(num_envs, dim)` float32 for
boxes.

Episodes reset automatically (unless grouped: see `StepResult.idle`). When env `i` finishes at a step, `StepResult.obs[i]`
already holds the first observation of its next episode, `final_obs[i]` holds
the last observation of the finished one (needed to bootstrap truncated
episodes), and one `EpisodeInfo` for it is appended to `episodes`.

This package never imports `ddppo`.
"""

from __future__ import annotations

import dataclasses
import inspect
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Iterable, Protocol, runtime_checkable

import gymnasium
import numpy as np

Obs = dict[str, np.ndarray]


@dataclasses.dataclass
class EpisodeInfo:
    """Summary of one finished episode."""

    env_index: int
    metrics: dict[str, float]  # always "return" and "length"; tasks add e.g. success, spl
    scene: str | None = None  # the scene the episode played (see `declared_scenes`), None: the env has none
    # the scene of the episode the env started in its place (auto-reset), None: it cannot tell yet (a grouped env's
    # next episode starts later); a trainer then takes it to be `scene` (see `env_scenes`)
    next_scene: str | None = None
    # seconds the env spent in this episode's steps (`StepClock`), None: the env does not time its envs' steps
    step_s: float | None = None


@dataclasses.dataclass
class StepResult:
    """What one batched step returns."""

    obs: Obs  # observation after the step (after auto-reset where done)
    reward: np.ndarray  # (N,) float32
    terminated: np.ndarray  # (N,) bool: the task ended (success, failure)
    truncated: np.ndarray  # (N,) bool: cut by a time limit; bootstrap from final_obs
    final_obs: Obs  # (N, ...) last observation of the finished episode; rows where not done are unspecified
    episodes: list[EpisodeInfo]  # one per env that finished this step
    # Grouped episodes (EnvSpec.group_size > 1, for critic-free GRPO): a member that finished waits, frozen,
    # until every member of its group has finished; then the whole group starts one shared new episode.
    idle: np.ndarray | None = None  # (N,) bool: this step was a no-op for an env waiting for its group
    started: np.ndarray | None = None  # (N,) bool: obs is the first of a new episode (None: same as done)

    @property
    def done(self) -> np.ndarray:
        return self.terminated | self.truncated

    @property
    def episode_start(self) -> np.ndarray:
        return self.done if self.started is None else self.started

    @property
    def stepped(self) -> np.ndarray:
        """(N,) bool: the envs that stepped (not idle, waiting for their group)."""
        return np.ones(len(self.reward), bool) if self.idle is None else ~np.asarray(self.idle, bool)


@runtime_checkable
class VecEnv(Protocol):
    """A batch of environments stepped together."""

    num_envs: int
    observation_space: gymnasium.spaces.Dict  # of ONE env (no batch dimension)
    action_space: gymnasium.spaces.Space  # of ONE env: Discrete or Box

    def reset(self) -> Obs:
        """Reset every env; seeding happens at construction. Envs that can also take
        `reset(seed=s)` start their episodes from a stream derived from (their own seed, s)
        instead (see `fresh_reset`)."""
        ...

    def step(self, actions: np.ndarray) -> StepResult: ...

    def close(self) -> None: ...

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue bit-identically: RNG states, episode state.

        Values are built from Python scalars, lists, dicts and numpy arrays only,
        so a checkpoint can store them without pickling objects.
        """
        ...

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Put the envs back where `state_dict` found them. An env class that cannot (gymnasium)
        restores only its counters and sets `restores_state = False` (see `restores_state`)."""
        ...

    # Optional attribute `episode_metrics: tuple[str, ...]`: the names of the scalar episode metrics
    # (EpisodeInfo.metrics) it reports, known at construction (see `declared_metrics`).


@dataclasses.dataclass
class WorkerStep:
    """One worker's finished step: envs lo:hi of the batch (arrays may be views the worker reuses on its next
    step: copy what must outlive that)."""

    worker: int
    lo: int
    hi: int
    result: StepResult  # rows of this worker only; episodes' env_index counts from 0 of the whole batch


@runtime_checkable
class AsyncVecEnv(VecEnv, Protocol):
    """A VecEnv whose envs step in workers that can be sent and received one at a time (ddppo.envs.runtime.vector's
    SubprocVecEnv). The overlapped and variable rollouts are built on this API alone."""

    @property
    def bounds(self) -> list[tuple[int, int]]:
        """(lo, hi) rows of the batch each worker steps."""
        ...

    @property
    def in_flight(self) -> frozenset[int]:
        """Workers sent a step whose result has not been received."""
        ...

    @property
    def timeout_s(self) -> float:
        """How long a worker may take for one step before it is reported as hung."""
        ...

    def send(self, w: int, actions: np.ndarray) -> None:
        """Start a step of worker `w`'s envs with `actions` (its rows only); returns at once."""
        ...

    def recv(self, min_ready: int = 1, wait_s: float = 0.0,
             workers: Iterable[int] | None = None) -> list[WorkerStep]:
        """Finished steps of in-flight workers (of `workers` only, if given), in worker order: at least one, and
        up to `min_ready` if they finish within `wait_s` of the first."""
        ...

    def recv_all(self) -> list[WorkerStep]:
        """Every step in flight, received (the workers are idle afterwards)."""
        ...


def worker_count(env: Any) -> int:
    """How many asynchronous workers `env` steps in (0: it is no AsyncVecEnv)."""
    return len(env.bounds) if isinstance(env, AsyncVecEnv) else 0


RESEED = 0x5EED  # entropy tag of the streams reset(seed=...) derives, apart from the run-start ones


def restores_state(env: Any) -> bool:
    """True if `env.load_state_dict` puts the envs back in their saved episodes (the default); False
    if it restores only counters (attribute `restores_state = False`): the caller must then start
    fresh episodes, and treat the observations `reset` returns as episode starts."""
    return bool(getattr(env, "restores_state", True))


def declared_metrics(env: Any) -> tuple[str, ...]:
    """The episode metric names `env` declares at construction (attribute `episode_metrics`; empty if none).
    A trainer aggregating metrics across processes fixes its columns from these before the first episode ends
    (return and length, and the names of the trainer's own list, need no declaring)."""
    return tuple(str(n) for n in getattr(env, "episode_metrics", ()) or ())


def declared_scenes(env: Any) -> tuple[str, ...]:
    """The scene names `env` may play, declared at construction (attribute `scenes`; empty: the env has no notion
    of a scene). A scene is what a task's skill and a simulator's speed depend on: habitat's scene id, gridnav's
    map layouts by number of rooms, the synthetic env's `num_scenes`, a gymnasium env's `scene_id` attribute. The
    trainer fixes its per-scene columns from these before the first update (ddppo/rollout/scenes.py)."""
    return tuple(str(n) for n in getattr(env, "scenes", ()) or ())


def env_scenes(env: Any) -> list[str | None]:
    """The scene of each env's current episode (attribute `env_scenes`, one entry per env; None where unknown),
    read after `reset` and `load_state_dict`; an env keeps it current. While stepping, a trainer follows each env's
    scene through its finished episodes instead: `EpisodeInfo.scene` is the finished episode's, `next_scene` the
    one that starts in its place (None: taken to be the same scene; ddppo/rollout/scenes.py)."""
    given = list(getattr(env, "env_scenes", ()) or ())
    n = int(getattr(env, "num_envs", len(given)))
    return [None if s is None else str(s) for s in given[:n]] + [None] * max(0, n - len(given))


def place_by_cost(env: Any, costs: dict[str, float]) -> bool:
    """Offer `env` the scenes' measured costs (`{scene: seconds per env step}`, the same on every rank: a trainer's
    measurements so far) to move its scenes by: the optional method `place_by_cost(costs) -> bool` of envs whose
    placement follows measured costs (habitat and habitat-lab with episode_split=cost, synthetic with
    scene_placement=measured; envs/placement.py decides, the same way on every rank and worker). True where this
    env's assignment changed: its running episodes were played under the old one, so the caller starts fresh
    episodes (`fresh_reset`). Such an env saves the costs its placement used in `state_dict` and places by them
    again in `load_state_dict`. Envs without the method keep their scenes (False)."""
    method = getattr(env, "place_by_cost", None)
    return bool(method(dict(costs))) if callable(method) else False


def expert_actions(env: Any) -> np.ndarray | None:
    """The env's expert's actions for its current observations, (N,) or (N, A), from the optional method
    `expert_actions()` of envs that have an expert (gridnav's shortest path, habitat's ShortestPathFollower): what
    `ddppo record` records without a policy. None where the env has none (envs stepped in subprocess workers
    forward no such call: record with env.num_workers=0)."""
    method = getattr(env, "expert_actions", None)
    return np.asarray(method()) if callable(method) else None


class StepClock:
    """The seconds each env of a batch stepped in turn in one process spends in its own steps, summed per episode
    for `EpisodeInfo.step_s` (what a scene costs: ddppo's train/scene/<name>/step_ms, envs/placement.py). The step
    that ends an episode counts with the reset that starts the next, as the env does both in it; a restored
    episode's steps before the save are not counted. `clock`: a seconds counter (a test's scripted time)."""

    def __init__(self, num_envs: int, clock: Callable[[], float] = time.perf_counter):
        self.clock = clock
        self._seconds = np.zeros(num_envs)

    def lap(self, i: int, since: float, ended: bool = False) -> float:
        """Add the time from `since` (a `clock()` reading) to env i's episode; its total so far, and with `ended`
        the finished episode's total (the next starts from 0)."""
        self._seconds[i] += self.clock() - since
        total = float(self._seconds[i])
        if ended:
            self._seconds[i] = 0.0
        return total


def fresh_reset(env: Any, seed: int) -> Obs:
    """Reset `env` into fresh episodes from a stream derived from `seed` where its `reset` takes a
    seed (gymnasium, gridnav, synthetic, subprocess workers), else from its own stream."""
    if "seed" in inspect.signature(env.reset).parameters:
        return env.reset(seed=seed)
    return env.reset()


class EnvError(RuntimeError):
    """An environment could not be built or failed; the message says what to fix (its first line; later lines,
    e.g. an env's traceback, are details)."""


ENVS_DIR = Path(__file__).resolve().parent


def exception_summary(exc: BaseException) -> str:
    """`Type: message (at file:line in function)` of the innermost frame, on one line; a file of envs/ named from
    there (`synthetic/env.py`), any other by its name."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" (at {_short_name(frames[-1].filename)}:{frames[-1].lineno} in {frames[-1].name})" if frames else ""
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}{where}"


def _short_name(filename: str) -> str:
    path = Path(filename).resolve()
    return path.relative_to(ENVS_DIR).as_posix() if ENVS_DIR in path.parents else path.name


def env_failure(exc: BaseException) -> EnvError | None:
    """An exception raised inside an environment (its traceback passes through this package) as the EnvError
    the CLI reports, the same as a subprocess worker's: `env failed during 'step': Type: message (at ...)`,
    then the traceback; None for an exception from elsewhere."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if ENVS_DIR in Path(f.filename).resolve().parents]
    if isinstance(exc, EnvError) or not frames:
        return None
    details = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return EnvError(f"env failed during {frames[0].name!r}: {exception_summary(exc)}\n{details}")


@dataclasses.dataclass(frozen=True)
class EnvSpec:
    """Everything a factory needs besides its options."""

    num_envs: int  # envs on this rank
    seed: int  # this rank's seed
    num_workers: int = 0  # 0: step in this process; >0: subprocess workers
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    gpu_device_id: int = -1  # renderer device for simulators; -1 = CPU/EGL software
    worker_index: int = 0  # which share of this rank's envs this batch is (set for subprocess workers)
    worker_count: int = 1  # how many shares this rank's envs are split into (e.g. to partition episodes)
    worker_timeout_s: float = 60.0  # a subprocess worker silent this long on a step/reset is reported as hung
    worker_start_timeout_s: float = 600.0  # the same for building the envs in a worker
    group_size: int = 1  # >1: envs run shared episodes in groups of this size (GRPO; see StepResult.idle)
    # measured seconds per env step of each scene (JSON {scene: seconds}: the run directory's scene_costs.json, which
    # the trainer writes), for envs that place scenes by cost when their options name no file; "": none
    scene_costs: str = ""


def rank_env_spec(ctx: Any, num_envs: int, seed: int, num_workers: int = 0, group_size: int = 1,
                  scene_costs: str = "") -> EnvSpec:
    """The environments of one rank of a run, the one place that says which a rank builds (training and
    evaluation): `ctx` is its distributed context (rank, world_size, local_rank, device: the renderer's GPU)."""
    return EnvSpec(num_envs=num_envs, seed=seed, num_workers=num_workers, rank=ctx.rank, world_size=ctx.world_size,
                   local_rank=ctx.local_rank, gpu_device_id=ctx.device.index if ctx.device.type == "cuda" else -1,
                   group_size=group_size, scene_costs=scene_costs)
