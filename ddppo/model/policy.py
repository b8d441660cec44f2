"""Actor-critic policy: an encoder per observation key, an optional recurrent core, and heads.

Observation conventions: a key whose space has 3 dims is an image (H, W, C),
uint8 or float, kept in its dtype until the encoder, which maps the space's
finite bounds to [0, 1] (uint8 0-255: x / 255); a Discrete space is a category,
embedded, a MultiDiscrete one a category per dimension, embedded and summed; anything else is flattened into a
vector.
The policy's memory (ddppo/model/memory.py) is a dict of env-first tensors that only the policy reads: a GRU's
state {"rnn": (N, layers, H)}; for an LSTM, h and c stacked along the layers, (N, 2 * layers, H); the
transformer's KV cache (ddppo/model/transformer.py); {} without a core.
"""

from __future__ import annotations

import math

import gymnasium
import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from ddppo.config import PolicyConfig
from ddppo.errors import ConfigError
from ddppo.model.actions import GaussianActions, action_kind
from ddppo.model.kept import FEATURES, frozen_stage
from ddppo.model.memory import Memory
from ddppo.normalization import ObsNormalizer, continuous_control
from ddppo.model.pooling import AdaptiveAvgPool
from ddppo.model.transformer import TransformerCore
from ddppo.user_code import ENCODERS, VECTOR_ENCODERS


def _init(layer: nn.Module, gain: float = math.sqrt(2)) -> nn.Module:
    if isinstance(layer, (nn.Linear, nn.Conv2d)):
        nn.init.orthogonal_(layer.weight, gain)
        nn.init.zeros_(layer.bias)
    return layer


ACTIVATIONS = {"relu": nn.ReLU, "tanh": nn.Tanh}  # policy.activation
_FUNCTIONAL = {nn.ReLU: torch.relu, nn.Tanh: torch.tanh}


def run_layers(layers: nn.Sequential, x: torch.Tensor) -> torch.Tensor:
    """`layers(x)` for a stack of Linear and activation layers, each applied as its function: the same ops,
    without a Module call per layer (the MLPs of continuous control act once per env step, where those calls
    cost as much as the arithmetic)."""
    for m in layers:
        if type(m) is nn.Linear:
            x = F.linear(x, m.weight, m.bias)
        elif type(m) in _FUNCTIONAL:
            x = _FUNCTIONAL[type(m)](x)
        else:
            x = m(x)
    return x


class MLPEncoder(nn.Module):
    def __init__(self, in_dim: int, hidden: int, layers: int, activation: str = "relu"):
        super().__init__()
        mods: list[nn.Module] = []
        for i in range(layers):
            mods += [_init(nn.Linear(in_dim if i == 0 else hidden, hidden)), ACTIVATIONS[activation]()]
        self.net = nn.Sequential(*mods)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return run_layers(self.net, x.flatten(1).float())


class CNNEncoder(nn.Module):
    """Small conv net (Nature-DQN style, adapted to the input size)."""

    def __init__(self, shape: tuple[int, int, int], hidden: int):
        super().__init__()
        h, w, c = shape
        self.conv = nn.Sequential(
            _init(nn.Conv2d(c, 32, 5, stride=2, padding=2)), nn.ReLU(),
            _init(nn.Conv2d(32, 64, 3, stride=2, padding=1)), nn.ReLU(),
            _init(nn.Conv2d(64, 64, 3, stride=2, padding=1)), nn.ReLU(),
            AdaptiveAvgPool((min(4, h), min(4, w))), nn.Flatten(),
        )
        self.fc = nn.Sequential(_init(nn.Linear(64 * min(4, h) * min(4, w), hidden)), nn.ReLU())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.conv(x))


