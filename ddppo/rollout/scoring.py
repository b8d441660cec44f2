"""The scoring stage: the rewards a rollout learns on, made from the envs' own between collect and advantages.

Collection returns a rollout whose `rewards` are the envs' own. The stage (`Scoring`, built once by
train/builder.py) makes the rewards the advantage estimators see:

    reward model  reward.model's score of what each step produced (rollout/reward_model.py), combined as
                  reward.env_weight x env reward + reward.model_weight x model reward
    scaling       normalize.reward (ddppo.normalization.RewardScaler): the combined rewards scaled, step by step in
                  the order the collector stored them (its running returns, and its live scale under
                  normalize.update=step, follow that order)
    bootstrap     a truncated (time-limit) episode's last reward plus gamma x V(its final observation): the acting
                  policy's value, with the policy's memory after that step, in the scaled units the critic learns

It acts in two places:

    observe   per step, called by the collector through `StepScoring` (all the collector knows of it) with the rows
              it stored (`ScoredStep`) and, where the policy has a critic, a `Critic` valuing some rows' final
              observations. What can only happen then happens then: the reward model's scorer is handed the step
              (`Scorer.submit`), and a truncation's value is computed (the memory it needs exists only now).
    finish    between collect and advantages (train/phases.py): each step's rewards combined and scaled in the
              order observed, placed at their (slot, env), the bootstraps added; a new Rollout (`Rollout.replace`).
              The storage keeps the envs' rewards.

A `Scorer` is what a reward model offers the stage: `submit` returns a handle whose `result()` the stage reads
only in `finish`. The local RewardModel scores at `submit` (its handle is ready); a served model may send the step
away and answer later, before advantages. The stage does the same arithmetic in the same order either way.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, NamedTuple, Protocol

import numpy as np
import torch

from ddppo.envs.base import StepResult
from ddppo.normalization.rewards import RewardScaler
from ddppo.rollout.rollout import Rollout

Critic = Callable[[np.ndarray], torch.Tensor]  # rows of a step -> V(their final observations), float32 on device


@dataclasses.dataclass(frozen=True)
class ScoredStep:
    """Rows of one step as the collector stored them (row i is env `envs[i]`; `envs` None: every env in order)."""

    # the envs' answer (the arrays may be reused by the envs' next step: read them now); its `idle` marks the rows
    # that did not step (grouped episodes), its `episode_start` the rows whose observation starts an episode
    result: StepResult
    slots: int | np.ndarray  # the storage slot (time index) of each row: one for all, or (n,)
    actions: np.ndarray | Callable[[], np.ndarray]  # the actions taken, or a function giving them (a model reads)
    envs: np.ndarray | None = None


class Scores(Protocol):
    """A scorer's answer for one step's rows: (n,) float32 model rewards, 0 where it scored nothing."""

    def result(self) -> np.ndarray:
        ...


class Scorer(Protocol):
    """A reward model as the stage uses it: local (rollout/reward_model.py) or served from other ranks."""

    def submit(self, step: ScoredStep) -> Scores:
        """Score `step`'s rows (a served scorer may answer later: the stage reads the result only in finish)."""

    def restart(self) -> None:
        """Every env starts a new episode."""


class StepScoring(Protocol):
    """The stage as the collector sees it."""

    def begin(self) -> None:
        """A rollout starts: what an unfinished one observed is dropped."""

    def observe(self, step: ScoredStep, critic: Critic | None) -> None:
        """One step's stored rows; `critic` None where the policy has no critic (no truncation bootstrap)."""

    def restart(self) -> None:
        """Every env starts a new episode."""


class Ready:
    """Scores already computed (a local scorer's)."""

    def __init__(self, values: np.ndarray):
        self.values = values

    def result(self) -> np.ndarray:
        return self.values


class _Observed(NamedTuple):
    """What `finish` needs of one observed step (copies: the envs reuse their arrays)."""

    reward: np.ndarray
    done: np.ndarray
    slots: int | np.ndarray
    envs: np.ndarray | None
    scores: Scores | None
    stepped: int  # rows that stepped (not idle: a grouped env waiting for its group), the tally's steps


class Scoring:
    """Reward model, reward scaling and truncation bootstraps of one rank's rollouts (module docstring)."""

    def __init__(self, gamma: float, scale: RewardScaler | None = None, scorer: Scorer | None = None,
                 env_weight: float = 1.0, model_weight: float = 1.0):
        self.gamma = gamma
        self.scale = scale  # normalize.reward; None: unscaled
        self.scorer = scorer  # reward.model; None: the envs' rewards alone
        self.env_weight, self.model_weight = env_weight, model_weight  # reward.env_weight, reward.model_weight
        self._steps: list[_Observed] = []  # kept only where a scorer or a scale makes the rewards on the host
        self._bootstraps: list[tuple[np.ndarray | int, np.ndarray, torch.Tensor]] = []  # (slots, envs, gamma x V)
        self.tally = np.zeros(3)  # (steps, env reward sum, model reward sum) combined since `take_tally`

    def begin(self) -> None:
        self._steps, self._bootstraps = [], []

    def restart(self) -> None:
        if self.scorer is not None:
            self.scorer.restart()

    def observe(self, step: ScoredStep, critic: Critic | None) -> None:
        res = step.result
        if self.scorer is not None or self.scale is not None:
            scores = self.scorer.submit(step) if self.scorer is not None else None
            stepped = int(np.count_nonzero(res.stepped))
            self._steps.append(_Observed(res.reward.copy(), res.done, step.slots, step.envs, scores, stepped))
        if critic is None or not res.truncated.any():
            return
        rows = np.flatnonzero(res.truncated & ~res.terminated)
        if rows.size:
            slots = step.slots if np.ndim(step.slots) == 0 else np.asarray(step.slots)[rows]
            envs = rows if step.envs is None else np.asarray(step.envs)[rows]
            self._bootstraps.append((slots, envs, self.gamma * critic(rows)))

    def finish(self, rollout: Rollout) -> Rollout:
        """`rollout` with the rewards the estimators see (itself where they are the envs' own)."""
        steps, bootstraps = self._steps, self._bootstraps
        self.begin()
        if not steps and not bootstraps:
            return rollout
        if steps:
            host = np.zeros((rollout.steps, rollout.num_envs), np.float32)
            for s in steps:
                host[s.slots, slice(None) if s.envs is None else s.envs] = self._rewards(s)
            rewards = torch.from_numpy(host).to(rollout.rewards.device)
        else:
            rewards = rollout.rewards.clone()
        for slots, envs, value in bootstraps:
            at = (torch.as_tensor(slots, device=rewards.device), torch.as_tensor(envs, device=rewards.device))
            rewards[at] += value
        return rollout.replace(rewards=rewards)

    def take_tally(self) -> np.ndarray:
        """(steps, env reward sum, model reward sum) combined since the last call (train/objective.py reads it
        once per rollout, after `finish`); the tally restarts."""
        out, self.tally = self.tally, np.zeros(3)
        return out

    def _rewards(self, s: _Observed) -> np.ndarray:
        """One observed step's rewards: combined with the model's, then scaled (host, float32)."""
        reward = s.reward
        if s.scores is not None:
            model = s.scores.result()
            self.tally += (s.stepped, float(np.sum(reward)), float(np.sum(model)))
            reward = (self.env_weight * reward + self.model_weight * model).astype(np.float32)
        if self.scale is not None:
            reward = self.scale(reward, s.done) if s.envs is None else self.scale(reward, s.done, s.envs)
        return reward

