"""What the overlapped and variable collectors share: acting on some workers' envs and storing the steps they
return, on the envs' asynchronous worker API (ddppo.envs.base.AsyncVecEnv: `send` to one worker, `recv` whichever
finished).

Per env, `pending` holds the action in flight with its log-probability, value and the policy's memory after
it; `store` writes a finished step at the end of the env's segment (`RolloutStorage.insert_envs`), and its
observation, start flag and memory become the Actor's current ones.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch

from ddppo import timing
from ddppo.model.actions import env_actions
from ddppo.model import memory as mem
from ddppo.rollout.acting import check_finite
from ddppo.rollout.collector import RolloutCollector
from ddppo.envs.base import AsyncVecEnv, StepResult, WorkerStep


class WorkerCollector(RolloutCollector):
    """A collector whose envs are sent and received one worker at a time."""

    envs: AsyncVecEnv

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        if not isinstance(self.envs, AsyncVecEnv):
            raise ValueError(f"{type(self).__name__} needs envs stepping in workers (env.num_workers > 0)")
        n = self.envs.num_envs
        self.bounds: list[tuple[int, int]] = self.envs.bounds
        self.pending: dict[str, torch.Tensor] = {}  # per env: the action in flight and what acting gave with it
        self.sent_at = np.zeros(n)  # when each env's step was sent (its latency is measured at recv)
        self.slowest = np.zeros(n)  # each env's slowest step this rollout

    def _rows(self, workers: list[int]) -> torch.Tensor:
        return torch.cat([torch.arange(*self.bounds[w]) for w in workers])

    def act_and_send(self, workers: list[int]) -> None:
        """Act on `workers`' envs (batched) and send each worker its actions."""
        if not workers:
            return
        actor = self.actor
        idx = self._rows(workers)
        contiguous = int(idx[-1] - idx[0]) + 1 == len(idx)
        rows: Any = (slice(int(idx[0]), int(idx[-1]) + 1) if contiguous
                     else actor.staging.to_device({"act_rows": idx.numpy()})["act_rows"])
        with self.timer(timing.POLICY_FORWARD):
            obs = {k: v[rows] for k, v in actor.obs.items()}
            action, logp, value, memory = actor.forward(obs, mem.select(actor.memory, rows), actor.start[rows])
        env_action = env_actions(self.envs.action_space, action.cpu().numpy())
        p = self.pending
        if not p:
            p.update(action=torch.zeros((actor.start.shape[0], *action.shape[1:]), dtype=action.dtype,
                                        device=self.device),
                     logp=torch.zeros_like(actor.start), value=torch.zeros_like(actor.start),
                     memory=mem.zeros(actor.memory, actor.start.shape[0]))
        p["action"][rows] = action
        p["logp"][rows] = logp
        p["value"][rows] = value
        mem.assign(p["memory"], rows, memory)
        now, offset = time.perf_counter(), 0
        with self.timer(timing.ENV_STEP):  # a send wakes the worker: on a busy machine it runs in the write
            for w in workers:
                lo, hi = self.bounds[w]
                self.envs.send(w, env_action[offset:offset + hi - lo])
                self.sent_at[lo:hi] = now
                offset += hi - lo

    def store(self, steps: list[WorkerStep], update: int) -> None:
        """Store finished steps at the end of each env's segment; their observations become current."""
        actor, s = self.actor, self.storage
        idx = torch.cat([torch.arange(w.lo, w.hi) for w in steps])
        res = concat([w.result for w in steps])
        now = time.perf_counter()
        for w in steps:
            np.maximum(self.slowest[w.lo:w.hi], now - self.sent_at[w.lo:w.hi], out=self.slowest[w.lo:w.hi])
        with self.timer(timing.OBS_TRANSFER):
            check_finite(res.obs, f"in update {update}'s rollout", self.label, idx.numpy())
        envs = idx.numpy()
        at = {"env": envs, "slot": s.lengths[idx].numpy()}  # where the steps go in the storage
        with self.timer(timing.OBS_TRANSFER):
            # normalize.update=step: counted and normalised as the lockstep acting path does (Actor.step)
            raw = res.obs if actor.obs_transform is None else actor.obs_transform.observe(res.obs)
            obs, flags = actor.staging.step_to_device(raw, {"reward": res.reward, "done": res.done,
                                                            "started": res.started}, index=at)
            reward, done, idx_dev = flags["reward"], flags["done"], flags["env"]
            start = flags.get("started", done)  # Atari: a lost life is done, but the game (and memory) goes on
        obs = actor.keep(obs)
        memory_after = mem.select(self.pending["memory"], idx_dev)
        self.score(res, at["slot"], lambda: self._env_actions(envs), memory_after, envs)
        with self.timer(timing.STORAGE):
            s.insert_envs(idx, self.pending["action"][idx_dev], self.pending["logp"][idx_dev],
                          self.pending["value"][idx_dev], reward, done, obs, start, at=(flags["slot"], idx_dev))
            for k, v in obs.items():
                actor.obs[k][idx_dev] = v
            actor.start[idx_dev] = start
            mem.assign(actor.memory, idx_dev, memory_after)
            self.add_episodes(res.episodes)


    def _env_actions(self, envs: np.ndarray) -> np.ndarray:
        """The actions the envs `envs` were sent (read only by a reward model: one device read)."""
        action = self.pending["action"][torch.from_numpy(envs).to(self.device)].cpu().numpy()
        return env_actions(self.envs.action_space, action)


def concat(results: list[StepResult]) -> StepResult:
    if len(results) == 1:
        return results[0]
    cat = np.concatenate
    return StepResult({k: cat([r.obs[k] for r in results]) for k in results[0].obs},
                      cat([r.reward for r in results]), cat([r.terminated for r in results]),
                      cat([r.truncated for r in results]),
                      {k: cat([r.final_obs[k] for r in results]) for k in results[0].final_obs},
                      [e for r in results for e in r.episodes], started=cat([r.episode_start for r in results]))