class NatureCNN(nn.Module):
    """The conv net of DQN's Nature paper (Mnih et al. 2015), as SB3's NatureCNN and CleanRL's ppo_atari: 32 8x8
    filters at stride 4, 64 4x4 at stride 2, 64 3x3 at stride 1, then a linear layer (512 in the paper:
    policy.hidden_size)."""

    def __init__(self, shape: tuple[int, int, int], hidden: int):
        super().__init__()
        h, w, c = shape
        if min(h, w) < 36:
            raise ConfigError(f"policy.image_encoder=nature needs images of at least 36x36 (its strides), not "
                             f"{h}x{w}: use policy.image_encoder=cnn")
        self.conv = nn.Sequential(
            _init(nn.Conv2d(c, 32, 8, stride=4)), nn.ReLU(),
            _init(nn.Conv2d(32, 64, 4, stride=2)), nn.ReLU(),
            _init(nn.Conv2d(64, 64, 3, stride=1)), nn.ReLU(), nn.Flatten(),
        )
        def out(n: int) -> int:  # a side after the three convolutions
            return ((n - 8) // 4 + 1 - 4) // 2 + 1 - 2

        size = 64 * out(h) * out(w)
        self.fc = nn.Sequential(_init(nn.Linear(size, hidden)), nn.ReLU())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.conv(x))


class GridCNN(nn.Module):
    """rl-starter-files' MiniGrid CNN, for small symbolic grids (MiniGrid's 7x7 view): 16, 32 and 64 2x2
    convolutions with a 2x2 max-pool after the first, then a linear layer to policy.hidden_size. On a 7x7 image
    it has a tenth of `CNNEncoder`'s multiply-adds (whose 4x4 pooling replicates the 1x1 map a 7x7 input leaves),
    and the same layers as the SB3 side of `ddppo bench minigrid`. It gets the image scaled to [0, 1] like every
    encoder here (rl-starter-files feeds the raw indices; in ddppo's trunk that did not learn DoorKey-5x5)."""

    def __init__(self, shape: tuple[int, int, int], hidden: int):
        super().__init__()
        h, w, c = shape
        if min(h, w) < 7:
            raise ConfigError(f"policy.image_encoder=grid needs images of at least 7x7 (three 2x2 convolutions "
                              f"and a 2x2 pooling), not {h}x{w}")
        self.conv = nn.Sequential(
            _init(nn.Conv2d(c, 16, 2)), nn.ReLU(), nn.MaxPool2d(2),
            _init(nn.Conv2d(16, 32, 2)), nn.ReLU(),
            _init(nn.Conv2d(32, 64, 2)), nn.ReLU(), nn.Flatten(),
        )

        def out(n: int) -> int:  # a side after the convolutions and the pooling
            return (n - 1) // 2 - 2

        self.fc = nn.Sequential(_init(nn.Linear(64 * out(h) * out(w), hidden)), nn.ReLU())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.conv(x))


def image_scaling(space: gymnasium.spaces.Box) -> tuple[float, float]:
    """(offset, scale) with (x - offset) * scale in [0, 1] over the space's bounds; (0, 1) if unbounded."""
    low, high = np.asarray(space.low, np.float64), np.asarray(space.high, np.float64)
    if not (np.isfinite(low).all() and np.isfinite(high).all()):
        return 0.0, 1.0
    lo, hi = float(low.min()), float(high.max())
    return (lo, 1.0 / (hi - lo)) if hi > lo else (0.0, 1.0)


class ImageInput(nn.Module):
    """(B, H, W, C) uint8/float -> (B, C, H, W) float in [0, 1] (from the space's bounds), then an encoder.

    Observations arrive in their own dtype (uint8 images as bytes: a quarter of the storage and transfer)
    and are converted and scaled here, once, on the device.
    """

    def __init__(self, space: gymnasium.spaces.Box, encoder: nn.Module):
        super().__init__()
        self.offset, self.scale = image_scaling(space)
        self.encoder = encoder

    def prepare(self, x: torch.Tensor) -> torch.Tensor:
        """(B, H, W, C) as observed -> (B, C, H, W) float in [0, 1], the encoder's input."""
        x = x.permute(0, 3, 1, 2).float()
        if self.offset:
            x = x - self.offset
        return x * self.scale if self.scale != 1.0 else x

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.encoder(self.prepare(x))

    def frozen_features(self, x: torch.Tensor) -> torch.Tensor:
        """(B, H, W, C) as observed -> the encoder's frozen stage's output (ddppo/model/kept.py)."""
        return frozen_stage(self.encoder)(self.prepare(x))

    def from_features(self, features: torch.Tensor) -> torch.Tensor:
        """Kept features -> (B, hidden): the encoder's trained stage."""
        return self.encoder.trained_stage(features)


