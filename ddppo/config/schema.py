"""The config schema: one frozen dataclass per section, by theme in ddppo/config/sections/ (run.py, env.py,
learning.py, policy.py, placement.py), assembled here into `Config`; each field's help, shape flag, allowed values
and range live in its metadata (ddppo/field_metadata.py `doc`), the one source for validation and `--explain`."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Iterator

from ddppo.config.sections.env import EnvConfig, PreemptionConfig, RolloutConfig
from ddppo.config.sections.learning import ImitationConfig, KLRefConfig, NormalizeConfig, PPOConfig, RewardConfig
from ddppo.config.sections.placement import PlacementConfig
from ddppo.config.sections.policy import PolicyConfig, TransformerConfig
from ddppo.config.sections.run import CheckpointConfig, DistConfig, EvalConfig, LogConfig, RunConfig, WandbConfig
from ddppo.field_metadata import SHAPE
from ddppo.envs.registry import section_for

__all__ = ["CheckpointConfig", "Config", "DistConfig", "EnvConfig", "EvalConfig", "ImitationConfig", "KLRefConfig",
           "LogConfig", "NormalizeConfig", "PPOConfig", "PlacementConfig", "PolicyConfig", "PreemptionConfig",
           "RewardConfig", "RolloutConfig", "RunConfig", "SHAPE_KEYS", "TransformerConfig", "WandbConfig", "fields_of",
           "get_key"]


@dataclass(frozen=True)
class Config:
    """A whole experiment."""

    run: RunConfig = field(default_factory=RunConfig)
    dist: DistConfig = field(default_factory=DistConfig)
    placement: PlacementConfig = field(default_factory=PlacementConfig)
    env: EnvConfig = field(default_factory=EnvConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    preemption: PreemptionConfig = field(default_factory=PreemptionConfig)
    ppo: PPOConfig = field(default_factory=PPOConfig)
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    normalize: NormalizeConfig = field(default_factory=NormalizeConfig)
    reward: RewardConfig = field(default_factory=RewardConfig)
    log: LogConfig = field(default_factory=LogConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    imitation: ImitationConfig = field(default_factory=ImitationConfig)

    @property
    def env_options(self) -> dict[str, Any]:
        """The option section of the chosen environment, as a plain dict."""
        return dataclasses.asdict(getattr(self.env, section_for(self.env.name)))

    @property
    def steps_per_rank_update(self) -> int:
        """Env steps one rank collects in a full (not preempted) rollout."""
        return self.env.num_envs * self.rollout.num_steps


def fields_of(cls: type | None = None, prefix: str = "") -> Iterator[tuple[str, dataclasses.Field]]:
    """Every leaf option of the schema as (dotted key, dataclass field), in schema order."""
    for f in dataclasses.fields(cls or Config):
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        if dataclasses.is_dataclass(default):
            yield from fields_of(type(default), f"{prefix}{f.name}.")
        else:
            yield f"{prefix}{f.name}", f


# Keys whose change alters a tensor shape of the model or the optimiser state (fields marked shape=True):
# a resume that changes them is refused.
SHAPE_KEYS = tuple(key for key, f in fields_of() if f.metadata.get(SHAPE))


def get_key(cfg: Any, dotted: str) -> Any:
    """`get_key(cfg, "ppo.lr")` -> cfg.ppo.lr."""
    for part in dotted.split("."):
        cfg = cfg[part] if isinstance(cfg, dict) else getattr(cfg, part)
    return cfg
