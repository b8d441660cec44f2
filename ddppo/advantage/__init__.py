"""Advantage estimation, chosen once from the config (`ppo.advantage`, through `estimator_for`).

An estimator is a class with a small interface (`estimator.Estimator`), registered under its `ppo.advantage`
name with `@register_estimator(NAME)`. What it states about itself, read before anything is built:
    critic                              whether it learns a value head (the policy gets one; returns bootstrap)
    env_group_size(ppo)                 envs that share each episode (GRPO: ppo.group_size; else 1)
    config_problems(cfg)                its config rules, reported by the config checks with every other problem
What an instance does, built as cls(ppo_config, num_envs_of_this_rank):
    compute(rollout)                    after each rollout: its `Advantages` (advantages, returns and the mask of the
                                        samples that take part in the loss), new tensors over the collected steps
                                        (`rollout.bootstrap`: V(the observation after each env's last step))
    normalise(advantages, ctx)          before the PPO epochs, on every rank, every update: new Advantages (a
                                        collective when the estimator normalises over ranks: the same decision on
                                        every rank)
    minibatch(adv, valid)               each minibatch's advantages as the loss takes them (GAE: standardised on
                                        this rank with ppo.normalize_advantage_per=minibatch)
    state_dict() / load_state_dict()    what it carries from one rollout to the next: the saved-state namespace
                                        "advantage" (per rank; restored only when the episodes continue)
An estimator never writes into the rollout it is handed (ddppo/rollout/rollout.py); everything that computes
advantages lives here: gae.py (GAE with the critic's
bootstrap, and the advantage normalisation over every rank), grpo.py (critic-free GRPO: episode returns
normalised within groups of envs, with the carry of the episodes still running).

The config holds only the name: `ppo.advantage`'s choices are the registry `ddppo.user_code.ADVANTAGES` (the
built-in names are declared there; importing this package registers their classes, which the registry does on
its first lookup of one). Adding a built-in estimator is one module here with a registered class, imported below,
and its name in ADVANTAGES' built-in names; your own is a registered class in a module of your working directory,
chosen with `ppo.advantage=MODULE:NAME` (docs/guides/objectives.md). tests/advantage/test_estimator_registry.py
trains with a toy one that way.
"""

from __future__ import annotations

from ddppo.advantage import gae, grpo  # noqa: F401  (registers the built-in estimators)
from ddppo.advantage.estimator import Advantages, Estimator, estimator_class, estimator_for, register_estimator

__all__ = ["Advantages", "Estimator", "estimator_class", "estimator_for", "register_estimator"]
