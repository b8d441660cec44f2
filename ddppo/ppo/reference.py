"""A frozen reference policy for the KL(pi || pi_ref) penalty (`ppo.kl_ref`).

The reference is loaded once from a checkpoint onto this rank's device and kept
there (never offloaded in the hot path). After each rollout it is evaluated
under no-grad over the whole collected sequence in one pass, and its action
distribution parameters are handed to the update with the rollout; its memory carries
over from one rollout to the next like the policy's.

Adaptive beta (Schulman et al. 2017, "adaptive KL penalty"): once per update,
beta *= rate when the measured mean KL > target_kl * tolerance, and beta /= rate
when it is < target_kl / tolerance. The measured KL is the all-rank mean, so
beta stays identical on every rank; it is training progress (train/progress.py), saved in the checkpoint's
counters: `adapt` takes this update's beta and returns the next.
"""

from __future__ import annotations

import gymnasium
import torch

from ddppo import checkpoint as ckpt
from ddppo.errors import CheckpointError, ConfigError
from ddppo.config import KLRefConfig
from ddppo.model import kept, memory as mem
from ddppo.model.build import saved_policy
from ddppo.model.precision import autocast, store_memory_in
from ddppo.rollout.rollout import Rollout


class ReferencePolicy:
    def __init__(self, cfg: KLRefConfig, obs_space: gymnasium.spaces.Dict, action_space: gymnasium.spaces.Space,
                 num_envs: int, device: torch.device, precision: str = "fp32"):
        try:
            data = ckpt.load(cfg.checkpoint, map_location=device)
        except CheckpointError as err:
            raise CheckpointError(f"ppo.kl_ref.checkpoint: {err}; pass a checkpoint that `ddppo train` wrote "
                                  f"(RUN_DIR/checkpoints/ckpt-<update>.pt), or leave it empty") from None
        if ckpt.foreign(data) is not None:
            raise CheckpointError(f"ppo.kl_ref.checkpoint={cfg.checkpoint} is a {ckpt.foreign(data).format} "
                                  f"checkpoint; a reference must be a ddppo checkpoint (fine-tune from it with "
                                  f"checkpoint.path, and use one of that run's checkpoints as the reference)")
        ref_cfg = ckpt.stored_config(data, cfg.checkpoint)
        self.policy = saved_policy(ref_cfg, obs_space, action_space).to(device)
        try:
            self.policy.load_state_dict(data["model"])
        except RuntimeError as err:
            raise CheckpointError(f"ppo.kl_ref.checkpoint={cfg.checkpoint}: the reference does not fit this "
                                  f"environment's observation/action spaces: {str(err)[:400]}") from None
        self.policy.eval().requires_grad_(False)
        store_memory_in(self.policy, precision)
        self.memory = self.policy.initial_memory(num_envs, device)
        self.device, self.cfg = device, cfg
        self.precision = precision  # run.precision of its forward, as the learning pass's

    def state_dict(self) -> dict[str, torch.Tensor]:
        """This rank's memory of the reference policy (the saved-state namespace "reference"; the adapted beta,
        the same on every rank, is training progress, saved with the counters)."""
        return mem.saved(self.memory)

    def load_state_dict(self, state) -> None:
        """Inverse of `state_dict` (environments that start fresh episodes keep the emptied memory instead); a
        checkpoint from before the memory protocol saved one tensor."""
        if isinstance(state, torch.Tensor):
            state = self.policy.legacy_memory(state)
        misfit = mem.misfit(self.memory, state)
        if misfit is not None:
            raise ValueError(f"the reference policy's saved memory does not fit: {misfit}")
        self.memory = mem.restored(state, self.memory, self.device)  # in this run's dtypes (run.precision)

    def check_kept(self, policy: torch.nn.Module) -> None:
        """ConfigError unless this reference reads the frozen features `policy`'s rollouts keep in place of images
        (ddppo/model/kept.py): the same frozen encoder, weights included. Called once the policy holds its weights
        (encoder_weights or a checkpoint's), before the first annotate."""
        problem = kept.mismatch(policy, self.policy)
        if problem is not None:
            raise ConfigError(f"ppo.kl_ref.checkpoint={self.cfg.checkpoint}: {problem}; use as the reference a "
                              f"checkpoint trained with the same policy.image_encoder, policy.encoder_weights and "
                              f"policy.freeze_encoder=true")

    def annotate(self, rollout: Rollout) -> torch.Tensor:
        """Reference distribution parameters (L, N, P) for the collected steps."""
        with autocast(self.precision, self.device):
            params, memory = self.policy.sequence_params(rollout.obs, self.memory, rollout.episode_start,
                                                         rollout.actions)  # habitat_baselines: previous actions
        self.memory = mem.cast_like(memory, self.memory)
        return params.float()

    def adapt(self, beta: float, measured_kl: float) -> float:
        """Adaptive beta: the next update's, from this update's `beta` and mean KL."""
        if self.cfg.adaptive and measured_kl == measured_kl:  # skip NaN
            if measured_kl > self.cfg.target_kl * self.cfg.tolerance:
                return beta * self.cfg.rate
            if measured_kl < self.cfg.target_kl / self.cfg.tolerance:
                return beta / self.cfg.rate
        return beta
