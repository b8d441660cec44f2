"""habitat-baselines' DD-PPO PointNav policy (`PointNavResNetPolicy`), rebuilt so its state_dict is the same.

Every module is named as in habitat-baselines, so parameter names and shapes match one for one and a
state_dict moves between the two unchanged (ddppo/interop/habitat_checkpoint.py only adds or strips prefixes):

  net.visual_encoder.backbone   GroupNorm ResNet (conv1, layer1-4 of blocks with `convs` and `downsample`),
                                base width `policy.resnet_base_width`, GroupNorm groups = base width // 2
  net.visual_encoder.compression  3x3 conv to round(2048 / (h * w)) channels (GroupNorm with 1 group), ReLU
  net.visual_fc                 flatten -> Linear(2048-ish, hidden) -> ReLU
  net.tgt_embeding (sic)        Linear(3, 32) of the point goal (r, cos(-theta), sin(-theta))
  net.prev_action_embedding     Embedding(actions + 1, 32); index 0 = episode start
  net.state_encoder.rnn         LSTM/GRU over [visual, goal, previous action]
  action_distribution.linear    categorical logits; critic.fc the value

The input is habitat-baselines' too: the image observations (channels concatenated in observation order)
are average-pooled by 2 before the ResNet; uint8 images are scaled by 1 / high, float images (depth) are
used as they are; the goal is `pointgoal_with_gps_compass` (r, theta).

ddppo's policy interface (ddppo/model/actor_critic.py) has no previous-action input, so the previous action travels
in the policy's memory (ddppo/model/memory.py) beside the RNN's state: {"rnn": (N, rows, H), "prev_action": (N,)};
at an episode start the start token replaces it, exactly where habitat-baselines feeds its start token (`remember`
sets it once the action is known). The RNN rows are
habitat-baselines' hidden state (N, rows, H) as it is: LSTM h rows first, then c.
"""

from __future__ import annotations

import math

import gymnasium
import torch
import torch.nn.functional as F
from torch import nn

from ddppo.config import PolicyConfig
from ddppo.errors import ConfigError
from ddppo.model.actions import ActionKind, CategoricalActions
from ddppo.model.actor_critic import ActorCritic
from ddppo.model.memory import Memory
from ddppo.model.recurrent import RecurrentCore

GOAL_KEY = "pointgoal_with_gps_compass"
EMBED = 32  # habitat-baselines' goal and previous-action embedding width
FLAT = 2048  # size the compression conv's output flattens to (about)
# habitat-baselines' backbone names as ddppo's (policy.resnet_layers, policy.resnet_bottleneck)
BACKBONES = {"resnet18": ((2, 2, 2, 2), False), "resnet50": ((3, 4, 6, 3), True)}


def backbone_name(policy: PolicyConfig) -> str | None:
    """habitat-baselines' backbone name for a PolicyConfig's resnet_layers/resnet_bottleneck, or None."""
    key = (tuple(policy.resnet_layers), bool(policy.resnet_bottleneck))
    return next((name for name, value in BACKBONES.items() if value == key), None)


