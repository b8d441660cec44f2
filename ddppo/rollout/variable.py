"""Variable-experience collection (rollout.mode=variable; VER, Wijmans et al. 2022).

Environments step in worker processes; the policy acts on the envs whose observations are ready, batched:
once one worker is back, `recv` waits at most `batch_wait_s` for the others still stepping, then acts on
those back. Each env contributes as many steps as it manages; the rollout ends once the rank holds
`num_envs x num_steps` steps (or earlier under straggler preemption, checked before each batch with the
budget expressed in steps per env). An env never holds more than the storage's per-env capacity
(`rollout.max_env_steps_factor x num_steps`).

Two rules decide how close this is to habitat-baselines' VER:

- The envs idle when a rollout ends (`rollout.idle_envs`): `step` sends each its next step, acted on by the
  ending rollout's policy, so the envs step while the learner runs (every env's first step of the next segment
  is then one policy version old); `wait` is VER's rule: only the actions already in flight continue, and the
  idle envs wait for the learner and are acted on by the new policy.
- Importance weights (`rollout.importance_weights`, VER's correction of its biased sampling): a fast env
  contributes more steps, so each of env n's samples counts with w_n = min(1, (T + 1) / (L_n + 1)) in the loss
  terms (T = num_steps, L_n = env n's steps; VER's buffer counts each env's bootstrap step among its samples,
  our storage holds it apart, hence the +1 on both sides), a mean over all valid samples as in VER.
  These one-sided weights only pull fast envs down: a slow env (L_n < T) keeps weight 1, so its samples, and
  its scene, stay under-weighted. `rollout.importance_weights_form=two_sided` clamps T / L_n to
  [f, 1 / f] (f = preemption.min_rollout_fraction; no +1: the aim is exactly equal env totals) and scales the
  weights to mean 1 over the rank's valid samples: within the cap every env's total weight is the same, and the rank's total weight is its sample
  count, so the rank-level weighting (preemption.rank_weighting) composes with it unchanged.

What carries from one rollout to the next, per env: the current observation, episode-start flag and the
policy's memory before acting on that observation (the Actor's `obs`, `start`, `memory`); the action in
flight with its log-probability, value and the memory after it (stored as the first step of the
env's next segment: its log-probability is the behaviour policy's, as PPO's ratio needs); and finished steps
not yet stored (the budget was reached). The bootstrap of each env's segment is the value of its current
observation (`RolloutCollector.last_value`).

Checkpoints: `state_dict` first receives every step in flight, so the envs' saved state and the saved pending
steps agree; a resumed run stores them first, as an uninterrupted one would. A resumed run is not
bit-identical to an uninterrupted one: which envs fill a batch depends on timing (so does every run).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch

from ddppo import timing
from ddppo.model import memory as mem
from ddppo.rollout.collector import Collection
from ddppo.rollout.workers import WorkerCollector
from ddppo.envs.base import EpisodeInfo, StepResult, WorkerStep

IDLE_RULES = ("step", "wait")
WEIGHT_FORMS = ("one_sided", "two_sided")


def importance_weights(lengths: torch.Tensor, num_steps: int) -> torch.Tensor:
    """VER's per-env sample weights: min(1, (T + 1) / (L_n + 1)) (see the module docstring)."""
    return ((num_steps + 1) / (lengths.double() + 1)).clamp(max=1.0).float()


def two_sided_weights(lengths: torch.Tensor, num_steps: int, floor: float) -> torch.Tensor:
    """T / L_n clamped to [floor, 1 / floor], scaled so that sum_n(w_n * L_n) = sum_n(L_n) (mean 1 over the
    rank's samples; all 1 when no env stepped). Within the clamp every env's total weight w_n * L_n is the same."""
    L = lengths.double()
    w = (num_steps / L.clamp(min=1.0)).clamp(min=floor, max=1.0 / floor)
    weighted = float((w * L).sum())
    return (w * (float(L.sum()) / weighted) if weighted > 0 else torch.ones_like(w)).float()