class EmbeddingEncoder(nn.Module):
    """A categorical observation -> a learnt embedding: a Discrete space (e.g. habitat-lab's object goal category)
    one, a MultiDiscrete space (or a gymnasium Text key, envs/gym/env.py) the sum of one per dimension (each
    dimension's values have rows of their own). Values arrive as numbers (storage keeps them as float32, exact for
    any realistic n)."""

    def __init__(self, nvec: list[int], hidden: int):
        super().__init__()
        self.embed = nn.Embedding(sum(nvec), hidden)
        self.register_buffer("offset", torch.tensor([0, *np.cumsum(nvec)[:-1]], dtype=torch.long), persistent=False)
        self.register_buffer("top", torch.tensor(nvec, dtype=torch.long) - 1, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        index = torch.minimum(x.reshape(x.shape[0], -1).long().clamp(min=0), self.top) + self.offset
        return self.embed(index).sum(1)


@ENCODERS.register("cnn")
def cnn_encoder(space: gymnasium.spaces.Box, cfg: PolicyConfig) -> nn.Module:
    """policy.image_encoder=cnn: `CNNEncoder`."""
    return CNNEncoder(_image_shape(space, "cnn"), cfg.hidden_size)


@ENCODERS.register("nature")
def nature_encoder(space: gymnasium.spaces.Box, cfg: PolicyConfig) -> nn.Module:
    """policy.image_encoder=nature: `NatureCNN`."""
    return NatureCNN(_image_shape(space, "nature"), cfg.hidden_size)


@ENCODERS.register("grid")
def grid_encoder(space: gymnasium.spaces.Box, cfg: PolicyConfig) -> nn.Module:
    """policy.image_encoder=grid: `GridCNN`."""
    return GridCNN(_image_shape(space, "grid"), cfg.hidden_size)


@ENCODERS.register("resnet")
def resnet_encoder(space: gymnasium.spaces.Box, cfg: PolicyConfig) -> nn.Module:
    """policy.image_encoder=resnet: ddppo.model.resnet's GroupNorm ResNet."""
    from ddppo.model.resnet import ResNetEncoder

    h, w, c = _image_shape(space, "resnet")
    return ResNetEncoder(c, base_width=cfg.resnet_base_width, layers=tuple(cfg.resnet_layers),
                         out_dim=cfg.hidden_size, spatial_size=(h, w), bottleneck=cfg.resnet_bottleneck)


@VECTOR_ENCODERS.register("mlp")
def mlp_encoder(space: gymnasium.spaces.Box, cfg: PolicyConfig) -> nn.Module:
    """policy.vector_encoder=mlp: `MLPEncoder` over the flattened observation."""
    return MLPEncoder(int(math.prod(space.shape)) or 1, cfg.hidden_size, cfg.mlp_layers, cfg.activation)


def _image_shape(space: gymnasium.spaces.Box, name: str) -> tuple[int, int, int]:
    if len(space.shape) != 3:
        raise ValueError(f"encoder {name!r} is for images (H, W, C), not an observation of shape {space.shape}: "
                         f"set policy.vector_encoder to a vector encoder (mlp)")
    return space.shape


def make_encoder(space: gymnasium.spaces.Space, cfg: PolicyConfig) -> nn.Module:
    """One observation key's encoder, (B, ...) -> (B, hidden_size): a Discrete or MultiDiscrete space is embedded
    (`EmbeddingEncoder`); an image (3 dims) goes through `ImageInput` (to (B, C, H, W) in [0, 1]) into
    policy.image_encoder; anything else into policy.vector_encoder (registered names: ddppo.user_code.ENCODERS, VECTOR_ENCODERS)."""
    if isinstance(space, gymnasium.spaces.Discrete):
        return EmbeddingEncoder([int(space.n)], cfg.hidden_size)
    if isinstance(space, gymnasium.spaces.MultiDiscrete):
        return EmbeddingEncoder([int(n) for n in space.nvec.reshape(-1)], cfg.hidden_size)
    if len(space.shape) == 3:
        return ImageInput(space, ENCODERS.get(cfg.image_encoder)(space, cfg))
    return VECTOR_ENCODERS.get(cfg.vector_encoder)(space, cfg)


def _zero_where(h: torch.Tensor, start: torch.Tensor) -> torch.Tensor:
    """h (layers, N, H) with the envs where `start` (N,) is set truly zeroed: a masked fill, not
    `h * (1 - start)`, which keeps a NaN/inf state NaN (NaN * 0 = NaN) for ever."""
    return h.masked_fill((start != 0).view(1, -1, 1), 0.0)


class RecurrentCore(nn.Module):
    """GRU/LSTM over time with the state zeroed where an episode starts."""

    def __init__(self, kind: str, size: int, layers: int, input_size: int | None = None):
        super().__init__()
        self.kind, self.layers = kind, layers
        rnn = nn.GRU if kind == "gru" else nn.LSTM
        self.rnn = rnn(input_size or size, size, num_layers=layers)
        for name, p in self.rnn.named_parameters():
            if "weight" in name:
                nn.init.orthogonal_(p)
            else:
                nn.init.zeros_(p)

    @property
    def state_layers(self) -> int:
        return self.layers * (2 if self.kind == "lstm" else 1)

    def _run(self, x, h: torch.Tensor):
        """x: (T, N, H) tensor or a PackedSequence."""
        if self.kind == "lstm":
            out, (hh, cc) = self.rnn(x, (h[: self.layers].contiguous(), h[self.layers:].contiguous()))
            return out, torch.cat([hh, cc])
        return self.rnn(x, h.contiguous())

    def initial_memory(self, num_envs: int, device: torch.device | str = "cpu") -> Memory:
        return {"rnn": torch.zeros(num_envs, self.state_layers, self.rnn.hidden_size, device=device)}

    def legacy_memory(self, hidden: torch.Tensor) -> Memory:
        """A checkpoint's recurrent state from before the memory protocol, (state_layers, N, H)."""
        return {"rnn": hidden.transpose(0, 1).contiguous()}

    def forward(self, x: torch.Tensor, memory: Memory, start: torch.Tensor) -> tuple[torch.Tensor, Memory]:
        """x (T, N, H), memory {"rnn": (N, state_layers, H)}, start (T, N) -> out (T, N, H), the memory after."""
        out, h = self.run(x, memory["rnn"].transpose(0, 1), start)
        return out, {"rnn": h.transpose(0, 1)}

    def run(self, x: torch.Tensor, h: torch.Tensor, start: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """`forward` on the layer-first state h (state_layers, N, H), as torch's RNNs take it.

        One step (acting) runs directly. A sequence (learning) is cut into episode
        segments, which run as one packed sequence: a single ATen/cuDNN call instead
        of a Python loop over time. A segment starting at t=0 continues `h` (unless
        start[0] resets it); every other segment starts from zeros.
        """
        T, N = start.shape
        if T == 1:
            return self._run(x, _zero_where(h, start[0]))
        cut = start.t().reshape(-1).clone()  # env-major boundaries
        cut[::T] = 1.0
        # segment of each (env, t); an integer cumsum: a float one has no deterministic CUDA kernel and raises
        # under run.deterministic (torch.use_deterministic_algorithms)
        seg = (cut != 0).to(torch.int64).cumsum(0) - 1
        first = torch.nonzero(cut, as_tuple=False).squeeze(1)  # flat index where each segment starts
        num_segs = first.numel()
        lengths = torch.bincount(seg, minlength=num_segs)
        pos = torch.arange(N * T, device=x.device) - first[seg]
        padded = x.new_zeros(int(lengths.max()), num_segs, x.shape[-1])
        padded[pos, seg] = x.transpose(0, 1).reshape(N * T, -1)
        h0 = h.new_zeros(h.shape[0], num_segs, h.shape[-1])
        at_zero = first % T == 0
        envs = first[at_zero] // T
        h0[:, at_zero] = _zero_where(h[:, envs], start[0, envs])
        packed = nn.utils.rnn.pack_padded_sequence(padded, lengths.cpu(), enforce_sorted=False)
        out_packed, hn = self._run(packed, h0)
        out, _ = nn.utils.rnn.pad_packed_sequence(out_packed)
        out = out[pos, seg].view(N, T, -1).transpose(0, 1)
        last = seg.view(N, T)[:, -1]
        return out, hn[:, last]


def make_core(cfg: PolicyConfig, width: int) -> nn.Module | None:
    """policy.rnn_type's memory core over features of `width`: a GRU or LSTM, the transformer (policy.transformer),
    or None. Each defines its memory (`initial_memory`) and is called as `out, memory = core(x, memory, start)`."""
    if cfg.rnn_type == "none":
        return None
    if cfg.rnn_type == "transformer":
        t = cfg.transformer
        return TransformerCore(width, t.layers, t.heads, t.context, t.positions, t.dropout)
    return RecurrentCore(cfg.rnn_type, width, cfg.rnn_layers)


def _kept_shapes(obs_space: gymnasium.spaces.Dict, encoders: nn.ModuleDict) -> dict[str, tuple[int, ...]]:
    """Image key -> the shape of its encoder's frozen stage's output for one image, for every image encoder that
    has a frozen stage (ddppo/model/kept.py)."""
    shapes = {}
    for k, enc in encoders.items():
        if isinstance(enc, ImageInput) and frozen_stage(enc.encoder) is not None:
            probe = torch.zeros((1, *obs_space[k].shape), dtype=torch.float32)
            with torch.no_grad():
                shapes[k] = tuple(enc.frozen_features(probe).shape[1:])
    return shapes


def separate_critic(obs_space: gymnasium.spaces.Dict, action_space: gymnasium.spaces.Space,
                    cfg: PolicyConfig) -> bool:
    """policy.critic resolved: separate, or auto on continuous control with an MLP policy (no recurrence)."""
    if cfg.critic == "auto":
        return (cfg.architecture == "ddppo" and cfg.rnn_type == "none"
                and continuous_control(obs_space, action_space))
    return cfg.critic == "separate"


class Trunk(nn.Module):
    """An encoder per observation key, fused into one feature vector: (B, ...) per key -> (B, H)."""

    def __init__(self, obs_space: gymnasium.spaces.Dict, cfg: PolicyConfig):
        super().__init__()
        self.keys = sorted(obs_space.spaces)
        self.encoders = nn.ModuleDict({k: make_encoder(obs_space[k], cfg) for k in self.keys})
        self.fuse = nn.Sequential(_init(nn.Linear(cfg.hidden_size * len(self.keys), cfg.hidden_size)),
                                  ACTIVATIONS[cfg.activation]())

    def forward(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        return run_layers(self.fuse, torch.cat([self.encoders[k](obs[k]) for k in self.keys], dim=-1))


class Policy(nn.Module):
    """(Observation normalisation) -> encoders -> (recurrent core) -> an actor for the action space's kind of
    distribution (ddppo.model.actions: categorical, one per dim, Bernoulli per dim, diagonal Gaussian), and a
    critic: on the same features (shared trunk) or on a trunk of its own (`critic_trunk`, policy.critic).

    With a critic of its own, the features handed between the methods below are the actor's and the critic's
    side by side (..., 2H); the actor reads the first half, the value head the second, so no gradient of the
    value loss reaches the actor's parameters."""

    def __init__(self, obs_space: gymnasium.spaces.Dict, action_space: gymnasium.spaces.Space,
                 cfg: PolicyConfig, value_head: bool = True, obs_norm: ObsNormalizer | None = None,
                 normalize_inputs: bool = True):
        super().__init__()
        self.keys = sorted(obs_space.spaces)
        self.encoders = nn.ModuleDict({k: make_encoder(obs_space[k], cfg) for k in self.keys})
        width = cfg.hidden_size
        self.fuse = nn.Sequential(_init(nn.Linear(width * len(self.keys), width)), ACTIVATIONS[cfg.activation]())
        if obs_norm is not None:  # ddppo.normalization built it (its statistics are saved with the weights)
            self.obs_norm = obs_norm
        # False when training with normalize.update=step: the observations come normalised from the acting path
        # (normalization/live.py); `ddppo eval` and exports keep True and apply the saved statistics
        self.normalize_inputs = normalize_inputs
        separate = value_head and separate_critic(obs_space, action_space, cfg)
        if separate and cfg.rnn_type != "none":
            raise ValueError("policy.critic=separate needs policy.rnn_type=none (a recurrent critic of its own "
                             "is not implemented): set policy.rnn_type=none or policy.critic=shared")
        self.critic_trunk = Trunk(obs_space, cfg) if separate else None
        # image key -> the feature shape its encoder's frozen stage puts out: what a rollout keeps in place of the
        # images (ddppo/model/kept.py); none with a critic trunk of its own, whose encoders see the images
        self.kept = {} if separate else _kept_shapes(obs_space, self.encoders)
        self.core = make_core(cfg, width)
        self.hidden_size = width
        self.action_kind = action_kind(action_space)
        self.actor = _init(nn.Linear(width, self.action_kind.width), 0.01)
        if isinstance(self.action_kind, GaussianActions):
            self.log_std = nn.Parameter(torch.full((action_space.shape[0],), float(cfg.init_log_std)))
        self.critic = _init(nn.Linear(width, 1), 1.0) if value_head else None
        # policy.init=torch: the linear and conv layers built orthogonal above get PyTorch's own initialisation
        # back (recurrent cores keep their orthogonal weights)
        if cfg.init == "torch":
            for m in self.modules():
                if isinstance(m, (nn.Linear, nn.Conv2d)):
                    m.reset_parameters()

    # ------------------------------------------------------------------ state
    def initial_memory(self, num_envs: int, device: torch.device | str = "cpu") -> Memory:
        """The memory of `num_envs` envs at an episode's start (ddppo/model/memory.py): the core's, {} without one."""
        return self.core.initial_memory(num_envs, device) if self.core is not None else {}

    def legacy_memory(self, hidden: torch.Tensor) -> Memory:
        """The memory a checkpoint from before the memory protocol saved as one tensor (layers, N, H)."""
        return self.core.legacy_memory(hidden) if self.core is not None else {}

    @torch.no_grad()
    def keep(self, obs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """An observation (N, ...) as a rollout keeps it: each image of `kept` replaced by its frozen stage's
        features under the key KEY + FEATURES (ddppo/model/kept.py); as it is when nothing is kept."""
        if not self.kept:
            return obs
        out = {k: v for k, v in obs.items() if k not in self.kept}
        out.update({k + FEATURES: self.encoders[k].frozen_features(obs[k]) for k in self.kept if k in obs})
        return out

    # --------------------------------------------------------------- internals
    def _encode(self, key: str, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        """One key's encoding (B, H): from its kept features where the observation holds them, else from itself."""
        if key in obs:
            return self.encoders[key](obs[key])
        if key not in self.kept:
            raise ValueError(f"observation {key!r} came as frozen-encoder features ({key + FEATURES!r}), but this "
                             f"policy's encoder for it has no frozen stage to have made them (ddppo/model/kept.py)")
        return self.encoders[key].from_features(obs[key + FEATURES])

    def _features(self, obs: dict[str, torch.Tensor], memory: Memory,
                  start: torch.Tensor) -> tuple[torch.Tensor, Memory]:
        """obs (T, N, ...) -> features (T, N, H) (with a critic of its own: (T, N, 2H)), the memory after. An
        image key may come as its kept features instead (`keep`)."""
        T, N = start.shape
        flat_obs = {k: v.reshape(T * N, *v.shape[2:]) for k, v in obs.items()}
        norm = getattr(self, "obs_norm", None)
        if norm is not None and self.normalize_inputs:
            flat_obs = norm(flat_obs)
        flat = [self._encode(k, flat_obs) for k in self.keys]
        x = run_layers(self.fuse, torch.cat(flat, dim=-1)).view(T, N, -1)
        if self.critic_trunk is not None:  # rnn_type=none: no recurrent core
            return torch.cat([x, self.critic_trunk(flat_obs).view(T, N, -1)], -1), memory
        if self.core is None:
            return x, memory
        return self.core(x, memory, start)

    def _actor_features(self, features: torch.Tensor) -> torch.Tensor:
        return features[..., : self.hidden_size] if getattr(self, "critic_trunk", None) is not None else features

    def dist_params(self, features: torch.Tensor) -> torch.Tensor:
        """Action distribution parameters (..., P) (ddppo.model.actions: log-probs, logits or mean and log std)."""
        return self.action_kind.params(self.actor(self._actor_features(features)), getattr(self, "log_std", None))

    def params_to_distribution(self, params: torch.Tensor) -> torch.distributions.Distribution:
        """The torch distribution of the parameters (one sample per env: Independent over the action dims)."""
        return self.action_kind.distribution(params)

    def kl(self, params: torch.Tensor, ref_params: torch.Tensor) -> torch.Tensor:
        """Exact KL(this || reference) per sample, from distribution parameters."""
        return self.action_kind.kl(params, ref_params)

    @torch.no_grad()
    def sequence_params(self, obs: dict[str, torch.Tensor], memory: Memory,
                        start: torch.Tensor, actions: torch.Tensor | None = None) -> tuple[torch.Tensor, Memory]:
        """Distribution parameters over whole sequences (T, N, P), and the memory after them (`actions`, the
        actions taken, only for policies that feed back the previous action)."""
        feats, memory = self._features(obs, memory, start)
        return self.dist_params(feats), memory

    def _value(self, features: torch.Tensor) -> torch.Tensor:
        if self.critic is None:
            return torch.zeros(features.shape[:-1], device=features.device)
        if getattr(self, "critic_trunk", None) is not None:
            features = features[..., self.hidden_size:]
        return self.critic(features).squeeze(-1)

    # ---------------------------------------------------------------- public
    @torch.no_grad()
    def act(self, obs: dict[str, torch.Tensor], memory: Memory, start: torch.Tensor,
            deterministic: bool = False) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, Memory]:
        """One step for N envs: obs (N, ...), start (N,) -> action, logp, value, the memory after."""
        feats, memory = self._features({k: v.unsqueeze(0) for k, v in obs.items()}, memory, start.unsqueeze(0))
        feats = feats[0]
        action, logp = self.action_kind.sample(self.dist_params(feats), deterministic)
        return action, logp, self._value(feats), memory

    @torch.no_grad()
    def value(self, obs: dict[str, torch.Tensor], memory: Memory, start: torch.Tensor) -> torch.Tensor:
        feats, _ = self._features({k: v.unsqueeze(0) for k, v in obs.items()}, memory, start.unsqueeze(0))
        return self._value(feats[0])

    def evaluate(self, obs: dict[str, torch.Tensor], memory: Memory, start: torch.Tensor,
                 actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Whole sequences: obs (T, N, ...) -> logp, entropy, value, each (T, N)."""
        return self.evaluate_with_params(obs, memory, start, actions)[:3]

    def evaluate_with_params(self, obs: dict[str, torch.Tensor], memory: Memory, start: torch.Tensor,
                             actions: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """`evaluate` plus the distribution parameters (T, N, P), for a KL term."""
        feats, _ = self._features(obs, memory, start)
        params = self.dist_params(feats)
        kind = self.action_kind
        return kind.log_prob(params, actions), kind.entropy(params), self._value(feats), params
