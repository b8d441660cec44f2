"""A learned reward model between the envs and the learners (reward.*; RLinf's embodied reward workers).

    built     reward.model=MODULE:NAME: a torch module class or factory in the user's working directory (as
              policy.architecture=MODULE:NAME is), built with reward.kwargs, its weights from reward.weights
              (a state dict, loaded with weights_only), in eval mode, no gradients, on the rank's device
    scored    during collection, as each step's results come back: one batched call over the envs that stepped
              (never one env at a time; an idle row, a grouped env waiting for its group, is not scored and gets
              0), under no_grad, in run.precision, on what the step produced: the observation after the step (an
              ended episode's final observation, not the next episode's first); reward.mode=terminal scores only
              the envs whose episode ended this step, once each, on its final observation
    combined  by the scoring stage (rollout/scoring.py): reward = reward.env_weight x env reward +
              reward.model_weight x model reward, on the host, before the reward scaling (normalize.reward) and a
              truncation's bootstrap, so GAE and GRPO see it as an env reward
    checked   one reward per env that was scored ((n,) or (n, 1)), finite; anything else, or an exception from
              the model, is a RewardModelError naming the module (exit 2)

The model is called as `model(obs, actions=..., episode_step=..., done=...)`: `obs` the observation dict, each
key (n, ...) as the env gives it (uint8 images stay uint8); `actions` (n, ...) the actions taken; `episode_step`
(n,) long, the step of the episode the scored observation ends (1 for the first step's result; idle steps are not
counted, and the count restarts where the env says an episode starts, `StepResult.episode_start`); `done` (n,) bool.
Its time is its own phase, `perf/reward_model_s`. Which model and weights a run was trained with is saved in its
checkpoints (the "reward_model" namespace, with the weights file's sha256): a resume with other weights is refused.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ddppo import timing
from ddppo.config import RewardConfig
from ddppo.errors import RewardModelError
from ddppo.model.precision import autocast
from ddppo.files import file_sha256
from ddppo.envs.base import StepResult
from ddppo.rollout.scoring import Ready, ScoredStep
from ddppo.timing import Timer
from ddppo.user_code import import_user_module


def build_reward_module(cfg: RewardConfig, device: torch.device) -> torch.nn.Module:
    """The module reward.model names, with reward.weights loaded; RewardModelError naming what is wrong."""
    module_name, _, name = cfg.model.rpartition(":")
    try:
        factory = getattr(import_user_module(module_name), name)
    except (ImportError, AttributeError) as err:
        raise RewardModelError(f"reward.model={cfg.model!r}: {err} (NAME must be a torch module class or factory "
                               f"in MODULE, a .py file in your working directory)") from None
    try:
        model = factory(**dict(cfg.kwargs))
    except Exception as err:  # the user's constructor: its own error, in one line
        raise RewardModelError(f"reward.model={cfg.model!r}: building it with reward.kwargs={dict(cfg.kwargs)} "
                               f"failed: {type(err).__name__}: {err}") from None
    if not isinstance(model, torch.nn.Module):
        raise RewardModelError(f"reward.model={cfg.model!r} built a {type(model).__name__}, not a torch.nn.Module")
    if cfg.weights:
        try:
            state = torch.load(cfg.weights, map_location="cpu", weights_only=True)
            model.load_state_dict(state)
        except (OSError, RuntimeError, ValueError, KeyError, TypeError) as err:
            raise RewardModelError(f"reward.weights={cfg.weights!r} does not load into reward.model={cfg.model!r}: "
                                   f"{str(err).splitlines()[0][:300]}") from None
    try:
        return model.to(device).eval().requires_grad_(False)
    except (RuntimeError, ValueError) as err:  # e.g. lazy modules, whose parameters exist only after a forward
        raise RewardModelError(f"reward.model={cfg.model!r} cannot be frozen on {device}: "
                               f"{str(err).splitlines()[0][:300]} (give its layers their sizes when it is built)"
                               ) from None


def _produced(res: StepResult) -> dict[str, np.ndarray]:
    """Per env, the observation its step produced: an ended episode's final observation, else the new one."""
    done = res.done
    if not done.any():
        return res.obs
    return {k: np.where(done.reshape(-1, *([1] * (v.ndim - 1))), res.final_obs[k], v) for k, v in res.obs.items()}


