"""Whether a checkpoint fits a config: shape keys (refused, naming the key), the environment layout, the
model's tensors; used by resume (checkpoint/manager.py), evaluation and the KL reference."""

from __future__ import annotations

from typing import Any

from ddppo.config import SHAPE_KEYS, Config, diff_keys, from_yaml_text, get_key
from ddppo.errors import ConfigError
from ddppo.interop.foreign import ForeignCheckpoint

# Keys that may differ from the checkpoint's without changing the model: the per-rank environment layout
# (a resumed training starts its environments afresh; evaluation runs its own counts).
ENV_LAYOUT_KEYS = ("env.num_envs", "env.num_workers")
ACTION_KEYS = ("actor.weight", "action_distribution.linear.weight")  # the action head of each architecture


def shape_changes(stored: Config, cfg: Config) -> str:
    """`key: stored -> now, ...` for the shape-affecting keys (config.SHAPE_KEYS) that differ; "" if none."""
    return _changes(stored, cfg, [k for k in diff_keys(stored, cfg) if k in SHAPE_KEYS])


def setting_changes(stored: Config, cfg: Config, prefixes: tuple[str, ...] = ("env.", "policy.")) -> list[str]:
    """Keys under `prefixes` that differ from the checkpoint's config, the environment layout aside."""
    return [k for k in diff_keys(stored, cfg) if k.startswith(prefixes) and k not in ENV_LAYOUT_KEYS]


def _changes(stored: Config, cfg: Config, keys: list[str]) -> str:
    return ", ".join(f"{k}: {get_key(stored, k)!r} -> {get_key(cfg, k)!r}" for k in keys)


def check_fits(data: dict[str, Any], cfg: Config, own: dict[str, Any] | None, where: str, fix: str) -> None:
    """ConfigError naming the keys when checkpoint `data` (as `load` returns it) cannot run with `cfg` and the
    model whose state_dict is `own` (None: the config alone). `fix`: what to do about a changed shape key."""
    info = foreign(data)
    if info is not None:
        found = info.problems(cfg)
        if not found and own is not None:
            found = tensor_problems(data["model"], own)
        if found:
            raise ConfigError(f"{where} ({info.format}) does not fit this config: {'; '.join(found[:6])}; set these "
                              f"keys to the checkpoint's values")
        return
    stored = stored_config(data, where)
    changed = shape_changes(stored, cfg)
    if changed:
        raise ConfigError(f"{where} was trained with a different model shape ({changed}); {fix}")
    found = tensor_problems(data["model"], own) if own is not None else []
    if found:
        keys = _changes(stored, cfg, setting_changes(stored, cfg)) or "none found"
        raise ConfigError(f"{where} does not fit this config's environment and model ({'; '.join(found[:6])}); "
                          f"keys that differ from the checkpoint's config: {keys}")


def stored_config(data: dict[str, Any], where: str = "checkpoint") -> Config:
    """The config a ddppo checkpoint was trained with (validated against this schema)."""
    return from_yaml_text(data["config_yaml"], where)


def foreign(data: dict[str, Any]) -> ForeignCheckpoint | None:
    """What another trainer's checkpoint says besides its weights (ddppo/interop/foreign.py); None for ddppo's."""
    return data.get("foreign")


def tensor_problems(saved: dict[str, Any], own: dict[str, Any]) -> list[str]:
    """Where a checkpoint's model state_dict does not fit this model's: observation keys, action count,
    tensor shapes and names."""
    problems = []
    obs_had = sorted({k.split(".")[1] for k in saved if k.startswith("encoders.")})
    obs_now = sorted({k.split(".")[1] for k in own if k.startswith("encoders.")})
    if obs_had != obs_now:
        problems.append(f"observation keys: checkpoint {obs_had}, this env {obs_now}")
    actions = [k for k in ACTION_KEYS if k in saved and k in own and saved[k].shape[0] != own[k].shape[0]]
    problems += [f"action space: checkpoint {saved[k].shape[0]} actions/dims, this env {own[k].shape[0]}"
                 for k in actions]
    problems += [f"{k}: checkpoint {tuple(saved[k].shape)}, this config {tuple(own[k].shape)}"
                 for k in sorted(set(own) & set(saved)) if own[k].shape != saved[k].shape and k not in actions]
    missing, unexpected = sorted(set(own) - set(saved)), sorted(set(saved) - set(own))
    if (missing or unexpected) and obs_had == obs_now:
        problems.append(f"tensors missing {missing[:4]}, unexpected {unexpected[:4]}")
    return problems

