"""The one place a rollout strategy is chosen: `make_collector` builds the lockstep, overlapped or variable
collector from the rollout config (with training's episode observers, `episode_observers`), and refuses the
combinations none of them can run: the rules of ddppo/config/checks.py `strategy_problems`, which config
validation applies earlier (one-line user errors), here applied to the envs actually built."""

from __future__ import annotations

import math

from ddppo.config import RolloutConfig
from ddppo.config.checks import strategy_problems
from ddppo.rollout.acting import Actor
from ddppo.rollout.collector import RolloutCollector
from ddppo.rollout.episode_metrics import EpisodeTally, env_metric_names
from ddppo.rollout.lockstep import LockstepCollector
from ddppo.rollout.observers import EpisodeObserver
from ddppo.rollout.overlapped import OverlappedCollector
from ddppo.rollout.preemption import Preemption
from ddppo.rollout.scenes import SceneTally, env_scene_names
from ddppo.rollout.scoring import StepScoring
from ddppo.rollout.variable import VariableCollector
from ddppo.envs.base import VecEnv, worker_count


def storage_steps(cfg: RolloutConfig) -> int:
    """Steps per env the rollout storage holds: num_steps, or the variable mode's per-env capacity."""
    if cfg.mode == "variable":
        return math.ceil(cfg.num_steps * cfg.max_env_steps_factor)
    return cfg.num_steps


def make_collector(cfg: RolloutConfig, actor: Actor, preemption: Preemption, scoring: StepScoring,
                   observers: list[EpisodeObserver] | None = None) -> RolloutCollector:
    """The collector `cfg` asks for, acting through `actor` in its envs, handing every stored step to `scoring`
    (rollout/scoring.py) and finished episodes to `observers` (default: `episode_observers(actor.envs)`);
    ValueError naming the key if it cannot run on those envs."""
    problems = strategy_problems(cfg, worker_count(actor.envs))
    if problems:
        raise ValueError("; ".join(problems))
    args = (actor, preemption, cfg.num_steps, scoring,
            episode_observers(actor.envs) if observers is None else observers)
    if cfg.mode == "variable":
        return VariableCollector(*args, batch_wait_s=cfg.batch_wait_s, idle_envs=cfg.idle_envs,
                                 weighted=cfg.importance_weights, weight_form=cfg.importance_weights_form)
    if cfg.overlap:
        return OverlappedCollector(*args)
    return LockstepCollector(*args)


def episode_observers(envs: VecEnv, metric_names: tuple[str, ...] | None = None,
                      scene_names: tuple[str, ...] | None = None) -> list[EpisodeObserver]:
    """Training's episode observers: the episode metrics `metric_names` (train/*) and the scenes `scene_names`
    (train/scene/*), by default the ones `envs` declare (the builder passes the names the ranks agreed on)."""
    return [EpisodeTally(env_metric_names(envs) if metric_names is None else metric_names),
            SceneTally(env_scene_names(envs) if scene_names is None else scene_names, envs)]
