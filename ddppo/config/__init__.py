"""The experiment config: schema.py (one frozen dataclass per section; help, shape, choices and range as field
metadata), checks.py (declared ranges and cross-field rules, every problem collected), loading.py (schema <- YAML
<- CLI dotlist, YAML text and back), describe.py (`--help-keys`, `--explain`).

The resulting `Config` is frozen: nothing changes it at run time; rank, device and per-rank seeds live in the
distributed context.
"""

from ddppo.config.checks import problems
from ddppo.config.describe import explain, help_keys
from ddppo.config.loading import (UniqueKeyLoader, build_config, diff_keys, from_yaml_text, load_config,
                                  parse_overrides, read_yaml, to_yaml, yaml_layer, yaml_problem)
from ddppo.config.schema import (SHAPE_KEYS, CheckpointConfig, Config, DistConfig, EnvConfig, EvalConfig, KLRefConfig,
                                 LogConfig, NormalizeConfig, PlacementConfig, PolicyConfig, PPOConfig, PreemptionConfig,
                                 RewardConfig, RolloutConfig, RunConfig, TransformerConfig, WandbConfig, fields_of,
                                 get_key)

__all__ = ["SHAPE_KEYS", "CheckpointConfig", "Config", "DistConfig", "EnvConfig", "EvalConfig",
           "KLRefConfig", "LogConfig", "NormalizeConfig", "PPOConfig", "PlacementConfig", "PolicyConfig",
           "PreemptionConfig", "RewardConfig", "RolloutConfig", "RunConfig", "TransformerConfig",
           "UniqueKeyLoader", "WandbConfig", "build_config", "diff_keys", "explain", "fields_of", "from_yaml_text",
           "get_key", "help_keys", "load_config", "parse_overrides", "problems", "read_yaml", "to_yaml", "yaml_layer",
           "yaml_problem"]
