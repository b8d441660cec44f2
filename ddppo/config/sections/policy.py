"""The config schema's policy sections. What acts: policy and its transformer core."""

from __future__ import annotations

from dataclasses import dataclass, field
from ddppo.field_metadata import doc
from ddppo.user_code import CORES, ENCODERS, POLICIES, VECTOR_ENCODERS


@dataclass(frozen=True)
class TransformerConfig:
    """The transformer core (policy.rnn_type=transformer): a causal decoder over the episode's steps whose memory
    is a per-env KV cache of the last context - 1 steps."""

    layers: int = field(default=2, metadata=doc("decoder layers (pre-norm: RMSNorm, attention, SwiGLU MLP)",
                                                shape=True, gt=0))
    heads: int = field(default=4, metadata=doc("attention heads; must divide policy.hidden_size into an even head "
                                               "width", shape=True, gt=0))
    context: int = field(default=64,
                         metadata=doc("steps a token attends to, itself included (older steps slide out of the "
                                      "cache); at most the env's max_episode_steps where it has one: the cache holds "
                                      "layers x 2 x (context - 1) x hidden_size values per env", shape=True, gt=0))
    positions: str = field(default="rotary",
                           metadata=doc("rotary (rotary embedding of the episode step in every layer's queries and "
                                        "keys) | learned (an embedding of the episode step added to the input; steps "
                                        "from 1023 on share the last)", shape=True, choices=("rotary", "learned")))
    dropout: float = field(default=0.0,
                           metadata=doc("dropout in attention and after each sublayer, in the learning pass only "
                                        "(acting stays deterministic, so PPO's ratio then compares a dropped-out "
                                        "network with the acting one)", ge=0, lt=1))


