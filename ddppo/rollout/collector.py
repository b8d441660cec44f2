"""Rollout collection: the interface every strategy implements, and what they share.

`RolloutCollector` is the one interface the trainer sees: `collect(update)`, `state_dict()`,
`load_state_dict(state)` (and `resume`, `last_value`). Three strategies implement it, each in its own module,
built by `rollout/factory.py` from the rollout config:

    lockstep    rollout/lockstep.py    every env takes num_steps steps together (rollout.mode=fixed)
    overlapped  rollout/overlapped.py  the same steps, two halves of the workers in turn (rollout.overlap)
    variable    rollout/variable.py    envs step at their own speed in workers (rollout.mode=variable, VER)

`collect(update, storage)` writes one rollout into the storage's buffers and returns it as a value (a
`Rollout` inside the `CollectResult`): the collector is the one writer of those buffers, and only while it
collects. It owns what carries over from one rollout to the next: the current observation, episode-start flags
and the policy's memory (held by its Actor). A preempted rollout simply
ends early; the next one starts from wherever the environments are.

What is not collecting is handed on: each step stored goes to the scoring stage (`scoring.observe`,
rollout/scoring.py: the rollout keeps the envs' rewards, the stage makes the ones learned on before advantages),
with the acting path's value of a truncated episode's final observation on request (`final_values`); each
episode that finishes goes to the episode observers (rollout/observers.py), whose tallies the `CollectResult`
carries.

Resume (`resume`): environments that restore their saved state (gridnav,
habitat, synthetic) continue with the saved observation, start flags and
recurrent state. Those that cannot (gymnasium: counters only), or whose saved
state does not fit (another num_envs, world size or number of workers), start
fresh episodes instead: marked as starts, recurrent state zeroed, and seeded
from the resumed update index so they never replay the run start's episodes.

Non-finite observations are refused at the environment boundary: every
floating-point observation the policy would act on (and every final observation
a truncated episode bootstraps from) is checked, and a NaN or inf raises EnvError
naming the env, the observation key and the step (`ddppo train` exits 2 with that
one line). Acting on it would make the logits NaN and fail inside the sampler.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import Any, Callable, NamedTuple

import numpy as np
import torch

from ddppo.envs.base import StepResult, fresh_reset, place_by_cost, restores_state
from ddppo.model import memory as mem
from ddppo.model.memory import Memory
from ddppo import timing
from ddppo.rollout.acting import Actor, check_finite
from ddppo.rollout.episode_metrics import EPISODE_KEYS
from ddppo.rollout.observers import EpisodeObserver, Stored
from ddppo.rollout.preemption import Preemption
from ddppo.rollout.rollout import Rollout
from ddppo.rollout.scoring import ScoredStep, StepScoring
from ddppo.rollout.storage import RolloutStorage

log = logging.getLogger(__name__)

__all__ = ["EPISODE_KEYS", "CollectResult", "RolloutCollector"]  # EPISODE_KEYS: ddppo.rollout.episode_metrics


@dataclasses.dataclass
class CollectResult:
    rollout: Rollout  # the steps collected (a value: nobody writes into it), the envs' own rewards until scored
    steps: float  # steps per env collected (L; in variable mode the mean over envs)
    preempted: bool
    env_steps: int = 0  # steps collected over all envs
    diag: dict[str, float] = dataclasses.field(default_factory=dict)  # see DIAG_KEYS
    # what the episode observers tallied over the rollout, by name (rollout/observers.py)
    tallies: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)

    @property
    def episode_sums(self) -> np.ndarray:
        """(len(metric_names),): the episode metrics' sums, in the agreed order (rollout/episode_metrics.py)."""
        return self.tallies["episode_sums"]

    @property
    def episode_counts(self) -> np.ndarray:
        return self.tallies["episode_counts"]

    @property
    def scenes(self) -> np.ndarray:
        """(len(scene_names), len(SCENE_COLUMNS)): per-scene samples, gradient weight, episodes (rollout/scenes.py)."""
        return self.tallies["scenes"]


class Collection(NamedTuple):
    """What a strategy's `_collect` returns."""

    preempted: bool
    lengths: torch.Tensor  # (N,) steps per env, CPU long
    slowest: np.ndarray  # (N,) each env's slowest step in seconds
    env_weight: torch.Tensor | None = None  # (N,) per-env sample weights (variable mode), None: all 1


# per-rollout diagnostics: steps per env (min/mean/max), and the share of the rollout's collection time that
# each env's slowest step took (max and mean over envs; in fixed mode every env waits for the slowest batch step)
DIAG_KEYS = ("env_steps_min", "env_steps_mean", "env_steps_max", "slowest_step_share_max",
             "slowest_step_share_mean")


