"""Advantage estimation, chosen once from the config (`ppo.advantage`, through `estimator_for`).

An estimator is one object with a small interface (`Estimator`):
    compute(storage, bootstrap_value)   after each rollout: fills storage.advantages, .returns and .loss_mask over
                                        the collected steps (`bootstrap_value()`: V(observation the next rollout
                                        starts from), asked only by estimators that bootstrap)
    normalise(storage, ctx)             before the PPO epochs, on every rank, every update (a collective when the
                                        estimator normalises over ranks: the same decision on every rank)
    minibatch(adv, valid)               each minibatch's advantages as the loss takes them (GAE: standardised on
                                        this rank with ppo.normalize_advantage_per=minibatch)
    state_dict() / load_state_dict()    what it carries from one rollout to the next: the saved-state namespace
                                        "advantage" (per rank; restored only when the episodes continue)
The storage keeps the buffers only; everything that computes advantages lives here: gae.py (GAE with the critic's
bootstrap, and the advantage normalisation over every rank), grpo.py (critic-free GRPO: episode returns
normalised within groups of envs, with the carry of the episodes still running).

Adding an estimator is one module with such a class, one line in ESTIMATORS below, and one entry in
`ddppo.config.schema.ADVANTAGES` (its name for `ppo.advantage`, and whether it learns a critic);
tests/advantage/test_estimator_registry.py adds a toy one that way.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol

import torch

from ddppo.config import PPOConfig
from ddppo.distributed import DistContext
from ddppo.rollout.storage import RolloutStorage
from ddppo.advantage.gae import GAE
from ddppo.advantage.grpo import GRPO


class Estimator(Protocol):
    def compute(self, storage: RolloutStorage, bootstrap_value: Callable[[], torch.Tensor]) -> None: ...

    def normalise(self, storage: RolloutStorage, ctx: DistContext) -> None: ...

    def minibatch(self, adv: torch.Tensor, valid: torch.Tensor | None) -> torch.Tensor: ...

    def state_dict(self) -> Any: ...

    def load_state_dict(self, state: Any) -> None: ...


# ppo.advantage -> the estimator's class, built as cls(ppo_config, num_envs_of_this_rank)
ESTIMATORS: dict[str, Callable[[PPOConfig, int], Estimator]] = {"gae": GAE, "grpo": GRPO}


def estimator_for(ppo: PPOConfig, num_envs: int) -> Estimator:
    """The estimator `ppo.advantage` names, for a rank with `num_envs` envs."""
    try:
        make = ESTIMATORS[ppo.advantage]
    except KeyError:
        raise ValueError(f"ppo.advantage={ppo.advantage!r} names no registered estimator "
                         f"({', '.join(sorted(ESTIMATORS))}): ddppo/advantage/__init__.py ESTIMATORS") from None
    return make(ppo, num_envs)