class RewardModel:
    """Scores the steps of `num_envs` envs with the reward.model (module docstring): the scoring stage's local
    `Scorer` (rollout/scoring.py), handed each batch of stored step results by every collector alike."""

    def __init__(self, cfg: RewardConfig, num_envs: int, device: torch.device, timer: Timer,
                 module: torch.nn.Module | None = None, precision: str = "fp32"):
        self.cfg, self.device, self.timer, self.precision = cfg, device, timer, precision
        self.module = module if module is not None else build_reward_module(cfg, device)
        self.weights_sha256 = file_sha256(cfg.weights) if cfg.weights else ""
        self.episode_step = np.zeros(num_envs, np.int64)  # steps each env's current episode has taken
        self.calls = 0  # batched calls made (every one over all the envs that stepped, or ended, together)
        self.scored = 0  # observations scored

    def restart(self) -> None:
        """Every env starts a new episode."""
        self.episode_step[:] = 0

    def submit(self, step: ScoredStep) -> Ready:
        """The model's reward for each row of `step` (0 where reward.mode=terminal scores nothing, and on an idle
        row: a grouped env that waited, whose step was a no-op), scored now. The episode step counters advance on
        the rows that stepped and restart where an episode starts (`StepResult.episode_start`: a GRPO group
        restarts its waiting members on idle rows, without a done; an Atari life lost is a done, not a start)."""
        res = step.result
        n = len(res.reward)
        rows = np.arange(n) if step.envs is None else np.asarray(step.envs)
        stepped = res.stepped
        self.episode_step[rows[stepped]] += 1
        steps, done = self.episode_step[rows].copy(), res.done
        self.episode_step[rows[np.asarray(res.episode_start, bool)]] = 0
        model = np.zeros(n, np.float32)
        pick = np.flatnonzero(stepped & done if self.cfg.mode == "terminal" else stepped)
        if pick.size:
            obs = _produced(res)
            actions = step.actions() if callable(step.actions) else step.actions
            model[pick] = self._score({k: v[pick] for k, v in obs.items()}, np.asarray(actions)[pick], steps[pick],
                                      done[pick], rows[pick])
        return Ready(model)

    @torch.no_grad()
    def _score(self, obs: dict[str, np.ndarray], actions: np.ndarray, steps: np.ndarray, done: np.ndarray,
               envs: np.ndarray) -> np.ndarray:
        n = len(steps)
        with self.timer(timing.REWARD_MODEL):
            tensors = {k: torch.from_numpy(np.ascontiguousarray(v)).to(self.device) for k, v in obs.items()}
            extras = {"actions": torch.from_numpy(np.ascontiguousarray(actions)).to(self.device),
                      "episode_step": torch.from_numpy(steps).to(self.device),
                      "done": torch.from_numpy(np.asarray(done, bool)).to(self.device)}
            try:
                with autocast(self.precision, self.device):  # run.precision, as the policy's forwards
                    out = self.module(tensors, **extras)
            except Exception as err:  # the user's model: its error, in one line, naming it
                raise RewardModelError(f"reward.model={self.cfg.model!r} raised {type(err).__name__}: "
                                       f"{str(err).splitlines()[0] if str(err) else ''} (scoring {n} envs' "
                                       f"observations, keys {sorted(obs)})") from None
            if not isinstance(out, torch.Tensor) or tuple(out.shape) not in ((n,), (n, 1)):
                got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
                raise RewardModelError(f"reward.model={self.cfg.model!r} returned {got} for {n} envs: it must "
                                       f"return one reward per env, a tensor of shape ({n},) or ({n}, 1)")
            values = out.reshape(n).float().cpu().numpy()
        bad = np.flatnonzero(~np.isfinite(values))
        if bad.size:
            i = int(bad[0])
            raise RewardModelError(f"reward.model={self.cfg.model!r} returned a non-finite reward ({values[i]}) "
                                   f"for env {int(envs[i])} at its episode step {int(steps[i])}: the model must "
                                   f"return finite rewards")
        self.calls += 1
        self.scored += n
        return values

    # ---------------------------------------------------------------- saved state
    def shared_owners(self) -> dict[str, Any]:
        """Which model and weights the run is trained with (namespace "reward_model"; a resume checks them)."""
        return {"reward_model": _Identity(self)}

    def episode_owners(self) -> dict[str, Any]:
        """Each env's episode step (namespace "reward_model_steps"; restored only when the episodes continue)."""
        return {"reward_model_steps": _EpisodeSteps(self)}


class _Identity:
    def __init__(self, owner: RewardModel):
        self.owner = owner

    def state_dict(self) -> dict[str, str]:
        return {"model": self.owner.cfg.model, "weights_sha256": self.owner.weights_sha256}

    def load_state_dict(self, state: dict[str, str]) -> None:
        cfg, sha = self.owner.cfg, self.owner.weights_sha256
        if state.get("weights_sha256", "") != sha:
            raise RewardModelError(
                f"reward.weights={cfg.weights!r} is not the file this run was trained with (sha256 "
                f"{state.get('weights_sha256') or 'none'}, now {sha or 'none'}): resume with that file, or train in "
                f"a new run directory")


class _EpisodeSteps:
    def __init__(self, owner: RewardModel):
        self.owner = owner

    def state_dict(self) -> torch.Tensor:
        return torch.from_numpy(self.owner.episode_step.copy())

    def load_state_dict(self, state: Any) -> None:
        steps = torch.as_tensor(state).numpy().astype(np.int64)
        if steps.shape != self.owner.episode_step.shape:
            raise ValueError(f"saved episode steps of {steps.shape[0]} envs, not {self.owner.episode_step.shape[0]}")
        self.owner.episode_step = steps.copy()


def reward_model_for(cfg: RewardConfig, num_envs: int, device: torch.device, timer: Timer, precision: str = "fp32"
                     ) -> RewardModel | None:
    """The reward model reward.model names, scoring in `precision` (run.precision), or None when there is none."""
    return RewardModel(cfg, num_envs, device, timer, precision=precision) if cfg.model else None

