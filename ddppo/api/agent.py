"""`Agent`: a trained policy from a checkpoint, acting on observations you give it (one env or a batch)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Mapping, Sequence

import gymnasium
import numpy as np
import torch

from ddppo import user_code
from ddppo.config import Config
from ddppo.eval.loading import act_on_arrays, acting_precision, build_policy, load_weights, open_checkpoint
from ddppo.model.memory import Memory
from ddppo.model.actor_critic import ActorCritic
from ddppo.model.precision import store_memory_in
from ddppo.rollout.acting import check_finite
from ddppo.envs.registry import make_vec_env
from ddppo.envs.base import EnvSpec

log = logging.getLogger(__name__)


class Agent:
    """A trained policy that acts as `ddppo eval` does: the same network, the checkpoint's observation
    normalisation statistics (frozen), greedy actions by default, Box actions clipped to the action space.

    Make one with `Agent.from_checkpoint`; then call `act` once per step:

    ```python
    agent = Agent.from_checkpoint("runs/corridor")
    obs, _ = env.reset()
    action, state = agent.act(obs)  # state=None: an episode starts
    while True:
        obs, reward, terminated, truncated, info = env.step(action)
        ...
        action, state = agent.act(obs, state, episode_start=terminated or truncated)
    ```

    Attributes:
        policy: the `ddppo.model.actor_critic.ActorCritic` (eval mode) the checkpoint was loaded into.
        config: the run's resolved config (`ddppo.config.Config`).
        observation_space: the gymnasium Dict space the policy reads (key -> Box, Discrete or MultiDiscrete).
        action_space: the gymnasium action space (Discrete: actions are indices 0..n-1; MultiDiscrete: an index
            0..n-1 per dimension; MultiBinary: 0/1 in its dtype; Box: clipped).
        checkpoint: the checkpoint file loaded.
        env_steps: the env steps the checkpoint was trained for.
    """

    def __init__(self, policy: ActorCritic, config: Config, observation_space: gymnasium.spaces.Dict,
                 action_space: gymnasium.spaces.Space, checkpoint: Path, env_steps: int, device: torch.device):
        self.policy, self.config, self.device = policy, config, device
        self.observation_space, self.action_space = observation_space, action_space
        self.checkpoint, self.env_steps = checkpoint, env_steps
        self.precision = acting_precision(config, torch.device(device))
        store_memory_in(policy, self.precision)

    # ---------------------------------------------------------------------------------------- loading
    @classmethod
    def from_checkpoint(cls, path: str | Path, device: str | torch.device = "cpu", overrides: Sequence[str] = (),
                        observation_space: gymnasium.spaces.Dict | None = None,
                        action_space: gymnasium.spaces.Space | None = None) -> Agent:
        """Load a policy to act with.

        Args:
            path: a run directory (its newest valid checkpoint, with its config.yaml, as `ddppo eval` reads
                them) or one checkpoint file (with the config stored in it).
            device: where the policy runs ("cpu", "cuda", "cuda:1", a torch.device).
            overrides: `key=value` config overrides, as on the command line (e.g. an env option whose path
                differs on this machine).
            observation_space: the Dict space the policy was built on. By default it is read from one
                environment built from the config (closed at once); pass both spaces to act without the
                simulator (they must be what the environment had: the checkpoint is checked against them).
            action_space: the action space the policy was built on (read like `observation_space`).

        Raises:
            ddppo.errors.ConfigError: the config is invalid, or names a module that cannot be imported.
            ddppo.errors.CheckpointError: no checkpoint, an unreadable one, or one that does not fit the config.
        """
        user_code.workdir_first()  # as the `ddppo` command: the user's modules beside them are found
        device = torch.device(device)
        cfg, file, data = open_checkpoint(Path(path), device, overrides)
        if observation_space is None or action_space is None:
            observation_space, action_space = _env_spaces(cfg, observation_space, action_space)
        policy = build_policy(cfg, observation_space, action_space, device)
        load_weights(policy, data, cfg, f"checkpoint {file}")
        env_steps = int(data.get("counters", {}).get("env_steps", 0))
        log.info("loaded %s (%s, %d env steps) on %s", file, cfg.policy.architecture, env_steps, device)
        return cls(policy, cfg, observation_space, action_space, file, env_steps, device)

    # ---------------------------------------------------------------------------------------- acting
    def initial_state(self, num_envs: int = 1) -> Memory:
        """The policy's memory of `num_envs` envs at an episode's start: a dict of tensors, each (N, ...) (a GRU's
        state, a transformer's KV cache; empty without memory), to hand back to `act` unchanged."""
        return self.policy.initial_memory(num_envs, self.device)

    @torch.no_grad()
    def act(self, obs: Mapping[str, Any] | np.ndarray, state: Memory | None = None,
            episode_start: Any = None, deterministic: bool = True) -> tuple[np.ndarray, Memory]:
        """The actions for one step, and the policy's memory to pass to the next call.

        Args:
            obs: the observation as the environment gives it: a dict key -> array, one env's (each key of
                its space's shape) or a batch (a leading dimension N). A single-key policy also takes the
                bare array.
            state: what the previous call returned, or None: every env starts an episode now.
            episode_start: per env (N,) or one bool: True where `obs` is the first observation of an episode
                (after a reset, or the `terminated or truncated` of the step that produced `obs` under
                same-step autoreset); the memory is emptied there. None: no env starts (unless
                `state` is None).
            deterministic: greedy actions (argmax, the Gaussian's mean) as `ddppo eval` takes by default;
                False samples from the policy (torch's global random stream).

        Returns:
            The actions as a numpy array, (N,) or (N, A) for a batch, () or (A,) for one env (Box actions
                clipped to the action space), and the policy's new memory (a dict of tensors on the device).
        """
        batch, single = self._batch(obs)
        n = next(iter(batch.values())).shape[0]
        check_finite(batch, "given to Agent.act")
        if state is None:
            state, start = self.initial_state(n), torch.ones(n, device=self.device)
        else:
            start = torch.as_tensor(np.broadcast_to(np.asarray(False if episode_start is None else episode_start,
                                                               np.float32), (n,)).copy(), device=self.device)
        actions, state = act_on_arrays(self.policy, batch, state, start, self.action_space, self.precision,
                                       deterministic)
        return (actions[0] if single else actions), state

    def _batch(self, obs: Mapping[str, Any] | np.ndarray) -> tuple[dict[str, np.ndarray], bool]:
        """The observation as a batch of arrays in the spaces' dtypes, and whether it was one env's."""
        spaces = self.observation_space.spaces
        if not isinstance(obs, Mapping):
            if len(spaces) != 1:
                raise ValueError(f"this policy reads the observation keys {sorted(spaces)}: pass a dict")
            obs = {next(iter(spaces)): obs}
        missing = sorted(set(spaces) - set(obs))
        if missing:
            raise ValueError(f"observation lacks the keys {missing} (the policy reads {sorted(spaces)})")
        arrays = {k: np.asarray(obs[k], dtype=spaces[k].dtype if spaces[k].dtype is not None else np.float32)
                  for k in spaces}
        first = sorted(spaces)[0]
        single = arrays[first].shape == tuple(spaces[first].shape)
        out = {}
        for k, v in arrays.items():
            shape = tuple(spaces[k].shape)
            if (v.shape != shape) if single else (v.shape[1:] != shape):
                raise ValueError(f"observation {k!r} has shape {v.shape}; expected {shape} for one env or "
                                 f"(N, {', '.join(map(str, shape))}) for a batch" if shape else
                                 f"observation {k!r} has shape {v.shape}; expected () or (N,)")
            out[k] = np.ascontiguousarray(v[None] if single else v)
        return out, single


def _env_spaces(cfg: Config, obs_space: Any, action_space: Any) -> tuple[gymnasium.spaces.Dict, Any]:
    """The spaces of one environment built from `cfg` (the one given instead, where given)."""
    envs = make_vec_env(cfg.env.name, cfg.env_options, EnvSpec(num_envs=1, seed=cfg.run.seed + cfg.eval.seed_offset))
    try:
        return obs_space or envs.observation_space, action_space or envs.action_space
    finally:
        envs.close()
