"""Asynchronous collection on the worker API: variable-experience rollouts and fixed mode's double buffering.

Fixed mode with rollout.overlap (`collect_double_buffered`): the workers are split into two halves; while
one half steps its envs, the policy acts on the other half's observations (as in Sample Factory), so env
stepping and inference overlap. Every env still takes exactly `num_steps` steps (fewer when preempted, the
same number for every env), and the order of acting is fixed, so runs stay reproducible.

Variable-experience rollouts (rollout.mode=variable; VER, Wijmans et al. 2022):

Environments step in worker processes (envs.vector.SubprocVecEnv: `send` to one worker, `recv` whichever
finished). The policy acts on the envs whose observations are ready, batched: once one worker is back,
`recv` waits at most `batch_wait_s` for the others still stepping, then acts on those back. Each env
contributes as many steps as it manages; the rollout ends once the rank holds `num_envs x num_steps` steps
(or earlier under straggler preemption, checked before each batch with the budget expressed in steps per
env). An env never holds more than the storage's per-env capacity (`rollout.max_env_steps_factor x
num_steps`).

What carries from one rollout to the next, per env: the current observation, episode-start flag and the
recurrent state before acting on that observation (the Actor's `obs`, `start`, `hidden`); and, as every
idle env is sent its next step when the rollout ends (so envs step while the learner runs), the action in
flight with its log-probability, value and the recurrent state after it. That step is stored as the first
of the env's next segment (its log-probability is the behaviour policy's, as PPO's ratio needs); finished
steps not yet stored (the budget was reached) wait likewise. The bootstrap of each env's segment is the
value of its current observation (`RolloutCollector.last_value`).

Checkpoints: `state_dict` first receives every step in flight, so the envs' saved state and the saved
pending steps agree; a resumed run stores them first, as an uninterrupted one would.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch

from ddppo import timing
from ddppo.rollout.acting import Actor, check_finite, obs_to_torch
from envs.base import EpisodeInfo, StepResult
from envs.vector import WorkerStep


class AsyncRollout:
    """The asynchronous collection loops of a RolloutCollector (`collector`: its envs, storage, ...)."""

    def __init__(self, collector: Any, batch_wait_s: float):
        self.c = collector
        self.batch_wait_s = batch_wait_s
        envs = collector.envs
        self.bounds: list[tuple[int, int]] = envs.bounds
        n, dev = envs.num_envs, collector.device
        actor: Actor = collector.actor
        self.pending: dict[str, torch.Tensor] = {}  # per env: the action in flight and what acting gave with it
        self.unstored: list[WorkerStep] = []  # finished steps not yet stored (the budget was reached)
        self.sent_at = np.zeros(n)  # when each env's step was sent (its latency is measured at recv)
        self.slowest = np.zeros(n)  # each env's slowest step this rollout
        self.hidden_shape = tuple(actor.hidden.shape)
        self.device = dev

    # ------------------------------------------------------------------ acting
    def _rows(self, workers: list[int]) -> torch.Tensor:
        return torch.cat([torch.arange(*self.bounds[w]) for w in workers])

    def act_and_send(self, workers: list[int]) -> None:
        """Act on `workers`' envs (batched) and send each worker its actions."""
        if not workers:
            return
        c, actor = self.c, self.c.actor
        idx = self._rows(workers)
        contiguous = int(idx[-1] - idx[0]) + 1 == len(idx)
        rows: Any = slice(int(idx[0]), int(idx[-1]) + 1) if contiguous else idx.to(self.device)
        with c.timer(timing.POLICY_FORWARD):
            obs = {k: v[rows] for k, v in actor.obs.items()}
            action, logp, value, hidden = c.policy.act(obs, actor.hidden[:, rows], actor.start[rows])
        env_action = action.cpu().numpy()
        if actor.bounds is not None:
            env_action = np.clip(env_action, *actor.bounds)
        p = self.pending
        if not p:
            p.update(action=torch.zeros((actor.start.shape[0], *action.shape[1:]), dtype=action.dtype,
                                        device=self.device),
                     logp=torch.zeros_like(actor.start), value=torch.zeros_like(actor.start),
                     hidden=torch.zeros(self.hidden_shape, device=self.device))
        p["action"][rows] = action
        p["logp"][rows] = logp
        p["value"][rows] = value
        p["hidden"][:, rows] = hidden
        now, offset = time.perf_counter(), 0
        with c.timer(timing.ENV_STEP):  # a send wakes the worker: on a busy machine it runs in the write
            for w in workers:
                lo, hi = self.bounds[w]
                c.envs.send(w, env_action[offset:offset + hi - lo])
                self.sent_at[lo:hi] = now
                offset += hi - lo

    # ----------------------------------------------------------------- storing
    def store(self, steps: list[WorkerStep], update: int, sums: np.ndarray, counts: np.ndarray) -> None:
        """Store finished steps at the end of each env's segment; their observations become current."""
        c, actor, s = self.c, self.c.actor, self.c.storage
        idx = torch.cat([torch.arange(w.lo, w.hi) for w in steps])
        res = _concat([w.result for w in steps])
        now = time.perf_counter()
        for w in steps:
            np.maximum(self.slowest[w.lo:w.hi], now - self.sent_at[w.lo:w.hi], out=self.slowest[w.lo:w.hi])
        with c.timer(timing.OBS_TRANSFER):
            check_finite(res.obs, f"in update {update}'s rollout", c.label, idx.numpy())
            obs = obs_to_torch(res.obs, self.device)
            reward = torch.from_numpy(res.reward.astype(np.float32)).to(self.device)
            done = torch.from_numpy(res.done.astype(np.float32)).to(self.device)
        idx_dev = idx.to(self.device)
        hidden_after = self.pending["hidden"][:, idx_dev]
        if res.truncated.any() and c.policy.critic is not None:
            with c.timer(timing.POLICY_FORWARD):
                reward = reward + c.truncation_bootstrap(res, hidden_after, idx.numpy())
        with c.timer(timing.STORAGE):
            s.insert_envs(idx, self.pending["action"][idx_dev], self.pending["logp"][idx_dev],
                          self.pending["value"][idx_dev], reward, done, obs, done)
            for k, v in obs.items():
                actor.obs[k][idx_dev] = v
            actor.start[idx_dev] = done
            actor.hidden[:, idx_dev] = hidden_after
            c.add_episodes(res.episodes, sums, counts)

    # ----------------------------------------------------------------- collect
    def collect(self, update: int, sums: np.ndarray, counts: np.ndarray) -> bool:
        """One rollout into the collector's storage; True if preempted."""
        c, s, envs = self.c, self.c.storage, self.c.envs
        n = envs.num_envs
        budget, cap = n * c.num_steps, s.num_steps
        s.lengths = torch.zeros(n, dtype=torch.long)
        self.slowest[:] = 0.0
        self.sent_at[:] = time.perf_counter()  # steps in flight through the update are timed from here
        ready, self.unstored = self.unstored, []
        waiting = {w.worker for w in ready} | set(envs.in_flight)
        self.act_and_send([w for w in range(len(self.bounds)) if w not in waiting])
        collected = 0
        while True:
            take = []  # the ready steps that fit in the budget, stored in one batch
            while ready and collected < budget:
                take.append(ready.pop(0))
                collected += take[-1].hi - take[-1].lo
            if take:
                self.store(take, update, sums, counts)
            done_workers = [w.worker for w in take]
            if collected >= budget:
                self.unstored = ready
                self.keep_stepping()
                return False
            if c.preemption.should_stop(update, collected // n):
                self.keep_stepping()
                return True
            self.act_and_send([w for w in done_workers if int(s.lengths[self.bounds[w][0]]) < cap])
            if not envs.in_flight:  # every env at its capacity: cannot happen while capacity >= num_steps
                return False
            with c.timer(timing.ENV_STEP):
                ready = envs.recv(min_ready=len(envs.in_flight), wait_s=self.batch_wait_s)

    def keep_stepping(self) -> None:
        """Send every idle env its next step, so the envs step while the learner runs (their steps are the
        first of the next rollout, acted on by this rollout's policy, as PPO's behaviour policy)."""
        busy = set(self.c.envs.in_flight) | {w.worker for w in self.unstored}
        self.act_and_send([w for w in range(len(self.bounds)) if w not in busy])

    def collect_double_buffered(self, update: int, sums: np.ndarray, counts: np.ndarray) -> bool:
        """Fixed mode, two halves of the workers in turn; True if preempted."""
        c, s, envs = self.c, self.c.storage, self.c.envs
        w = len(self.bounds)
        halves = [list(range(w // 2)), list(range(w // 2, w))]
        s.lengths = torch.zeros(envs.num_envs, dtype=torch.long)
        self.slowest[:] = 0.0
        for half in halves:
            self.act_and_send(half)
        preempted = False
        for t in range(c.num_steps):
            stop = t + 1 == c.num_steps or c.preemption.should_stop(update, t + 1)
            preempted = stop and t + 1 < c.num_steps
            for half in halves:
                with c.timer(timing.ENV_STEP):
                    got: list[WorkerStep] = []
                    while len(got) < len(half):
                        got += envs.recv(len(half) - len(got), envs.timeout_s, workers=half)
                self.store(sorted(got, key=lambda g: g.worker), update, sums, counts)
                if not stop:
                    self.act_and_send(half)
            if stop:
                break
        return preempted

    # ------------------------------------------------------------- carry-over
    def drain(self) -> None:
        """Receive every step in flight into `unstored` (copied), so the envs are idle."""
        for w in self.c.envs.recv_all():
            self.unstored.append(WorkerStep(w.worker, w.lo, w.hi, _copy(w.result)))

    def forget(self) -> None:
        """Drop every pending and unstored step (the envs start fresh episodes)."""
        self.c.envs.recv_all()
        self.unstored, self.pending = [], {}

    def state_dict(self) -> dict[str, Any]:
        self.drain()
        return {"pending": {k: v.cpu().clone() for k, v in self.pending.items()},
                "unstored": [{"worker": w.worker, "lo": w.lo, "hi": w.hi, **_result_state(w.result)}
                             for w in self.unstored]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.forget()
        self.pending = {k: torch.as_tensor(v).to(self.device, copy=True) for k, v in state["pending"].items()}
        self.unstored = [WorkerStep(u["worker"], u["lo"], u["hi"], _result_from_state(u)) for u in state["unstored"]]

    def diagnostics(self, rollout_s: float, lengths: torch.Tensor) -> dict[str, float]:
        share = self.slowest / max(rollout_s, 1e-9)
        return rollout_diag(lengths, float(share.max()), float(share.mean()))


def rollout_diag(lengths: torch.Tensor, share_max: float, share_mean: float) -> dict[str, float]:
    f = lengths.double()
    return {"env_steps_min": float(f.min()), "env_steps_mean": float(f.mean()), "env_steps_max": float(f.max()),
            "slowest_step_share_max": share_max, "slowest_step_share_mean": share_mean}


def _concat(results: list[StepResult]) -> StepResult:
    if len(results) == 1:
        return results[0]
    cat = np.concatenate
    return StepResult({k: cat([r.obs[k] for r in results]) for k in results[0].obs},
                      cat([r.reward for r in results]), cat([r.terminated for r in results]),
                      cat([r.truncated for r in results]),
                      {k: cat([r.final_obs[k] for r in results]) for k in results[0].final_obs},
                      [e for r in results for e in r.episodes])


def _copy(r: StepResult) -> StepResult:
    return StepResult({k: v.copy() for k, v in r.obs.items()}, r.reward.copy(), r.terminated.copy(),
                      r.truncated.copy(), {k: v.copy() for k, v in r.final_obs.items()}, list(r.episodes))


def _result_state(r: StepResult) -> dict[str, Any]:
    return {"obs": dict(r.obs), "reward": r.reward, "terminated": r.terminated, "truncated": r.truncated,
            "final_obs": dict(r.final_obs), "episodes": [[e.env_index, dict(e.metrics)] for e in r.episodes]}


def _result_from_state(u: dict[str, Any]) -> StepResult:
    arr = np.asarray
    return StepResult({k: arr(v) for k, v in u["obs"].items()}, arr(u["reward"]), arr(u["terminated"]),
                      arr(u["truncated"]), {k: arr(v) for k, v in u["final_obs"].items()},
                      [EpisodeInfo(int(i), dict(m)) for i, m in u["episodes"]])
