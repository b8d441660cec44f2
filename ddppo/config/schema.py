"""The config schema: one frozen dataclass per section; each field's help, shape flag, allowed values and range
live in its metadata (envs/field_metadata.py `doc`), the one source for validation and `--explain`."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Iterator

from ddppo.envs.field_metadata import SHAPE, doc
from ddppo.envs.options import GridNavOptions, GymOptions, HabitatLabOptions, HabitatOptions, SyntheticOptions
from ddppo.envs.registry import section_for
from ddppo.user_code import ADVANTAGES, ENCODERS, POLICIES, VECTOR_ENCODERS


@dataclass(frozen=True)
class RunConfig:
    """Where the run lives and how long it lasts."""

    dir: str = field(default="runs/gridnav",
                     metadata=doc("run directory: config.yaml, metrics.jsonl, tb/, checkpoints/ (the unit of resume)"))
    seed: int = field(default=0, metadata=doc("base seed; rank r uses a seed derived from (seed, r)"))
    total_env_steps: int = field(default=2_000_000,
                                 metadata=doc("env steps summed over all ranks; training stops after reaching it",
                                              gt=0))
    time_budget_s: float = field(default=0.0,
                                 metadata=doc("wall-clock budget of this process in seconds (0 = none); stops with a "
                                              "checkpoint", ge=0))
    torch_threads: int = field(default=1,
                               metadata=doc("intra-op threads per rank; 0 = the cores the rank owns: the CPUs "
                                            "its affinity mask allows / ranks on this node, or SLURM_CPUS_PER_TASK "
                                            "under srun; small RL nets (MLP, gridnav) are fastest with 1", ge=0))
    deterministic: bool = field(default=False,
                                metadata=doc("torch.use_deterministic_algorithms (bit-exact resume on CPU in "
                                             "rollout.mode=fixed; variable mode's batches depend on timing)"))
    precision: str = field(default="fp32",
                           metadata=doc("the policy's forward passes, acting and learning: fp32 | bf16 (bfloat16 "
                                        "autocast on CPU and CUDA; weights, optimizer state, losses, advantages, "
                                        "returns and normalisation statistics stay fp32; needs bf16 hardware: "
                                        "CUDA with bf16, a CPU with avx512_bf16 or AMX) | auto (bf16 where the "
                                        "device computes it natively, else fp32; decided when the run starts, "
                                        "logged, and config.yaml records the value it picked)",
                                        choices=("fp32", "bf16", "auto")))
    compile: bool = field(default=False,
                          metadata=doc("torch.compile the policy's forward (acting and learning), dynamic shapes so "
                                       "variable and preempted rollouts do not recompile; the compile time is "
                                       "logged once"))


@dataclass(frozen=True)
class DistConfig:
    """Process group settings."""

    backend: str = field(default="auto", metadata=doc("auto (nccl where CUDA is available, else gloo) | gloo | nccl",
                                                    choices=("auto", "gloo", "nccl")))
    timeout_s: float = field(default=300.0,
                             metadata=doc("collective timeout once training runs; a lost rank is reported after this",
                                          gt=0))
    startup_timeout_s: float = field(default=1800.0,
                                     metadata=doc("timeout for rendezvous and the first update (env start-up can be "
                                                  "slow)", gt=0))
    device: str = field(default="auto", metadata=doc("auto (cuda:LOCAL_RANK if available, else cpu) | cpu | cuda",
                                                     choices=('auto', 'cpu', 'cuda')))
    update_timeout_s: float = field(default=1800.0,
                                    metadata=doc("per-update watchdog: an update running longer (the first one: "
                                                 "dist.startup_timeout_s if longer) dumps every thread's stack to "
                                                 "stderr and exits 1, even when stuck in native code; 0 = off",
                                                 ge=0))
    bucket_mb: float = field(default=25.0,
                             metadata=doc("gradient all-reduce bucket size in MiB: each bucket is sent as soon as "
                                          "backward has filled it, overlapping communication with the rest of "
                                          "backward (smaller: earlier overlap, more collectives)", gt=0))


@dataclass(frozen=True)
class EnvConfig:
    """Which environment, how many copies per rank, and its own options."""

    name: str = field(default="gridnav",
                      metadata=doc("gridnav | gym:<gymnasium id> | habitat_lab | habitat_pointnav | synthetic", shape=True))
    num_envs: int = field(default=16, metadata=doc("environments per rank", gt=0))
    num_workers: int = field(default=0,
                             metadata=doc("0 = step all envs in the trainer process; N = N subprocess workers (shared "
                                          "memory)", ge=0))
    placement_interval_updates: int = field(
        default=4, metadata=doc("envs that place scenes by measured cost (habitat and habitat_lab with "
                                "episode_split=cost, synthetic with scene_placement=measured) are offered the step "
                                "times measured so far once every scene has been timed, then every this many "
                                "updates, and move their scenes where that makes the slowest group over 5% faster; "
                                "a move starts fresh episodes where it changes scenes. 0 = place only at start-up",
                                ge=0))
    gridnav: GridNavOptions = field(default_factory=GridNavOptions, metadata=doc("options of env.name=gridnav"))
    gym: GymOptions = field(default_factory=GymOptions, metadata=doc("options of env.name=gym:<id>"))
    habitat: HabitatOptions = field(default_factory=HabitatOptions,
                                    metadata=doc("options of env.name=habitat_pointnav"))
    synthetic: SyntheticOptions = field(default_factory=SyntheticOptions, metadata=doc("options of env.name=synthetic"))
    habitat_lab: HabitatLabOptions = field(default_factory=HabitatLabOptions,
                                           metadata=doc("options of env.name=habitat_lab"))


@dataclass(frozen=True)
class RolloutConfig:
    """Rollout collection."""

    num_steps: int = field(default=128, metadata=doc("steps per env per rollout (the most a rank collects per update)",
                                                     gt=0))
    mode: str = field(default="fixed",
                      metadata=doc("fixed (every env takes num_steps steps in lockstep) | variable (envs step "
                                   "asynchronously in env.num_workers workers, the policy acts on whichever are "
                                   "ready, each env contributes a variable number of steps until the rank has "
                                   "num_envs x num_steps)", choices=('fixed', 'variable')))
    overlap: bool = field(default=False,
                          metadata=doc("fixed, needs env.num_workers >= 2: double-buffered halves of the workers step "
                                       "while the policy acts on the other half (overlaps env stepping and "
                                       "inference); every env still takes num_steps steps"))
    overlap_learning: bool = field(default=False,
                                   metadata=doc("collect the next rollout while the learner runs the PPO update on "
                                                "this one (one update of policy lag; helps learner-bound runs with "
                                                "envs in workers; resume starts fresh episodes)"))
    max_env_steps_factor: float = field(default=2.0,
                                        metadata=doc("variable: an env collects at most this x num_steps steps per "
                                                     "rollout (the storage holds that many per env)", ge=1))
    batch_wait_s: float = field(default=0.002,
                                metadata=doc("variable: once one env is ready, wait at most this long for the other "
                                             "stepping envs before acting on those ready (the batch-fill bound)", ge=0))
    idle_envs: str = field(default="step",
                           metadata=doc("variable: the envs idle when a rollout ends: step (each is sent a step acted "
                                        "on by the ending rollout's policy, so envs step while the learner runs) | "
                                        "wait (habitat-baselines VER: only actions in flight continue, the idle envs "
                                        "are acted on by the new policy)", choices=("step", "wait")))
    importance_weights: bool = field(default=True,
                                     metadata=doc("variable: weight env n's samples by min(1, (num_steps + 1) / "
                                                  "(its steps + 1)) in the loss (habitat-baselines VER), so fast envs "
                                                  "do not dominate it"))
    importance_weights_form: str = field(default="two_sided",
                                         metadata=doc("variable, with importance_weights: one_sided (habitat-baselines "
                                                      "VER: min(1, (num_steps + 1) / (steps + 1)), only fast envs are "
                                                      "pulled down, slow envs stay under-weighted) | two_sided "
                                                      "(num_steps / steps clamped to [f, 1 / f], f = preemption."
                                                      "min_rollout_fraction, then scaled to mean 1 over the rank's "
                                                      "samples: slow envs are raised as well, every env's share of "
                                                      "the rank's gradient is near equal; the default, measured: "
                                                      "docs/results/preemption-bias.md)",
                                                      choices=("one_sided", "two_sided")))
    variable_weighting: str = field(default="per_sample",
                                    metadata=doc("variable: how a sample's loss is normalised. per_sample "
                                                 "(habitat-baselines VER: over an epoch every valid sample of every "
                                                 "rank counts alike, times its importance weight; each minibatch's "
                                                 "gradient is scaled by its sample count / (epoch samples / "
                                                 "ppo.num_mini_batch)) | per_minibatch (each env-split minibatch is "
                                                 "the mean over its own valid samples, so an env's weight depends on "
                                                 "the envs that share its minibatch; the weighting before 2026-12-01)",
                                                 choices=("per_sample", "per_minibatch")))

    @property
    def sample_weighting(self) -> str:
        """How the PPO update normalises a sample's loss: rollout.variable_weighting in variable mode; fixed mode's
        minibatches are all the same size, where both are the same, and keep per_minibatch."""
        return self.variable_weighting if self.mode == "variable" else "per_minibatch"


@dataclass(frozen=True)
class PreemptionConfig:
    """Straggler preemption (DD-PPO)."""

    enabled: bool = field(default=True, metadata=doc("let ranks stop collecting early once enough ranks finished"))
    sync_frac: float = field(default=0.6, metadata=doc("stop once this fraction of ranks has finished its rollout",
                                                       gt=0, le=1, hint="1 disables preemption"))
    min_rollout_fraction: float = field(default=0.25,
                                        metadata=doc("...but never before collecting this fraction of "
                                                     "rollout.num_steps", gt=0, le=1))
    rank_weighting: bool = field(default=True,
                                 metadata=doc("weight each rank's samples by num_steps / its steps per env (at most "
                                              "1 / min_rollout_fraction) in the gradient, so a preempted rank's "
                                              "scenes keep the share of the gradient they would have without "
                                              "preemption (the exact form of what DDP's equal averaging of ranks "
                                              "does; measured: docs/results/preemption-bias.md); false = every "
                                              "sample of every rank counts alike, and a preempted rank's scenes "
                                              "count less"))
    poll_interval_s: float = field(default=0.01,
                                   metadata=doc("start a read of the finished-ranks counter at most this often (reads "
                                                "never block a step; 0 = a new one as soon as the last answered): "
                                                "fewer store round trips, at most this much later a stop", ge=0))


@dataclass(frozen=True)
class KLRefConfig:
    """A KL(pi || pi_ref) penalty towards a frozen reference policy (fine-tuning)."""

    checkpoint: str = field(default="", metadata=doc("checkpoint of the reference policy (\"\" = no KL term)"))
    beta: float = field(default=0.1, metadata=doc("initial KL coefficient", ge=0))
    adaptive: bool = field(default=True, metadata=doc("adapt beta once per update towards target_kl"))
    target_kl: float = field(default=0.01, metadata=doc("adaptive: the KL per update that beta aims for", gt=0))
    tolerance: float = field(default=1.5,
                             metadata=doc("adaptive: raise beta when KL > target*tolerance, lower it when KL < "
                                          "target/tolerance", gt=1))
    rate: float = field(default=2.0, metadata=doc("adaptive: factor beta is multiplied or divided by", gt=1))


@dataclass(frozen=True)
class PPOConfig:
    """The PPO objective and optimiser."""

    lr: float = field(default=2.5e-4, metadata=doc("Adam learning rate", gt=0))
    lr_schedule: str = field(default="constant", metadata=doc("constant | linear (decays to 0 at run.total_env_steps)",
                                                              choices=('constant', 'linear')))
    adam_eps: float = field(default=1e-5, metadata=doc("Adam epsilon", gt=0))
    clip: float = field(default=0.2, metadata=doc("PPO ratio clip", gt=0))
    clip_schedule: str = field(default="constant",
                               metadata=doc("constant | linear (the clip decays to 0 at run.total_env_steps, as RL "
                                            "Zoo's Atari settings; the value clip with it)",
                                            choices=("constant", "linear")))
    clip_value_loss: bool = field(default=True,
                                  metadata=doc("clip the value update to +/- clip around the rollout values"))
    epochs: int = field(default=4, metadata=doc("passes over each rollout", gt=0))
    num_mini_batch: int = field(default=2,
                                metadata=doc("minibatches per epoch, split by environment (must divide env.num_envs)",
                                             gt=0))
    minibatch_split: str = field(default="env",
                                 metadata=doc("env (each minibatch is whole env columns: recurrent policies, "
                                              "num_mini_batch must divide env.num_envs) | sample (samples drawn at "
                                              "random from every step and env, as SB3 and CleanRL; needs "
                                              "policy.rnn_type=none)", choices=("env", "sample")))
    value_coef: float = field(default=0.5, metadata=doc("value loss weight", ge=0))
    entropy_coef: float = field(default=0.01, metadata=doc("entropy bonus weight", ge=0))
    max_grad_norm: float = field(default=0.5, metadata=doc("global grad-norm clip after the all-reduce (0 = off)",
                                                           ge=0))
    gamma: float = field(default=0.99, metadata=doc("discount", ge=0, le=1))
    gae_lambda: float = field(default=0.95, metadata=doc("GAE lambda", ge=0, le=1))
    normalize_advantage: bool = field(default=True,
                                      metadata=doc("standardise advantages over every rank's valid steps (GAE)"))
    normalize_advantage_per: str = field(default="update",
                                         metadata=doc("update (over every rank's valid steps once per update) | "
                                                      "minibatch (over each minibatch's valid steps on this rank, "
                                                      "as SB3 and CleanRL do)", choices=("update", "minibatch")))
    max_skipped_updates: int = field(default=5,
                                     metadata=doc("stop the run after this many consecutive non-finite updates", gt=0))
    kl_ref: KLRefConfig = field(default_factory=KLRefConfig, metadata=doc("KL penalty towards a reference policy"))
    advantage: str = field(default="gae",
                           metadata=doc("gae (critic + GAE) | grpo (critic-free: episode returns normalised within "
                                        "groups) | MODULE:NAME (your own estimator, registered with "
                                        "ddppo.advantage.register_estimator in MODULE, imported from the working "
                                        "directory first: docs/guides/objectives.md)", shape=True,
                                        choices=ADVANTAGES))
    group_size: int = field(default=8,
                            metadata=doc("grpo: envs per group sharing each episode (>= 4; must divide env.num_envs)"))
    critic_warmup_updates: int = field(default=0,
                                       metadata=doc("fine-tuning: the first N updates train the critic alone (the "
                                                    "actor's learning rate 0, its observation normalisation "
                                                    "statistics held: its greedy actions do not change)", ge=0))
    actor_warmup_updates: int = field(default=0,
                                      metadata=doc("fine-tuning: after the critic warm-up the actor's learning rate "
                                                   "ramps linearly from 0 to ppo.lr over this many updates", ge=0))
    reset_critic: bool = field(default=False,
                               metadata=doc("re-initialise the value head when starting from checkpoint.path (a "
                                            "behaviour-cloned policy's untrained critic); not on resume"))


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
                          metadata=doc("gru | lstm | transformer (causal attention over the episode's last "
                                       "policy.transformer.context steps, a per-env KV cache) | none", shape=True,
                                       choices=("gru", "lstm", "transformer", "none")))
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


@dataclass(frozen=True)
class NormalizeConfig:
    """Running observation normalisation and reward scaling (SB3's VecNormalize, CleanRL's wrappers), with
    statistics merged over all ranks once per update, saved in checkpoints and frozen in `ddppo eval`."""

    obs: str = field(default="auto",
                     metadata=doc("on | off | auto (on for continuous control: a 1-D Box action space and only "
                                  "vector observations): (x - mean) / sqrt(var + epsilon) per vector observation key, "
                                  "inside the policy; images keep their own [0, 1] scaling", shape=True,
                                  choices=("auto", "on", "off")))
    reward: str = field(default="auto",
                        metadata=doc("on | off | auto (as obs): rewards divided by the running std of the "
                                     "discounted return (ppo.gamma), for training only; episode returns are "
                                     "reported unscaled", choices=("auto", "on", "off")))
    clip_obs: float = field(default=10.0, metadata=doc("normalised observations are clipped to +/- this", gt=0))
    clip_reward: float = field(default=10.0, metadata=doc("scaled rewards are clipped to +/- this", gt=0))
    epsilon: float = field(default=1e-8, metadata=doc("added to the variances before the square root", gt=0))
    update: str = field(default="rollout",
                        metadata=doc("rollout | step: when the statistics the acting path uses change. rollout: "
                                     "once per update, merged over all ranks (observations stay raw in storage and "
                                     "are normalised inside the policy); step: after every env step, as SB3's "
                                     "VecNormalize and CleanRL's wrappers, each rank counting its own steps into the "
                                     "statistics merged at the last update (observations are normalised on the "
                                     "host and stored normalised; needs rollout.mode=fixed)",
                                     choices=("rollout", "step")))


@dataclass(frozen=True)
class RewardConfig:
    """A learned reward model between the envs and the learners (ddppo/rollout/reward_model.py): scored under
    no_grad on the rank's device, one batched call per step, combined with the env's own reward."""

    model: str = field(default="",
                       metadata=doc("MODULE:NAME of a torch module class or factory in your working directory, "
                                    "called as model(obs, actions=, episode_step=, done=) on the rank's envs and "
                                    "returning one reward per env (\"\" = none); a resume with another is refused",
                                    shape=True))
    weights: str = field(default="", metadata=doc("a state dict (.pt) the model loads before the run (\"\" = as "
                                                 "built); a resume with another file or changed contents is "
                                                 "refused", shape=True))
    kwargs: dict = field(default_factory=dict, metadata=doc("keyword arguments the model is built with",
                                                             shape=True))
    mode: str = field(default="step",
                      metadata=doc("step: every step's resulting observation is scored; terminal: only an episode's "
                                   "final observation, once (no per-step reward to hack)",
                                   choices=("step", "terminal"), shape=True))
    env_weight: float = field(default=1.0, metadata=doc("the reward is env_weight x the env's reward + "
                                                       "model_weight x the model's"))
    model_weight: float = field(default=1.0, metadata=doc("see reward.env_weight"))


@dataclass(frozen=True)
class WandbConfig:
    """Weights & Biases logging (rank 0; extra `wandb`): the same tags and env-step as TensorBoard."""

    enabled: bool = field(default=False, metadata=doc("log to Weights & Biases too (needs `pip install wandb`)"))
    project: str = field(default="ddppo", metadata=doc("W&B project"))
    entity: str = field(default="", metadata=doc("W&B entity (user or team; \"\" = your default)"))
    group: str = field(default="", metadata=doc("W&B run group (e.g. a sweep's name; \"\" = none)"))
    tags: list = field(default_factory=list, metadata=doc("W&B run tags"))
    mode: str = field(default="online",
                      metadata=doc("online | offline (files under run.dir/wandb, `wandb sync` later) | disabled",
                                   choices=('online', 'offline', 'disabled')))


@dataclass(frozen=True)
class LogConfig:
    """Console, TensorBoard and metrics.jsonl."""

    interval_s: float = field(default=10.0, metadata=doc("seconds between console progress lines", gt=0))
    tensorboard: bool = field(default=True, metadata=doc("write TensorBoard events to run.dir/tb (rank 0)"))
    level: str = field(default="INFO", metadata=doc("logging level", choices=('DEBUG', 'INFO', 'WARNING', 'ERROR')))
    window: int = field(default=10,
                        metadata=doc("updates averaged for the console line and train/* and perf/fps (windowed)", gt=0))
    bottleneck_interval_s: float = field(default=300.0,
                                         metadata=doc("seconds between console lines naming the dominant bottleneck",
                                                      gt=0))
    wandb: WandbConfig = field(default_factory=WandbConfig, metadata=doc("Weights & Biases logging"))


@dataclass(frozen=True)
class CheckpointConfig:
    """Checkpoints in run.dir/checkpoints."""

    interval_updates: int = field(default=50, metadata=doc("save every this many updates (and always at the end)",
                                                           gt=0))
    keep_last: int = field(default=3, metadata=doc("keep this many newest checkpoints", gt=0))
    resume: bool = field(default=True, metadata=doc("resume from the newest valid checkpoint in run.dir"))
    path: str = field(default="", metadata=doc("initialise the weights from this checkpoint when run.dir has none to "
                                               "resume from (fine-tuning: optimiser and counters start fresh); a "
                                               "ddppo ckpt-<update>.pt or a habitat-baselines ckpt.N.pth"))
    stale_claim_s: float = field(default=3600.0,
                                 metadata=doc("the run dir's claim counts as abandoned when its holder has not "
                                              "checkpointed (its heartbeat) for this long, and for 3x its time between "
                                              "checkpoints: a node lost where neither SLURM nor the host can tell "
                                              "(docs/guides/run-directory-safety.md)", gt=0))


@dataclass(frozen=True)
class EvalConfig:
    """`ddppo eval`: held-out episodes on a checkpoint."""

    num_episodes: int = field(default=100,
                              metadata=doc("episodes per checkpoint, over all ranks (ignored where a dataset split is "
                                           "run whole)", gt=0))
    deterministic: bool = field(default=True,
                                metadata=doc("greedy actions (argmax / Gaussian mean); false samples like training"))
    seed_offset: int = field(default=1000003,
                             metadata=doc("eval envs use seeds derived from run.seed + this, apart from training's"))
    video_fps: int = field(default=8, metadata=doc("frames per second of --video files", gt=0))
    rank_wait_s: float = field(default=1800.0,
                               metadata=doc("how long ranks that finished their episodes wait for the others, then "
                                            "fail", gt=0))


@dataclass(frozen=True)
class ImitationConfig:
    """`ddppo imitate`: behaviour cloning on a recorded dataset (docs/guides/imitation.md)."""

    data: str = field(default="", metadata=doc("the dataset directory `ddppo record` wrote (its manifest.json)"))
    updates: int = field(default=500, metadata=doc("optimiser steps to train for", gt=0))
    lr: float = field(default=1e-3, metadata=doc("Adam learning rate", gt=0))
    batch_episodes: int = field(default=16, metadata=doc("episodes per rank in each update", gt=0))
    chunk_length: int = field(default=0,
                              metadata=doc("0: back-propagate through whole episodes; N: through chunks of N steps, "
                                           "the recurrent state carried (detached) from one chunk to the next", ge=0))
    val_fraction: float = field(default=0.1,
                                metadata=doc("share of the episodes held out for the validation loss and accuracy",
                                             ge=0, lt=1))
    eval_interval_updates: int = field(default=25,
                                       metadata=doc("measure the held-out loss and action accuracy every this many "
                                                    "updates (and at the end)", gt=0))
    inflection_weighting: bool = field(default=False,
                                       metadata=doc("up-weight the steps where the expert's action changes (habitat-"
                                                    "web's inflection weighting; discrete actions)"))
    max_grad_norm: float = field(default=1.0, metadata=doc("grad-norm clip after the all-reduce (0 = off)", ge=0))


@dataclass(frozen=True)
class Config:
    """A whole experiment."""

    run: RunConfig = field(default_factory=RunConfig)
    dist: DistConfig = field(default_factory=DistConfig)
    env: EnvConfig = field(default_factory=EnvConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    preemption: PreemptionConfig = field(default_factory=PreemptionConfig)
    ppo: PPOConfig = field(default_factory=PPOConfig)
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    normalize: NormalizeConfig = field(default_factory=NormalizeConfig)
    reward: RewardConfig = field(default_factory=RewardConfig)
    log: LogConfig = field(default_factory=LogConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    imitation: ImitationConfig = field(default_factory=ImitationConfig)

    @property
    def env_options(self) -> dict[str, Any]:
        """The option section of the chosen environment, as a plain dict."""
        return dataclasses.asdict(getattr(self.env, section_for(self.env.name)))

    @property
    def steps_per_rank_update(self) -> int:
        """Env steps one rank collects in a full (not preempted) rollout."""
        return self.env.num_envs * self.rollout.num_steps


def fields_of(cls: type | None = None, prefix: str = "") -> Iterator[tuple[str, dataclasses.Field]]:
    """Every leaf option of the schema as (dotted key, dataclass field), in schema order."""
    for f in dataclasses.fields(cls or Config):
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        if dataclasses.is_dataclass(default):
            yield from fields_of(type(default), f"{prefix}{f.name}.")
        else:
            yield f"{prefix}{f.name}", f


# Keys whose change alters a tensor shape of the model or the optimiser state (fields marked shape=True):
# a resume that changes them is refused.
SHAPE_KEYS = tuple(key for key, f in fields_of() if f.metadata.get(SHAPE))


def get_key(cfg: Any, dotted: str) -> Any:
    """`get_key(cfg, "ppo.lr")` -> cfg.ppo.lr."""
    for part in dotted.split("."):
        cfg = cfg[part] if isinstance(cfg, dict) else getattr(cfg, part)
    return cfg