class VariableCollector(WorkerCollector):
    carries = "variable"
    segments = True

    def __init__(self, *args: Any, batch_wait_s: float = 0.002, idle_envs: str = "step",
                 weighted: bool = False, weight_form: str = "one_sided", **kwargs: Any):
        super().__init__(*args, **kwargs)
        if idle_envs not in IDLE_RULES:
            raise ValueError(f"idle_envs={idle_envs!r}: use one of {', '.join(IDLE_RULES)}")
        if weight_form not in WEIGHT_FORMS:
            raise ValueError(f"weight_form={weight_form!r}: use one of {', '.join(WEIGHT_FORMS)}")
        self.batch_wait_s, self.idle_envs, self.weighted = batch_wait_s, idle_envs, weighted
        self.weight_form = weight_form
        self.unstored: list[WorkerStep] = []  # finished steps not yet stored (the budget was reached)

    def _collect(self, update: int) -> Collection:
        preempted = self._fill(update)
        if self.idle_envs == "step":
            self.keep_stepping()
        lengths = self.storage.lengths.clone()
        weight = None
        if self.weighted and self.weight_form == "two_sided":
            floor = self.preemption.min_steps / self.num_steps
            weight = two_sided_weights(lengths, self.num_steps, floor).to(self.device)
        elif self.weighted:
            weight = importance_weights(lengths, self.num_steps).to(self.device)
        return Collection(preempted, lengths, self.slowest.copy(), weight)

    def _fill(self, update: int) -> bool:
        """Collect until the step budget (False) or a preemption (True)."""
        s, envs = self.storage, self.envs
        n = envs.num_envs
        budget, cap = n * self.num_steps, s.num_steps
        self.slowest[:] = 0.0
        self.sent_at[:] = time.perf_counter()  # steps in flight through the update are timed from here
        ready, self.unstored = self.unstored, []
        waiting = {w.worker for w in ready} | set(envs.in_flight)
        self.act_and_send([w for w in range(len(self.bounds)) if w not in waiting])  # the new policy acts
        collected = 0
        while True:
            take = []  # the ready steps that fit in the budget, stored in one batch
            while ready and collected < budget:
                take.append(ready.pop(0))
                collected += take[-1].hi - take[-1].lo
            if take:
                self.store(take, update)
            if collected >= budget:
                self.unstored = ready
                return False
            if self.preemption.should_stop(update, collected // n):
                return True
            self.act_and_send([w.worker for w in take if int(s.lengths[self.bounds[w.worker][0]]) < cap])
            if not envs.in_flight:  # every env at its capacity: cannot happen while capacity >= num_steps
                return False
            with self.timer(timing.ENV_STEP):
                ready = envs.recv(min_ready=len(envs.in_flight), wait_s=self.batch_wait_s)

    def keep_stepping(self) -> None:
        """Send every idle env its next step, so the envs step while the learner runs (their steps are the
        first of the next rollout, acted on by this rollout's policy, as PPO's behaviour policy)."""
        busy = set(self.envs.in_flight) | {w.worker for w in self.unstored}
        self.act_and_send([w for w in range(len(self.bounds)) if w not in busy])

    # ------------------------------------------------------------- carry-over
    def drain(self) -> None:
        """Receive every step in flight into `unstored` (copied), so the envs are idle."""
        for w in self.envs.recv_all():
            self.unstored.append(WorkerStep(w.worker, w.lo, w.hi, _copy(w.result)))

    def _idle(self) -> None:
        self.drain()

    def _forget(self) -> None:
        self.envs.recv_all()
        self.unstored, self.pending = [], {}

    def _extra_state(self) -> dict[str, Any]:
        self.drain()
        pending = {k: v.cpu().clone() for k, v in self.pending.items() if k != "memory"}
        if "memory" in self.pending:
            pending["memory"] = mem.saved(self.pending["memory"])
        return {"pending": pending,
                "unstored": [{"worker": w.worker, "lo": w.lo, "hi": w.hi, **_result_state(w.result)}
                             for w in self.unstored]}

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        self._forget()
        pending = dict(state["pending"])
        if "hidden" in pending:  # saved before the memory protocol: one tensor
            pending["memory"] = self.policy.legacy_memory(torch.as_tensor(pending.pop("hidden")))
        self.pending = {k: torch.as_tensor(v).to(self.device, copy=True) for k, v in pending.items() if k != "memory"}
        if "memory" in pending:  # in this run's memory dtypes, as the current memory (run.precision may have changed)
            self.pending["memory"] = mem.restored(pending["memory"], self.actor.memory, self.device)
        self.unstored = [WorkerStep(u["worker"], u["lo"], u["hi"], _result_from_state(u)) for u in state["unstored"]]


def _copy(r: StepResult) -> StepResult:
    return StepResult({k: v.copy() for k, v in r.obs.items()}, r.reward.copy(), r.terminated.copy(),
                      r.truncated.copy(), {k: v.copy() for k, v in r.final_obs.items()}, list(r.episodes))


def _result_state(r: StepResult) -> dict[str, Any]:
    return {"obs": dict(r.obs), "reward": r.reward, "terminated": r.terminated, "truncated": r.truncated,
            "final_obs": dict(r.final_obs),
            "episodes": [[e.env_index, dict(e.metrics), e.scene, e.next_scene, e.step_s] for e in r.episodes]}


def _result_from_state(u: dict[str, Any]) -> StepResult:
    arr = np.asarray
    return StepResult({k: arr(v) for k, v in u["obs"].items()}, arr(u["reward"]), arr(u["terminated"]),
                      arr(u["truncated"]), {k: arr(v) for k, v in u["final_obs"].items()},
                      [EpisodeInfo(int(e[0]), dict(e[1]), *e[2:5]) for e in u["episodes"]])  # older: no step_s
