"""A checkpoint's policy as evaluation acts with it: the config a run directory or a checkpoint file holds (with
eval's defaults and the overrides), the policy `model.build.saved_policy` builds for it (its observation
normaliser applies the saved statistics, frozen), in eval mode on the device, the checkpoint checked against the
config and loaded; acting on host arrays in the run's precision, Box actions clipped. The one loading path of
`ddppo eval` (runner.py), `ddppo.api.Agent` and `ddppo record --policy`."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Sequence

import gymnasium
import numpy as np
import torch

from ddppo import checkpoint as ckpt
from ddppo.config import Config, build_config, load_config, parse_overrides, to_yaml, yaml_layer
from ddppo.errors import CheckpointError, ConfigError
from ddppo.model.actions import env_actions
from ddppo.model.build import saved_policy
from ddppo.model.actor_critic import ActorCritic
from ddppo.model.memory import Memory
from ddppo.model.precision import autocast, bf16_problem, resolve_precision, store_memory_in
from ddppo.rundir import RunDir

log = logging.getLogger(__name__)

EVAL_FIX = "evaluate it with the keys set back to the checkpoint's values"
# Training-only keys set so that no training-only check (minibatches or workers dividing env.num_envs)
# refuses an eval override of env.num_envs; eval uses neither. The scene costs place training's scenes for speed
# (episode_split=cost): eval places them alike rather than need a cost file that may be gone. The user's own
# overrides still win.
EVAL_DEFAULTS = ("ppo.num_mini_batch=1", "env.num_workers=0", "env.habitat.scene_costs=''",
                 "env.habitat_lab.scene_costs=''")


def resolve_config(target: str, overrides: list[str]) -> Config:
    """A run dir (its config.yaml, run.dir = that dir) or a YAML config, plus overrides."""
    path = Path(target)
    if path.is_dir():
        stored = RunDir(path).config_path
        if not stored.is_file():
            raise ConfigError(f"{target!r} is a directory without config.yaml; pass a run directory written by "
                              f"`ddppo train` or a YAML config file")
        return load_config(stored, [*EVAL_DEFAULTS, *overrides, f"run.dir={path}"])
    return load_config(path, [*EVAL_DEFAULTS, *overrides])


def open_checkpoint(path: Path, device: torch.device, overrides: Sequence[str] = ()
                    ) -> tuple[Config, Path, dict[str, Any]]:
    """The config, the checkpoint file and its data of `path`: a run directory (its newest valid checkpoint, with its
    config.yaml) or one checkpoint file (with the config stored in it), `overrides` applied."""
    if path.is_dir():
        cfg = resolve_config(str(path), list(overrides))
        found = ckpt.newest_valid(path, map_location=device)
        if found is None:
            raise CheckpointError(f"{str(path)!r} has no checkpoints; train first, or pass a checkpoint file")
        file, data = found
        return cfg, file, data
    data = ckpt.load(path, map_location=device)
    if ckpt.foreign(data) is not None:
        raise CheckpointError(f"{str(path)!r} is a {ckpt.foreign(data).format} checkpoint without a ddppo "
                              f"config; load it from a run directory whose config describes it")
    cfg = ckpt.stored_config(data, f"checkpoint {path}")
    if overrides:
        cfg = build_config((f"checkpoint {path}", yaml_layer(to_yaml(cfg), f"checkpoint {path}")),
                           ("overrides", parse_overrides(list(overrides))))
    return cfg, path, data


def acting_precision(cfg: Config, device: torch.device) -> str:
    """The run's precision (run.precision) where `device` runs it natively, as `ddppo eval` acts; else fp32, said
    once (a policy trained in bf16 acts in fp32 on a machine without bf16, a little differently)."""
    precision = cfg.run.precision
    if precision == "auto":  # a config not written by a run (runs record what auto resolved to)
        precision = resolve_precision("auto", device, announce=False)
    problem = bf16_problem(device) if precision == "bf16" else None
    if problem is not None:
        log.warning("%s: acting in fp32 instead", problem.split(";")[0])
        precision = "fp32"
    return precision


@torch.no_grad()
def act_on_arrays(policy: ActorCritic, batch: dict[str, np.ndarray], memory: Memory, start: torch.Tensor,
                  action_space: gymnasium.spaces.Space, precision: str, deterministic: bool = True
                  ) -> tuple[np.ndarray, Memory]:
    """`policy`'s actions for a batch of host observations (N, ...) as the env takes them (Box actions clipped),
    and its new memory; `start` (N,) on the policy's device: 1.0 where an episode starts."""
    tensors = {k: torch.from_numpy(v).to(start.device) for k, v in batch.items()}
    with autocast(precision, start.device):
        action, _, _, memory = policy.act(tensors, memory, start, deterministic=deterministic)
    return env_actions(action_space, action.cpu().numpy()), memory


def build_policy(cfg: Config, obs_space: gymnasium.spaces.Dict, action_space: gymnasium.spaces.Space,
                 device: torch.device) -> ActorCritic:
    """The policy a checkpoint trained with `cfg` holds, on `device`, in eval mode, its memory kept in the dtype of
    `cfg`'s run.precision."""
    policy = saved_policy(cfg, obs_space, action_space).to(device)
    policy.eval()
    store_memory_in(policy, cfg.run.precision)
    return policy


def load_weights(policy: ActorCritic, data: dict[str, Any], cfg: Config, what: str) -> None:
    """Load checkpoint `data` (ckpt.load's) into `policy`; CheckpointError naming `what` and the keys that
    differ if it was trained with other shapes than `cfg` says."""
    ckpt.check_fits(data, cfg, policy.state_dict(), what, EVAL_FIX)
    policy.load_state_dict(data["model"])