class RolloutCollector:
    """The interface of a rollout strategy and the carry-over they share; a subclass implements `_collect`
    (and, when it carries more than the Actor's state, `_extra_state` / `_load_extra_state` / `_forget`)."""

    carries: str | None = None  # the key of what `_extra_state` saves (one of CARRIES), None: nothing

    def __init__(self, actor: Actor, preemption: Preemption, num_steps: int, scoring: StepScoring,
                 observers: list[EpisodeObserver]):
        self.actor = actor  # acts with the policy in the envs (rollout/acting.py); holds what carries over
        self.envs, self.policy, self.timer, self.device, self.label = (actor.envs, actor.policy, actor.timer,
                                                                       actor.device, actor.label)
        self.storage: RolloutStorage | None = None  # the buffers being collected into (only during `collect`)
        self.preemption = preemption
        self.num_steps = num_steps  # per env and rollout (the storage may hold more: rollout.mode=variable)
        self.scoring = scoring  # sees every stored step (rollout/scoring.py): the rewards it makes come later
        self.observers = observers  # the finished episodes' observers, in order (rollout/observers.py)
        self.actor.begin(self.envs.reset())
        self.actor.detach()
        for observer in observers:  # the episodes the envs play after their reset
            observer.restart(self.envs)

    # what the next rollout starts from (held by the actor)
    @property
    def obs(self) -> dict[str, torch.Tensor]:
        return self.actor.obs

    @property
    def start(self) -> torch.Tensor:
        return self.actor.start

    @property
    def memory(self) -> Memory:
        return self.actor.memory

    # --------------------------------------------------------------- carry-over
    def _extra_state(self) -> dict[str, Any] | None:
        """What this strategy carries besides the Actor's state (saved under `carries`); taken before the
        envs' state."""
        return None

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        """Inverse of `_extra_state`."""

    def _forget(self) -> None:
        """Drop what `_extra_state` would carry (the envs start fresh episodes)."""

    def _idle(self) -> None:
        """Leave no env step in flight, keeping what was received (envs stepping across rollouts receive theirs)."""

    def state_dict(self) -> dict[str, Any]:
        extra = self._extra_state()  # first: it may receive the steps in flight, leaving the envs idle
        out = {"obs": {k: v.cpu().clone() for k, v in self.obs.items()}, "start": self.start.cpu().clone(),
               "memory": mem.saved(self.memory), "env": self.envs.state_dict()}
        if self.carries is not None:
            out[self.carries] = extra
        return out

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue exactly where `state_dict` was taken; ValueError (nothing changed) if it does not fit."""
        n = self.envs.num_envs
        if "memory" not in state and "hidden" in state:  # saved before the memory protocol: one tensor
            state = {**state, "memory": self.policy.legacy_memory(torch.as_tensor(state["hidden"]))}
        shapes = {"start": ((n,), tuple(state["start"].shape))}
        shapes.update({f"obs/{k}": (tuple(v.shape), tuple(state["obs"][k].shape) if k in state["obs"] else None)
                       for k, v in self.obs.items()})
        wrong = [f"{k} {got} (expected {want})" for k, (want, got) in shapes.items() if want != got]
        misfit = mem.misfit(self.memory, state["memory"])
        if misfit is not None:
            wrong.append(misfit)
        if wrong:
            raise ValueError("saved rollout state does not fit: " + ", ".join(wrong))
        if {k for k in CARRIES if k in state} != ({self.carries} - {None}):
            raise ValueError("saved rollout state is of the other rollout.mode")
        if self.carries is not None:
            self._load_extra_state(state[self.carries])
        self.envs.load_state_dict(state["env"])
        for observer in self.observers:  # the restored episodes
            observer.restart(self.envs)
        # copies: the variable rollout updates these in place
        self.actor.obs = {k: torch.as_tensor(v).to(self.device, copy=True) for k, v in state["obs"].items()}
        self.actor.start = torch.as_tensor(state["start"]).to(self.device, copy=True)
        # in this run's memory dtypes (a bf16 run's KV cache resumed under fp32, or the reverse)
        self.actor.memory = mem.restored(state["memory"], self.actor.memory, self.device)

    def resume(self, state: dict[str, Any] | None, update: int) -> bool:
        """Resume from this rank's saved state (None: there is none that applies, e.g. another world
        size). True if the environments continue their saved episodes; False if they start fresh ones."""
        if self.actor.obs_transform is not None:  # a saved update ended with an empty batch (the saved
            self.actor.obs_transform.clear()  # observation is already normalised); fresh episodes count theirs
        if state is not None and restores_state(self.envs):
            try:
                self.load_state_dict(state)
                return True
            except (KeyError, ValueError, RuntimeError) as err:  # EnvError is a RuntimeError
                log.warning("environment state does not fit (%s); environments start fresh episodes", err)
        elif state is not None:
            try:
                self.envs.load_state_dict(state["env"])  # counters (episodes, resets) only
            except (KeyError, ValueError, RuntimeError) as err:
                log.warning("environment counters not restored (%s)", err)
            log.info("these environments cannot restore their saved episodes: fresh episodes start")
        self.fresh_episodes(update)
        return False

    def place_by_cost(self, costs: dict[str, float], update: int) -> bool:
        """Offer the envs the scenes' measured costs (ddppo.envs.base.place_by_cost) while none steps; True where
        they moved their scenes, and then start fresh episodes seeded from `update`."""
        self._idle()
        if not place_by_cost(self.envs, costs):
            return False
        self.fresh_episodes(update)
        return True

    def fresh_episodes(self, update: int) -> None:
        """New episodes in every env, seeded from `update`, marked as starts, memory emptied."""
        self._forget()
        self.scoring.restart()
        self.actor.begin(fresh_reset(self.envs, update))
        self.actor.detach()
        for observer in self.observers:
            observer.restart(self.envs)

    # ------------------------------------------------------------------ collect
    def collect(self, update: int, storage: RolloutStorage) -> CollectResult:
        """One rollout into `storage`'s buffers, from where the last one left the envs; the rollout returned is
        a value over those buffers, which this collector writes again only at its next `collect` into them."""
        self.storage = storage
        storage.begin(self.actor.obs, self.actor.start, self.actor.memory, segments=self.segments)
        self.preemption.begin(update)
        self.scoring.begin()
        for observer in self.observers:
            observer.begin()
        t0 = time.perf_counter()
        got = self._collect(update)
        share = got.slowest / max(time.perf_counter() - t0, 1e-9)
        diag = rollout_diag(got.lengths, float(share.max()), float(share.mean()))
        if not got.preempted:
            self.preemption.finished(update)
        total = int(got.lengths.sum())
        rank_weight = self.preemption.rank_weight(total / self.envs.num_envs)
        with self.timer(timing.POLICY_FORWARD):
            bootstrap = self.last_value()
        rollout = storage.rollout(bootstrap, got.env_weight, rank_weight)
        self.storage = None  # written again only by the next collect
        tallies: dict[str, np.ndarray] = {}
        for observer in self.observers:
            observer.end(rollout, tallies)
        return CollectResult(rollout, total / self.envs.num_envs, got.preempted, total, diag, tallies)

    segments = False  # steps are stored with insert_envs, each env at the end of its own segment

    def _collect(self, update: int) -> Collection:
        raise NotImplementedError

    def add_episodes(self, episodes: list) -> None:
        """Episodes that finished at the steps just stored (so each env's latest stored step is its last)."""
        if episodes:
            at = Stored(self.storage)
            for observer in self.observers:
                observer.finished(episodes, at)

    def score(self, res: StepResult, slots: int | np.ndarray, actions: np.ndarray | Callable[[], np.ndarray],
              memory: Memory, env_index: np.ndarray | None = None) -> None:
        """Hand the scoring stage the rows of `res` about to be stored at `slots` (row i is env `env_index[i]`,
        default env i); `memory` holds the policy's memory after each row's step (for a truncation's value)."""
        def critic(rows: np.ndarray) -> torch.Tensor:
            return self.final_values(res, rows, memory, env_index)

        self.scoring.observe(ScoredStep(res, slots, actions, env_index),
                             critic if self.policy.critic is not None else None)

    def final_values(self, res: StepResult, rows: np.ndarray, memory: Memory,
                     env_index: np.ndarray | None = None) -> torch.Tensor:
        """V(final observation) of the rows `rows` of `res` (a truncated episode's bootstrap), with `memory` the
        policy's memory after each row's last step; `env_index` names the rows' envs (in errors)."""
        with self.timer(timing.POLICY_FORWARD):
            final_rows = {k: v[rows] for k, v in res.final_obs.items()}
            envs = rows if env_index is None else env_index[rows]
            check_finite(final_rows, "in the final observation of a truncated episode", self.label, envs)
            if self.actor.obs_transform is not None:  # normalize.update=step: normalised, not counted
                final_rows = self.actor.obs_transform.normalize(final_rows)
            final, moved = self.actor.staging.step_to_device(final_rows, {}, "final/", {"final_rows": rows})
            return self.actor.value(final, mem.select(memory, moved["final_rows"]),
                                    torch.zeros(rows.size, device=self.device))

    def last_value(self) -> torch.Tensor:
        """V(observation the next rollout starts from): the bootstrap of each env's last step (zeros without a
        critic: no forward pass)."""
        if self.policy.critic is None:
            return torch.zeros(self.envs.num_envs, device=self.device)
        return self.actor.value(self.obs, self.memory, self.start)


CARRIES = ("variable",)  # keys of a rank's saved state that strategies carry besides the Actor's state


def rollout_diag(lengths: torch.Tensor, share_max: float, share_mean: float) -> dict[str, float]:
    f = lengths.double()
    return {"env_steps_min": float(f.min()), "env_steps_mean": float(f.mean()), "env_steps_max": float(f.max()),
            "slowest_step_share_max": share_max, "slowest_step_share_mean": share_mean}
