"""habitat-baselines' small PointNav policy (`PointNavBaselinePolicy`: SimpleCNN + GRU), rebuilt so its
state_dict is the same (policy.architecture=habitat_baselines_simple).

Names and shapes match habitat-baselines one for one (0.2.x files add the `actor_critic.` prefix, which
ddppo/interop/habitat_checkpoint.py adds or strips):

  net.visual_encoder.cnn    Conv 8x8/4 (32) ReLU, Conv 4x4/2 (64) ReLU, Conv 3x3/1 (32), Flatten,
                            Linear(32 * h * w, hidden), ReLU  (no padding; rgb / 255 then depth, channels stacked)
  net.state_encoder.rnn     one GRU layer over [visual features, raw pointgoal_with_gps_compass (r, theta)]
  action_distribution.linear  categorical logits; critic.fc the value

Unlike PointNavResNetPolicy it has no previous-action input and no goal embedding, so the recurrent state is
the GRU's alone: {"rnn": (N, 1, hidden)}, habitat-baselines' hidden state as it is.
Initialisation is habitat-baselines' too: the convs and the Linear Kaiming-normal (with its negative slope
argument sqrt(2), as it passes it), zero biases; GRU weights orthogonal; heads orthogonal (gain 0.01, 1).
"""

from __future__ import annotations

import math

import gymnasium
import torch
from torch import nn

from ddppo.config import PolicyConfig
from ddppo.errors import ConfigError
from ddppo.model.habitat_baselines import GOAL_KEY, HabitatBaselinesActorCritic
from ddppo.model.memory import Memory
from ddppo.model.recurrent import RecurrentCore

IMAGE_KEYS = ("rgb", "depth")  # the only images SimpleCNN reads, in its channel order
LAYERS = ((32, 8, 4), (64, 4, 2), (32, 3, 1))  # (channels, kernel, stride)


def _out(size: int, kernel: int, stride: int) -> int:
    return (size - kernel) // stride + 1


class SimpleCNN(nn.Module):
    """rgb (uint8, / 255) and/or depth (as is) (B, H, W, C) -> (B, hidden): habitat-baselines' `SimpleCNN`."""

    def __init__(self, obs_space: gymnasium.spaces.Dict, hidden: int):
        super().__init__()
        self.keys = [k for k in IMAGE_KEYS if k in obs_space.spaces]
        h, w = obs_space[self.keys[0]].shape[:2]
        layers: list[nn.Module] = []
        cin = sum(obs_space[k].shape[2] for k in self.keys)
        for i, (cout, kernel, stride) in enumerate(LAYERS):
            layers.append(nn.Conv2d(cin, cout, kernel, stride=stride))
            if i < len(LAYERS) - 1:
                layers.append(nn.ReLU(True))
            cin, h, w = cout, _out(h, kernel, stride), _out(w, kernel, stride)
        self.cnn = nn.Sequential(*layers, nn.Flatten(), nn.Linear(cin * h * w, hidden), nn.ReLU(True))
        for layer in self.cnn:
            if isinstance(layer, (nn.Conv2d, nn.Linear)):
                nn.init.kaiming_normal_(layer.weight, math.sqrt(2))
                nn.init.zeros_(layer.bias)

    def forward(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        parts = [obs[k].permute(0, 3, 1, 2).float() / (255.0 if k == "rgb" else 1.0) for k in self.keys]
        return self.cnn(torch.cat(parts, 1))


class SimpleNet(nn.Module):
    """habitat-baselines' `PointNavBaselineNet`: SimpleCNN features and the goal into one GRU layer."""

    def __init__(self, obs_space: gymnasium.spaces.Dict, hidden: int):
        super().__init__()
        self.visual_encoder = SimpleCNN(obs_space, hidden)
        self.state_encoder = RecurrentCore("gru", hidden, 1, input_size=hidden + obs_space[GOAL_KEY].shape[0])


def check_spaces(obs_space: gymnasium.spaces.Dict, action_space: gymnasium.spaces.Space, cfg: PolicyConfig) -> None:
    """ConfigError (exit 2 in the CLI) naming what this env or config lacks for PointNavBaselinePolicy."""
    problems = []
    if not isinstance(action_space, gymnasium.spaces.Discrete):
        problems.append(f"a Discrete action space (this env has {action_space})")
    if GOAL_KEY not in obs_space.spaces or len(obs_space[GOAL_KEY].shape) != 1:
        problems.append(f"a {GOAL_KEY!r} vector observation (this env has "
                        f"{ {k: tuple(v.shape) for k, v in obs_space.spaces.items()} })")
    images = [k for k in IMAGE_KEYS if k in obs_space.spaces]
    if not images or len({tuple(obs_space[k].shape[:2]) for k in images}) != 1:
        problems.append("an 'rgb' and/or 'depth' image observation (one size)")
    elif min(obs_space[images[0]].shape[:2]) < 36:
        problems.append(f"images of at least 36x36 (SimpleCNN's three convs; this env has "
                        f"{obs_space[images[0]].shape[:2]})")
    if cfg.rnn_type != "gru" or cfg.rnn_layers != 1:
        problems.append(f"policy.rnn_type=gru and policy.rnn_layers=1 (its one GRU layer; not {cfg.rnn_type!r} x "
                        f"{cfg.rnn_layers})")
    if problems:
        raise ConfigError("policy.architecture=habitat_baselines_simple needs " + "; ".join(problems))


class HabitatBaselinesSimplePolicy(HabitatBaselinesActorCritic):
    """habitat-baselines' PointNavBaselinePolicy behind ddppo's actor-critic interface (discrete actions)."""

    def __init__(self, obs_space: gymnasium.spaces.Dict, action_space: gymnasium.spaces.Space,
                 cfg: PolicyConfig, value_head: bool = True):
        check_spaces(obs_space, action_space, cfg)
        super().__init__(SimpleNet(obs_space, cfg.hidden_size), int(action_space.n), cfg, value_head)

    def features(self, obs: dict[str, torch.Tensor], memory: Memory, start: torch.Tensor,
                 actions: torch.Tensor | None = None) -> tuple[torch.Tensor, Memory]:
        T, N = start.shape
        flat = {k: obs[k].reshape(T * N, *obs[k].shape[2:]) for k in (*self.net.visual_encoder.keys, GOAL_KEY)}
        x = torch.cat([self.net.visual_encoder(flat), flat[GOAL_KEY].float()], 1).view(T, N, -1)
        return self.core(x, memory, start)