@dataclass(frozen=True)
class PolicyConfig:
    """Network architecture."""

    architecture: str = field(default="ddppo",
                              metadata=doc("ddppo (an encoder per observation key, fused) | habitat_baselines "
                                           "(habitat-baselines' DD-PPO PointNavResNetPolicy, parameter for parameter: "
                                           "image(s) + pointgoal_with_gps_compass, Discrete actions; its checkpoints "
                                           "load unchanged) | habitat_baselines_simple (its PointNavBaselinePolicy: "
                                           "SimpleCNN + one GRU layer, rgb and/or depth; rnn_type=gru, "
                                           "rnn_layers=1) | MODULE:NAME (your own, registered with "
                                           "ddppo.model.build.register_policy in MODULE, imported from the working "
                                           "directory first: docs/guides/custom-policy.md)", shape=True,
                                           choices=POLICIES))
    hidden_size: int = field(default=128,
                             metadata=doc("width of the encoders' output and of the recurrent core", shape=True, gt=0))
    mlp_layers: int = field(default=2,
                            metadata=doc("hidden layers of the vector-observation encoder (vector_encoder=mlp); a "
                                         "fusion layer of hidden_size follows the encoders, so mlp_layers=1 is two "
                                         "hidden layers (hidden_size=64: SB3's net_arch [64, 64])", shape=True, gt=0))
    activation: str = field(default="relu",
                            metadata=doc("relu | tanh: the nonlinearity of the vector-observation encoders and the "
                                         "fusion layer (tanh is CleanRL's and SB3's default for MLP policies); image "
                                         "encoders keep ReLU", shape=True, choices=("relu", "tanh")))
    rnn_type: str = field(default="gru",
                          metadata=doc("the memory core: gru | lstm | transformer (causal attention over the episode's "
                                       "last policy.transformer.context steps, a per-env KV cache) | none | "
                                       "MODULE:NAME (your own, a ddppo.model.core.Core registered with "
                                       "ddppo.model.build.register_core in MODULE, imported from the working "
                                       "directory first: docs/guides/custom-core.md)", shape=True, choices=CORES))
    rnn_layers: int = field(default=1, metadata=doc("stacked recurrent layers (gru, lstm)", shape=True, gt=0))
    transformer: TransformerConfig = field(default_factory=TransformerConfig,
                                           metadata=doc("the transformer core (rnn_type=transformer)"))
    image_encoder: str = field(default="cnn",
                               metadata=doc("cnn (small conv net) | nature (DQN's Nature CNN, SB3's and CleanRL's "
                                            "for Atari: images of 36x36 and more) | grid (rl-starter-files' "
                                            "MiniGrid CNN: 2x2 convolutions, for small symbolic grids of 7x7 and "
                                            "more) | resnet (GroupNorm ResNet) | torchvision:NAME | "
                                            "timm:NAME | open_clip:NAME (that library's model, built without "
                                            "weights, with a small trained head on its features; the `vision` "
                                            "extra: docs/guides/pretrained-encoders.md) | MODULE:NAME (your own, "
                                            "registered with ddppo.model.build.register_encoder) for image "
                                            "observations (3 dims); architecture=ddppo", shape=True,
                                            choices=ENCODERS))
    encoder_weights: str = field(default="",
                                 metadata=doc("a local weights file for a library image encoder (image_encoder="
                                              "LIBRARY:NAME): a state dict (.pt/.pth), a .safetensors file, or a "
                                              "checkpoint holding one under 'model' or 'state_dict' (key prefixes "
                                              "such as 'module.' or 'visual.' stripped; keys of parts the encoder "
                                              "lacks, a classifier or an MAE decoder, dropped). Read when a run "
                                              "starts; its sha256 is kept in the checkpoints, which hold the "
                                              "weights: resume and `ddppo eval` need no file, and refuse a changed "
                                              "one. Empty: the library's random initialisation"))
    freeze_encoder: bool = field(default=False,
                                 metadata=doc("keep the library image encoder's weights (encoder_weights) as loaded: "
                                              "no gradients, always in eval mode (BatchNorm statistics hold), left "
                                              "out of the optimizer; its head is trained", shape=True))
    vector_encoder: str = field(default="mlp",
                                metadata=doc("mlp (policy.mlp_layers x hidden_size) | MODULE:NAME (your own, "
                                             "registered with ddppo.model.build.register_encoder) for vector "
                                             "observations; architecture=ddppo", shape=True, choices=VECTOR_ENCODERS))
    resnet_base_width: int = field(default=32, metadata=doc("ResNet base channel width", shape=True))
    resnet_layers: list = field(default_factory=lambda: [2, 2, 2, 2],
                                metadata=doc("ResNet blocks per stage", shape=True))
    resnet_bottleneck: bool = field(default=False,
                                    metadata=doc("bottleneck blocks ([3, 4, 6, 3] + bottleneck = ResNet50, as in "
                                                 "DD-PPO)", shape=True))
    init_log_std: float = field(default=0.0, metadata=doc("initial log std of Gaussian heads (Box actions)"))
    init: str = field(default="orthogonal",
                      metadata=doc("orthogonal (CleanRL's and SB3's default: gain sqrt(2) for hidden layers, 0.01 "
                                   "for the actor head, 1 for the value head, zero biases) | torch (PyTorch's own "
                                   "initialisation of linear and conv layers, as SB3's ortho_init=False that RL "
                                   "Zoo's MuJoCo settings use); architecture=ddppo only",
                                   choices=("orthogonal", "torch")))
    critic: str = field(default="auto",
                        metadata=doc("shared (one trunk for actor and critic, habitat-baselines' design) | separate "
                                     "(the critic has encoders and fusion layer of its own, as SB3's and CleanRL's "
                                     "MLP policies; needs rnn_type=none and architecture=ddppo) | auto (separate for "
                                     "continuous control: a 1-D Box action space, only vector observations, "
                                     "rnn_type=none, architecture=ddppo; else shared)", shape=True,
                                     choices=("auto", "shared", "separate")))
