"""What an advantage estimator is (`Estimator`) and what it returns (`Advantages`), the decorator that makes one a
`ppo.advantage` choice (`register_estimator`), and the estimator the config names (`estimator_class`,
`estimator_for`)."""

from __future__ import annotations

from typing import Any, Callable, ClassVar, NamedTuple, Protocol

import torch

from ddppo.config import Config, PPOConfig
from ddppo.distributed import DistContext
from ddppo.rollout.rollout import Rollout
from ddppo.user_code import ADVANTAGES


class Advantages(NamedTuple):
    """What an advantage estimator returns for a rollout: new tensors, (L, N) each."""

    advantages: torch.Tensor
    returns: torch.Tensor  # 0 where the estimator has no critic (GRPO)
    mask: torch.Tensor  # float: the samples that take part in the loss (the rollout's valid ones, or fewer: GRPO)


class Estimator(Protocol):
    """A class, built as cls(ppo_config, num_envs_of_this_rank). Its class-level facts are read before anything is
    built: by the config checks (`config_problems`) and by the training builder (`critic`, `env_group_size`)."""

    critic: ClassVar[bool]  # it learns a value head (the policy gets one; returns bootstrap from it)

    @staticmethod
    def env_group_size(ppo: PPOConfig) -> int:
        """Envs that share each episode (1: every env runs its own)."""

    @staticmethod
    def config_problems(cfg: Config) -> list[str]:
        """What this estimator cannot run with, each naming key, value and fix (as every config problem)."""

    def compute(self, rollout: Rollout) -> Advantages: ...

    def normalise(self, adv: Advantages, ctx: DistContext) -> Advantages: ...

    def minibatch(self, adv: torch.Tensor, valid: torch.Tensor | None) -> torch.Tensor: ...

    def state_dict(self) -> Any: ...

    def load_state_dict(self, state: Any) -> None: ...


MEMBERS = ("critic", "env_group_size", "config_problems", "compute", "normalise", "minibatch", "state_dict",
           "load_state_dict")


def register_estimator(name: str) -> Callable[[type], type]:
    """Class decorator registering an estimator under `name`, chosen by `ppo.advantage=name` (built in) or
    `ppo.advantage=MODULE:name` (yours, in MODULE, imported from the working directory first, also by `ddppo eval`
    and on resume). A class without every member of `Estimator` is refused here, naming what it lacks."""
    def add(cls: type) -> type:
        missing = [m for m in MEMBERS if not hasattr(cls, m)]
        if missing:
            raise TypeError(f"advantage estimator {name!r} ({cls.__qualname__}) lacks {', '.join(missing)} "
                            f"(ddppo.advantage.estimator.Estimator lists what an estimator declares)")
        return ADVANTAGES.register(name)(cls)

    return add


def estimator_class(ppo: PPOConfig) -> Any:
    """The estimator class `ppo.advantage` names (its critic and env grouping are read before envs are built)."""
    return ADVANTAGES.get(ppo.advantage, "ppo.advantage")


def estimator_for(ppo: PPOConfig, num_envs: int) -> Estimator:
    """The estimator `ppo.advantage` names, for a rank with `num_envs` envs."""
    return estimator_class(ppo)(ppo, num_envs)
