"""The one place a rollout strategy is chosen: `make_collector` builds the lockstep, overlapped or variable
collector from the rollout config, and refuses the combinations none of them can run: the rules of
ddppo/config/checks.py `strategy_problems`, which config validation applies earlier (one-line user errors),
here applied to the envs actually built."""

from __future__ import annotations

import math
from typing import Any

import torch

from ddppo.config import RolloutConfig
from ddppo.config.checks import strategy_problems
from ddppo.rollout.collector import RolloutCollector
from ddppo.rollout.lockstep import LockstepCollector
from ddppo.rollout.overlapped import OverlappedCollector
from ddppo.rollout.variable import VariableCollector
from ddppo.envs.base import VecEnv, worker_count


def storage_steps(cfg: RolloutConfig) -> int:
    """Steps per env the rollout storage holds: num_steps, or the variable mode's per-env capacity."""
    if cfg.mode == "variable":
        return math.ceil(cfg.num_steps * cfg.max_env_steps_factor)
    return cfg.num_steps


def make_collector(cfg: RolloutConfig, envs: VecEnv, policy: Any, preemption: Any, timer: Any,
                   gamma: float, device: torch.device, label: str = "",
                   metric_names: tuple[str, ...] | None = None, reward_scale: Any = None,
                   obs_transform: Any = None, scene_names: tuple[str, ...] | None = None,
                   reward_model: Any = None, precision: str = "fp32") -> RolloutCollector:
    """The collector `cfg` asks for (aggregating `metric_names`, default: the envs' own; per scene `scene_names`,
    default: the envs' own), acting under run.`precision`, scaling rewards with `reward_scale` and observations with `obs_transform`
    (normalize.reward, normalize.update=step: from ddppo.normalization, None: as the envs return them), combining
    the envs' rewards with `reward_model`'s (reward.model: rollout/reward_model.py, None: none); ValueError
    naming the key if it cannot run on `envs`."""
    problems = strategy_problems(cfg, worker_count(envs))
    if problems:
        raise ValueError("; ".join(problems))
    args = (envs, policy, preemption, timer, gamma, device, cfg.num_steps, label, metric_names, reward_scale,
            obs_transform, scene_names, reward_model, precision)
    if cfg.mode == "variable":
        return VariableCollector(*args, batch_wait_s=cfg.batch_wait_s, idle_envs=cfg.idle_envs,
                                 weighted=cfg.importance_weights, weight_form=cfg.importance_weights_form)
    if cfg.overlap:
        return OverlappedCollector(*args)
    return LockstepCollector(*args)