def _conv(cin: int, cout: int, kernel: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(cin, cout, kernel, stride=stride, padding=kernel // 2, bias=False)


class Block(nn.Module):
    """Residual block: `convs` (basic: 3x3, 3x3; bottleneck: 1x1, 3x3 (strided), 1x1 x4) + `downsample`."""

    def __init__(self, cin: int, planes: int, groups: int, stride: int, bottleneck: bool):
        super().__init__()
        self.expansion = 4 if bottleneck else 1
        cout = planes * self.expansion
        if bottleneck:
            layers = [_conv(cin, planes, 1), nn.GroupNorm(groups, planes), nn.ReLU(True),
                      _conv(planes, planes, 3, stride), nn.GroupNorm(groups, planes), nn.ReLU(True),
                      _conv(planes, cout, 1), nn.GroupNorm(groups, cout)]
        else:
            layers = [_conv(cin, planes, 3, stride), nn.GroupNorm(groups, planes), nn.ReLU(True),
                      _conv(planes, planes, 3), nn.GroupNorm(groups, planes)]
        self.convs = nn.Sequential(*layers)
        self.downsample = (nn.Sequential(_conv(cin, cout, 1, stride), nn.GroupNorm(groups, cout))
                           if stride != 1 or cin != cout else None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skip = x if self.downsample is None else self.downsample(x)
        return F.relu(self.convs(x) + skip)


class Backbone(nn.Module):
    """conv1 (7x7/2, GroupNorm, ReLU), 3x3/2 max-pool, four stages; 32x smaller spatially."""

    def __init__(self, in_channels: int, base: int, groups: int, layers: tuple[int, ...], bottleneck: bool):
        super().__init__()
        self.conv1 = nn.Sequential(_conv(in_channels, base, 7, 2), nn.GroupNorm(groups, base), nn.ReLU(True))
        cin = base
        for i, n in enumerate(layers):
            planes = base * 2 ** i
            blocks = []
            for b in range(n):
                blocks.append(Block(cin, planes, groups, 2 if (i > 0 and b == 0) else 1, bottleneck))
                cin = planes * blocks[-1].expansion
            setattr(self, f"layer{i + 1}", nn.Sequential(*blocks))
        self.final_channels = cin

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(self.conv1(x), 3, 2, 1)
        return self.layer4(self.layer3(self.layer2(self.layer1(x))))


class VisualEncoder(nn.Module):
    """Image keys (B, H, W, C) -> habitat-baselines' compressed feature map (B, c, h, w)."""

    def __init__(self, obs_space: gymnasium.spaces.Dict, keys: list[str], cfg: PolicyConfig):
        super().__init__()
        self.keys = keys
        self.scales = {k: (1.0 / float(obs_space[k].high.max()) if obs_space[k].dtype == "uint8" else None)
                       for k in keys}
        first = obs_space[keys[0]].shape
        layers, bottleneck = BACKBONES[backbone_name(cfg)]
        base = cfg.resnet_base_width
        self.backbone = Backbone(sum(obs_space[k].shape[2] for k in keys), base, base // 2, layers, bottleneck)
        fh, fw = (int(math.ceil((first[0] // 2) / 32)), int(math.ceil((first[1] // 2) / 32)))
        channels = int(round(FLAT / (fh * fw)))
        self.compression = nn.Sequential(_conv(self.backbone.final_channels, channels, 3),
                                         nn.GroupNorm(1, channels), nn.ReLU(True))
        self.output_shape = (channels, fh, fw)

    def forward(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        parts = []
        for k in self.keys:
            x = obs[k].permute(0, 3, 1, 2)
            parts.append(x.float() * self.scales[k] if self.scales[k] is not None else x.float())
        return self.compression(self.backbone(F.avg_pool2d(torch.cat(parts, 1), 2)))


class PointNavNet(nn.Module):
    """Visual features, goal and previous-action embeddings -> recurrent core (habitat-baselines' `net`)."""

    def __init__(self, obs_space: gymnasium.spaces.Dict, num_actions: int, cfg: PolicyConfig):
        super().__init__()
        keys = [k for k in obs_space.spaces if len(obs_space[k].shape) == 3]
        self.prev_action_embedding = nn.Embedding(num_actions + 1, EMBED)  # (registration order as theirs)
        self.tgt_embeding = nn.Linear(obs_space[GOAL_KEY].shape[0] + 1, EMBED)
        self.visual_encoder = VisualEncoder(obs_space, keys, cfg)
        self.visual_fc = nn.Sequential(nn.Flatten(), nn.Linear(math.prod(self.visual_encoder.output_shape),
                                                               cfg.hidden_size), nn.ReLU(True))
        self.state_encoder = RecurrentCore(cfg.rnn_type, cfg.hidden_size, cfg.rnn_layers,
                                           input_size=cfg.hidden_size + 2 * EMBED)

    def inputs(self, obs: dict[str, torch.Tensor], prev_action: torch.Tensor, start: torch.Tensor) -> torch.Tensor:
        """Flat batch (B, ...) -> the recurrent core's input (B, hidden + 64)."""
        visual = self.visual_fc(self.visual_encoder(obs))
        goal = obs[GOAL_KEY].float()
        goal = torch.stack([goal[:, 0], torch.cos(-goal[:, 1]), torch.sin(-goal[:, 1])], -1)
        token = torch.where(start != 0, torch.zeros_like(prev_action), prev_action + 1)
        return torch.cat([visual, self.tgt_embeding(goal), self.prev_action_embedding(token)], 1)


class Head(nn.Module):
    """A Linear under habitat-baselines' attribute name (`action_distribution.linear`, `critic.fc`)."""

    def __init__(self, name: str, cin: int, cout: int, gain: float):
        super().__init__()
        self.name = name
        setattr(self, name, nn.Linear(cin, cout))
        nn.init.orthogonal_(getattr(self, name).weight, gain)
        nn.init.zeros_(getattr(self, name).bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return getattr(self, self.name)(x)


def check_spaces(obs_space: gymnasium.spaces.Dict, action_space: gymnasium.spaces.Space, cfg: PolicyConfig) -> None:
    """ConfigError (exit 2 in the CLI) naming what this env or config lacks for the habitat-baselines policy."""
    problems = []
    if not isinstance(action_space, gymnasium.spaces.Discrete):
        problems.append(f"a Discrete action space (this env has {action_space})")
    goal = obs_space.spaces.get(GOAL_KEY)
    if goal is None or tuple(goal.shape) != (2,):
        problems.append(f"a {GOAL_KEY!r} observation of shape (2,) (r, theta) (this env has "
                        f"{ {k: tuple(v.shape) for k, v in obs_space.spaces.items()} })")
    images = [k for k in obs_space.spaces if len(obs_space[k].shape) == 3]
    if not images or len({tuple(obs_space[k].shape[:2]) for k in images}) != 1:
        problems.append("one or more image observations of one size (e.g. depth)")
    if "rgb" in obs_space.spaces:  # habitat-baselines then adds a running mean/var input normaliser (not built here)
        problems.append("no 'rgb' observation (depth only; set env.habitat.rgb=false)")
    if cfg.rnn_type not in ("lstm", "gru"):
        problems.append(f"policy.rnn_type lstm or gru (not {cfg.rnn_type!r})")
    if backbone_name(cfg) is None:
        problems.append("policy.resnet_layers=[3,4,6,3] with resnet_bottleneck=true (resnet50) or [2,2,2,2] with "
                        "false (resnet18)")
    if cfg.resnet_base_width < 2 or cfg.resnet_base_width % 2:
        problems.append(f"an even policy.resnet_base_width (GroupNorm groups = half of it; not "
                        f"{cfg.resnet_base_width})")
    if problems:
        raise ConfigError("policy.architecture=habitat_baselines needs " + "; ".join(problems))


class TorchCategoricalActions(CategoricalActions):
    """Categorical actions whose learning pass takes its log-probs and entropy from torch's `Categorical`, as
    habitat-baselines' does (to the last bit); acting samples and reads the log-prob as ddppo's categorical does,
    as habitat-baselines' acting does."""

    log_prob = ActionKind.log_prob
    entropy = ActionKind.entropy


class HabitatBaselinesActorCritic(ActorCritic):
    """What both habitat-baselines policies are made of, under habitat-baselines' module names (so their
    checkpoints load as they are): `net` (whose `state_encoder` is the recurrent core), then the
    `action_distribution` and `critic` heads on its features. `ACTIONS`: the action kind, categorical."""

    ACTIONS: type[CategoricalActions] = CategoricalActions

    def __init__(self, net: nn.Module, num_actions: int, cfg: PolicyConfig, value_head: bool):
        super().__init__(self.ACTIONS(num_actions), cfg.hidden_size)
        self.net = net
        self.action_distribution = Head("linear", cfg.hidden_size, num_actions, 0.01)
        self.critic = Head("fc", cfg.hidden_size, 1, 1.0) if value_head else None

    @property
    def core(self) -> RecurrentCore:
        return self.net.state_encoder

    @property
    def actor(self) -> nn.Linear:
        """The logits layer, under the name the interface reads (a view; registered once, as theirs)."""
        return self.action_distribution.linear


class HabitatBaselinesPolicy(HabitatBaselinesActorCritic):
    """habitat-baselines' PointNavResNetPolicy behind ddppo's actor-critic interface (discrete actions)."""

    ACTIONS = TorchCategoricalActions

    def __init__(self, obs_space: gymnasium.spaces.Dict, action_space: gymnasium.spaces.Space,
                 cfg: PolicyConfig, value_head: bool = True):
        check_spaces(obs_space, action_space, cfg)
        super().__init__(PointNavNet(obs_space, int(action_space.n), cfg), int(action_space.n), cfg, value_head)

    def initial_memory(self, num_envs: int, device: torch.device | str = "cpu") -> Memory:
        """The RNN's state and the previous action (as a float: habitat-baselines keeps it beside the state)."""
        return {**self.core.initial_memory(num_envs, device), "prev_action": torch.zeros(num_envs, device=device)}

    def legacy_memory(self, hidden: torch.Tensor) -> Memory:
        """Before the memory protocol: the RNN rows, then a row whose first column held the previous action."""
        return {**self.core.legacy_memory(hidden[:-1]), "prev_action": hidden[-1, :, 0].clone()}

    def features(self, obs: dict[str, torch.Tensor], memory: Memory, start: torch.Tensor,
                 actions: torch.Tensor | None = None) -> tuple[torch.Tensor, Memory]:
        """obs (T, N, ...) -> features (T, N, H), the RNN's memory after (the previous action as it came: `remember`
        sets it). The previous action of step t is the memory's for t = 0 and actions[t - 1] after it (a sequence
        needs `actions`)."""
        T, N = start.shape
        prev = memory["prev_action"].round().to(torch.long).unsqueeze(0)
        if T > 1:
            if actions is None:
                raise ValueError("the habitat-baselines policy needs the actions taken to run a sequence")
            prev = torch.cat([prev, actions[:-1].to(torch.long).view(T - 1, N)])
        flat = {k: v.reshape(T * N, *v.shape[2:]) for k, v in obs.items()}
        x = self.net.inputs(flat, prev.reshape(-1), start.reshape(-1)).view(T, N, -1)
        out, rnn = self.core(x, {"rnn": memory["rnn"]}, start)
        return out, {**rnn, "prev_action": memory["prev_action"]}

    def remember(self, memory: Memory, actions: torch.Tensor) -> Memory:
        """The action taken becomes the next step's previous action."""
        return {**memory, "prev_action": actions.to(memory["rnn"].dtype)}
