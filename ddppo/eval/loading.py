"""A checkpoint's policy as evaluation acts with it: the policy `model.build.saved_policy` builds for the config
(its observation normaliser applies the saved statistics, frozen), in eval mode on the device, the checkpoint
checked against the config and loaded. The one loading path of `ddppo eval` (runner.py) and `ddppo.api.Agent`."""

from __future__ import annotations

from typing import Any

import gymnasium
import torch

from ddppo import checkpoint as ckpt
from ddppo.config import Config
from ddppo.model.build import saved_policy
from ddppo.model.actor_critic import ActorCritic
from ddppo.model.precision import store_memory_in

EVAL_FIX = "evaluate it with the keys set back to the checkpoint's values"


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
