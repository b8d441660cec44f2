"""The one acting path, shared by training (rollout/collector.py) and evaluation (eval/runner.py).

    act       policy.act on the current observation, the policy's memory and episode-start flags, under
              run.precision (`forward` and `value`: the policy's acting passes, also for the collector's bootstraps)
    clip      actions of a Box space clipped to its bounds before the env sees them (ddppo.model.actions.env_actions)
    step      env.step, timed (the envs' own rewards: the collector's scoring stage makes the ones learned on)
    transfer  the new observation checked for NaN/inf (EnvError naming env, key and step) and moved to the
              policy's device with reward, done and the next episode-start flags, in one staged copy
              (rollout/staging.py)
    keep      a frozen encoder's features computed once in place of its images (ddppo/model/kept.py): what the
              policy acts on and the rollout stores

The `Actor` holds what carries from one step to the next (observation, start flags, the policy's memory); the
collector adds storage, preemption and truncation bootstraps around it, the evaluator episode quotas and videos.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from ddppo import timing
from ddppo.model.actions import env_actions
from ddppo.model.kept import FEATURES, kept_dtype
from ddppo.model import memory as mem
from ddppo.model.memory import Memory
from ddppo.model.actor_critic import ActorCritic
from ddppo.model.precision import autocast, to_fp32
from ddppo.normalization.live import LiveObsNormalizer
from ddppo.rollout.staging import HostStaging
from ddppo.timing import Timer
from ddppo.envs.base import EnvError, StepResult, VecEnv


def check_finite(obs: dict[str, np.ndarray], where: str, label: str = "", env_index: np.ndarray | None = None) -> None:
    """EnvError naming key, env and `where` if a floating-point observation holds NaN or inf; row i is
    env `env_index[i]` (default: env i)."""
    for key, value in obs.items():
        arr = np.asarray(value)
        if not np.issubdtype(arr.dtype, np.floating) or np.isfinite(arr).all():
            continue
        bad = ~np.isfinite(arr.reshape(arr.shape[0], -1))
        row = int(np.flatnonzero(bad.any(axis=1))[0])
        kind = "nan" if np.isnan(arr[row]).any() else "inf"
        env = row if env_index is None else int(env_index[row])
        raise EnvError(f"{label + ': ' if label else ''}observation {key!r} of env {env} is non-finite ({kind}) "
                       f"{where}; the environment produced it (fix the environment, or its observation "
                       f"wrapper, to return finite values)")


@dataclasses.dataclass
class Action:
    action: torch.Tensor  # what the policy chose (unclipped: its log-probability is of this)
    logp: torch.Tensor
    value: torch.Tensor
    env_action: np.ndarray  # what the envs get: on the CPU, clipped to a Box's bounds


@dataclasses.dataclass
class Step:
    result: StepResult  # the envs' numpy answer (episodes, final observations, ...)
    reward: torch.Tensor  # (N,) float32 on the device
    done: torch.Tensor  # (N,) float32 on the device
    idle: torch.Tensor | None  # (N,) float32 on the device, for grouped episodes


class Actor:
    """Acts in `envs` with `policy`: `begin(first_obs)`, then `act()` and `step(a.env_action, where)` in turn.

    `obs`, `start` and `memory` are what the next `act` uses. CPU observations share memory with the
    envs' arrays until `detach()` (the envs may reuse them on their next step).
    """

    def __init__(self, envs: VecEnv, policy: ActorCritic, device: torch.device, timer: Timer | None = None,
                 label: str = "", obs_transform: LiveObsNormalizer | None = None, precision: str = "fp32"):
        self.envs, self.policy, self.device = envs, policy, device
        self.precision = precision  # run.precision of every policy forward made through this actor
        self.timer = timer if timer is not None else Timer(device)
        self.label = label  # names the environment (and rank) in errors
        self.obs: dict[str, torch.Tensor] = {}
        self.start = torch.ones(envs.num_envs, device=device)
        self.memory = policy.initial_memory(envs.num_envs, device)
        self.staging = HostStaging(device)  # every host-to-device copy of a step (pinned buffers on CUDA)
        # normalize.update=step: a ddppo.normalization.LiveObsNormalizer that counts and normalises every
        # observation on the host before it goes to the device (the policy then does not normalise); None: as is
        self.obs_transform = obs_transform

    def begin(self, obs: dict[str, np.ndarray], where: str = "after reset") -> None:
        """Every env starts an episode with `obs`: start flags set, memory emptied."""
        self.set_obs(obs, where)
        self.start = torch.ones(self.envs.num_envs, device=self.device)
        self.memory = self.policy.initial_memory(self.envs.num_envs, self.device)

    def set_obs(self, obs: dict[str, np.ndarray], where: str) -> None:
        """Replace the observation the next `act` sees (checked, transferred)."""
        check_finite(obs, where, self.label)
        self.obs = self.keep(self.staging.to_device(obs if self.obs_transform is None
                                                    else self.obs_transform.observe(obs)))

    def keep(self, obs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """An observation on the device as the policy acts on it and the rollout keeps it (ddppo/model/kept.py):
        frozen encoders' features, computed once under run.precision and kept in its dtype, in place of images."""
        if not getattr(self.policy, "kept", None):
            return obs
        with self.timer(timing.POLICY_FORWARD), autocast(self.precision, self.device):
            out = self.policy.keep(obs)
        dtype = kept_dtype(self.precision)
        return {k: v.to(dtype) if k.endswith(FEATURES) else v for k, v in out.items()}

    def act(self, deterministic: bool = False) -> Action:
        with self.timer(timing.POLICY_FORWARD):  # up to the action on the host: on a GPU the copy waits for it
            action, logp, value, self.memory = self.forward(self.obs, self.memory, self.start, deterministic)
            env_action = env_actions(self.envs.action_space, action.cpu().numpy())
        return Action(action, logp, value, env_action)

    def forward(self, obs: dict[str, torch.Tensor], memory: Memory, start: torch.Tensor,
                deterministic: bool = False) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, Memory]:
        """policy.act under run.precision: log-prob and value in float32, the memory in the dtypes it came in."""
        with autocast(self.precision, self.device):
            action, logp, value, new_memory = self.policy.act(obs, memory, start, deterministic=deterministic)
        logp, value = to_fp32(logp, value)
        return action, logp, value, mem.cast_like(new_memory, memory)

    def value(self, obs: dict[str, torch.Tensor], memory: Memory, start: torch.Tensor) -> torch.Tensor:
        """policy.value under run.precision, in float32 (the collector's bootstraps)."""
        with autocast(self.precision, self.device):
            return self.policy.value(obs, memory, start).float()

    def step(self, env_action: np.ndarray, where: str) -> Step:
        """Step the envs; the new observation and start flags become current."""
        with self.timer(timing.ENV_STEP):
            res = self.envs.step(env_action)
        with self.timer(timing.OBS_TRANSFER):
            check_finite(res.obs, where, self.label)
            obs = res.obs if self.obs_transform is None else self.obs_transform.observe(res.obs)
            self.obs, flags = self.staging.step_to_device(obs, {"reward": res.reward, "done": res.done,
                                                                    "started": res.started, "idle": res.idle})
            self.start = flags.get("started", flags["done"])
        self.obs = self.keep(self.obs)
        return Step(res, flags["reward"], flags["done"], flags.get("idle"))

    def detach(self) -> None:
        """Own the current observation and start flags (copies), so the envs' next step cannot change them."""
        self.obs = {k: v.clone() for k, v in self.obs.items()}
        self.start = self.start.clone()
