"""The config schema (one dataclass per section) and `load_config`.

Merge order: schema defaults <- YAML file <- CLI dotlist (`ppo.lr=1e-4`), through
OmegaConf structured configs, so unknown keys and wrong types fail with the
dotted key named. Cross-field checks (`problems`) collect every problem and
raise once. The resulting `Config` is frozen: nothing changes it at run time;
rank, device and per-rank seeds live in the distributed context.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence

import yaml
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from envs.fields import SHAPE, doc
from envs.registry import known_names, section_for
from envs.options import GridNavOptions, GymOptions, HabitatOptions, SyntheticOptions


class ConfigError(ValueError):
    """A config problem the user can fix; the message names key, value and fix."""


@dataclass(frozen=True)
class RunConfig:
    """Where the run lives and how long it lasts."""

    dir: str = field(default="runs/gridnav",
                     metadata=doc("run directory: config.yaml, metrics.jsonl, tb/, checkpoints/ (the unit of resume)"))
    seed: int = field(default=0, metadata=doc("base seed; rank r uses a seed derived from (seed, r)"))
    total_env_steps: int = field(default=2_000_000,
                                 metadata=doc("env steps summed over all ranks; training stops after reaching it"))
    time_budget_s: float = field(default=0.0,
                                 metadata=doc("wall-clock budget of this process in seconds (0 = none); stops with a "
                                              "checkpoint"))
    torch_threads: int = field(default=1,
                               metadata=doc("intra-op threads per rank; 0 = the cores the rank owns: the CPUs "
                                            "its affinity mask allows / ranks on this node, or SLURM_CPUS_PER_TASK "
                                            "under srun; small RL nets (MLP, gridnav) are fastest with 1"))
    deterministic: bool = field(default=False,
                                metadata=doc("torch.use_deterministic_algorithms (bit-exact resume on CPU)"))


@dataclass(frozen=True)
class DistConfig:
    """Process group settings."""

    backend: str = field(default="auto", metadata=doc("auto (nccl where CUDA is available, else gloo) | gloo | nccl"))
    timeout_s: float = field(default=300.0,
                             metadata=doc("collective timeout once training runs; a lost rank is reported after this"))
    startup_timeout_s: float = field(default=1800.0,
                                     metadata=doc("timeout for rendezvous and the first update (env start-up can be "
                                                  "slow)"))
    device: str = field(default="auto", metadata=doc("auto (cuda:LOCAL_RANK if available, else cpu) | cpu | cuda"))
    bucket_mb: float = field(default=25.0,
                             metadata=doc("gradient all-reduce bucket size in MiB: each bucket is sent as soon as "
                                          "backward has filled it, overlapping communication with the rest of "
                                          "backward (smaller: earlier overlap, more collectives)"))


@dataclass(frozen=True)
class EnvConfig:
    """Which environment, how many copies per rank, and its own options."""

    name: str = field(default="gridnav",
                      metadata=doc("gridnav | gym:<gymnasium id> | habitat_pointnav | synthetic", shape=True))
    num_envs: int = field(default=16, metadata=doc("environments per rank"))
    num_workers: int = field(default=0,
                             metadata=doc("0 = step all envs in the trainer process; N = N subprocess workers (shared "
                                          "memory)"))
    gridnav: GridNavOptions = field(default_factory=GridNavOptions, metadata=doc("options of env.name=gridnav"))
    gym: GymOptions = field(default_factory=GymOptions, metadata=doc("options of env.name=gym:<id>"))
    habitat: HabitatOptions = field(default_factory=HabitatOptions,
                                    metadata=doc("options of env.name=habitat_pointnav"))
    synthetic: SyntheticOptions = field(default_factory=SyntheticOptions, metadata=doc("options of env.name=synthetic"))


@dataclass(frozen=True)
class RolloutConfig:
    """Rollout collection."""

    num_steps: int = field(default=128, metadata=doc("steps per env per rollout (the most a rank collects per update)"))
    mode: str = field(default="fixed",
                      metadata=doc("fixed (every env takes num_steps steps in lockstep) | variable (envs step "
                                   "asynchronously in env.num_workers workers, the policy acts on whichever are "
                                   "ready, each env contributes a variable number of steps until the rank has "
                                   "num_envs x num_steps)"))
    overlap: bool = field(default=False,
                          metadata=doc("fixed, with env.num_workers >= 2: double-buffered halves of the workers step "
                                       "while the policy acts on the other half (overlaps env stepping and "
                                       "inference); every env still takes num_steps steps"))
    max_env_steps_factor: float = field(default=2.0,
                                        metadata=doc("variable: an env collects at most this x num_steps steps per "
                                                     "rollout (the storage holds that many per env)"))
    batch_wait_s: float = field(default=0.002,
                                metadata=doc("variable: once one env is ready, wait at most this long for the other "
                                             "stepping envs before acting on those ready (the batch-fill bound)"))


@dataclass(frozen=True)
class PreemptionConfig:
    """Straggler preemption (DD-PPO)."""

    enabled: bool = field(default=True, metadata=doc("let ranks stop collecting early once enough ranks finished"))
    sync_frac: float = field(default=0.6, metadata=doc("stop once this fraction of ranks has finished its rollout"))
    min_rollout_fraction: float = field(default=0.25,
                                        metadata=doc("...but never before collecting this fraction of "
                                                     "rollout.num_steps"))
    poll_interval_s: float = field(default=0.01,
                                   metadata=doc("start a read of the finished-ranks counter at most this often (reads "
                                                "never block a step; 0 = a new one as soon as the last answered): "
                                                "fewer store round trips, at most this much later a stop"))


@dataclass(frozen=True)
class KLRefConfig:
    """A KL(pi || pi_ref) penalty towards a frozen reference policy (fine-tuning)."""

    checkpoint: str = field(default="", metadata=doc("checkpoint of the reference policy (\"\" = no KL term)"))
    beta: float = field(default=0.1, metadata=doc("initial KL coefficient"))
    adaptive: bool = field(default=True, metadata=doc("adapt beta once per update towards target_kl"))
    target_kl: float = field(default=0.01, metadata=doc("adaptive: the KL per update that beta aims for"))
    tolerance: float = field(default=1.5,
                             metadata=doc("adaptive: raise beta when KL > target*tolerance, lower it when KL < "
                                          "target/tolerance"))
    rate: float = field(default=2.0, metadata=doc("adaptive: factor beta is multiplied or divided by"))


@dataclass(frozen=True)
class PPOConfig:
    """The PPO objective and optimiser."""

    lr: float = field(default=2.5e-4, metadata=doc("Adam learning rate"))
    lr_schedule: str = field(default="constant", metadata=doc("constant | linear (decays to 0 at run.total_env_steps)"))
    adam_eps: float = field(default=1e-5, metadata=doc("Adam epsilon"))
    clip: float = field(default=0.2, metadata=doc("PPO ratio clip"))
    clip_value_loss: bool = field(default=True,
                                  metadata=doc("clip the value update to +/- clip around the rollout values"))
    epochs: int = field(default=4, metadata=doc("passes over each rollout"))
    num_mini_batch: int = field(default=2,
                                metadata=doc("minibatches per epoch, split by environment (must divide env.num_envs)"))
    value_coef: float = field(default=0.5, metadata=doc("value loss weight"))
    entropy_coef: float = field(default=0.01, metadata=doc("entropy bonus weight"))
    max_grad_norm: float = field(default=0.5, metadata=doc("global grad-norm clip after the all-reduce (0 = off)"))
    gamma: float = field(default=0.99, metadata=doc("discount"))
    gae_lambda: float = field(default=0.95, metadata=doc("GAE lambda"))
    normalize_advantage: bool = field(default=True,
                                      metadata=doc("standardise advantages over every rank's valid steps (GAE)"))
    max_skipped_updates: int = field(default=5,
                                     metadata=doc("stop the run after this many consecutive non-finite updates"))
    kl_ref: KLRefConfig = field(default_factory=KLRefConfig, metadata=doc("KL penalty towards a reference policy"))
    advantage: str = field(default="gae",
                           metadata=doc("gae (critic + GAE) | grpo (critic-free: episode returns normalised within "
                                        "groups)", shape=True))
    group_size: int = field(default=8,
                            metadata=doc("grpo: envs per group sharing each episode (>= 4; must divide env.num_envs)"))


@dataclass(frozen=True)
class PolicyConfig:
    """Network architecture."""

    architecture: str = field(default="ddppo",
                              metadata=doc("ddppo (an encoder per observation key, fused) | habitat_baselines "
                                           "(habitat-baselines' DD-PPO PointNavResNetPolicy, parameter for parameter: "
                                           "image(s) + pointgoal_with_gps_compass, Discrete actions; its checkpoints "
                                           "load unchanged)", shape=True))
    hidden_size: int = field(default=128,
                             metadata=doc("width of the encoders' output and of the recurrent core", shape=True))
    mlp_layers: int = field(default=2, metadata=doc("layers of the vector-observation encoder", shape=True))
    rnn_type: str = field(default="gru", metadata=doc("gru | lstm | none", shape=True))
    rnn_layers: int = field(default=1, metadata=doc("stacked recurrent layers", shape=True))
    image_encoder: str = field(default="cnn",
                               metadata=doc("cnn (small conv net) | resnet (GroupNorm ResNet) for image "
                                            "observations", shape=True))
    resnet_base_width: int = field(default=32, metadata=doc("ResNet base channel width", shape=True))
    resnet_layers: list = field(default_factory=lambda: [2, 2, 2, 2],
                                metadata=doc("ResNet blocks per stage", shape=True))
    resnet_bottleneck: bool = field(default=False,
                                    metadata=doc("bottleneck blocks ([3, 4, 6, 3] + bottleneck = ResNet50, as in "
                                                 "DD-PPO)", shape=True))
    init_log_std: float = field(default=0.0, metadata=doc("initial log std of Gaussian heads (Box actions)"))


@dataclass(frozen=True)
class WandbConfig:
    """Weights & Biases logging (rank 0; extra `wandb`): the same tags and env-step as TensorBoard."""

    enabled: bool = field(default=False, metadata=doc("log to Weights & Biases too (needs `pip install wandb`)"))
    project: str = field(default="ddppo", metadata=doc("W&B project"))
    entity: str = field(default="", metadata=doc("W&B entity (user or team; \"\" = your default)"))
    group: str = field(default="", metadata=doc("W&B run group (e.g. a sweep's name; \"\" = none)"))
    tags: list = field(default_factory=list, metadata=doc("W&B run tags"))
    mode: str = field(default="online",
                      metadata=doc("online | offline (files under run.dir/wandb, `wandb sync` later) | disabled"))


@dataclass(frozen=True)
class LogConfig:
    """Console, TensorBoard and metrics.jsonl."""

    interval_s: float = field(default=10.0, metadata=doc("seconds between console progress lines"))
    tensorboard: bool = field(default=True, metadata=doc("write TensorBoard events to run.dir/tb (rank 0)"))
    level: str = field(default="INFO", metadata=doc("logging level"))
    window: int = field(default=10,
                        metadata=doc("updates averaged for the console line and train/* and perf/fps (windowed)"))
    bottleneck_interval_s: float = field(default=300.0,
                                         metadata=doc("seconds between console lines naming the dominant bottleneck"))
    wandb: WandbConfig = field(default_factory=WandbConfig, metadata=doc("Weights & Biases logging"))


@dataclass(frozen=True)
class CheckpointConfig:
    """Checkpoints in run.dir/checkpoints."""

    interval_updates: int = field(default=50, metadata=doc("save every this many updates (and always at the end)"))
    keep_last: int = field(default=3, metadata=doc("keep this many newest checkpoints"))
    resume: bool = field(default=True, metadata=doc("resume from the newest valid checkpoint in run.dir"))
    path: str = field(default="", metadata=doc("start from this checkpoint instead (weights, optimiser and counters)"))


@dataclass(frozen=True)
class EvalConfig:
    """`ddppo eval`: held-out episodes on a checkpoint."""

    num_episodes: int = field(default=100,
                              metadata=doc("episodes per checkpoint, over all ranks (ignored where a dataset split is "
                                           "run whole)"))
    deterministic: bool = field(default=True,
                                metadata=doc("greedy actions (argmax / Gaussian mean); false samples like training"))
    seed_offset: int = field(default=1000003,
                             metadata=doc("eval envs use seeds derived from run.seed + this, apart from training's"))
    video_fps: int = field(default=8, metadata=doc("frames per second of --video files"))
    rank_wait_s: float = field(default=1800.0,
                               metadata=doc("how long ranks that finished their episodes wait for the others, then "
                                            "fail"))


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
    log: LogConfig = field(default_factory=LogConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)

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


def help_keys() -> str:
    """Every key with its one-line help (`ddppo config --help-keys`)."""
    rows = list(fields_of())
    width = max(len(k) for k, _ in rows)
    return "".join(f"{k:<{width}}  {f.metadata.get('help', '')}{'  [shape]' if f.metadata.get(SHAPE) else ''}\n"
                   for k, f in rows)


def explain(key: str, cfg: Config | None = None) -> str:
    """What a key means, its type and default (and its value in `cfg`); a section explains every key of it."""
    fields = dict(fields_of())
    keys = [key] if key in fields else [k for k in fields if k.startswith(key + ".")]
    if not keys:
        raise ConfigError(f"{key!r} is not a config key or section; `ddppo config --help-keys` lists them")
    out = []
    for k in keys:
        f = fields[k]
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        out.append(f"{k}: {f.type} = {default!r}" + (f"  (here: {get_key(cfg, k)!r})" if cfg is not None else ""))
        out.append(f"    {f.metadata.get('help', '')}")
        if f.metadata.get(SHAPE):
            out.append("    shape: changing it changes the model; a resume with another value is refused")
    return "\n".join(out) + "\n"


def _positive(p: list[str], cfg: Config, *keys: str) -> None:
    for key in keys:
        value = get_key(cfg, key)
        if not value > 0:
            p.append(f"{key}={value} must be > 0")


def _rollout_mode_problems(cfg: Config) -> list[str]:
    """rollout.mode=variable needs asynchronous worker processes and refuses what assumes lockstep rollouts."""
    r, p = cfg.rollout, []
    if r.max_env_steps_factor < 1:
        p.append(f"rollout.max_env_steps_factor={r.max_env_steps_factor} must be >= 1")
    if r.batch_wait_s < 0:
        p.append(f"rollout.batch_wait_s={r.batch_wait_s} must be >= 0")
    if r.mode != "variable":
        return p
    if cfg.env.num_workers == 0:
        p.append("rollout.mode=variable steps envs asynchronously in worker processes: set env.num_workers > 0 "
                 "(env.num_workers=env.num_envs lets every env run at its own speed)")
    if cfg.ppo.advantage == "grpo":
        p.append("rollout.mode=variable cannot run ppo.advantage=grpo: grouped episodes step in lockstep; "
                 "use rollout.mode=fixed")
    if cfg.ppo.kl_ref.checkpoint:
        p.append("rollout.mode=variable cannot run ppo.kl_ref.checkpoint: the reference policy carries its recurrent "
                 "state across equal-length rollouts; use rollout.mode=fixed")
    return p


def problems(cfg: Config) -> list[str]:
    """Every cross-field and range problem of `cfg`, each naming key, value and fix."""
    p: list[str] = []
    _positive(p, cfg, "run.total_env_steps", "env.num_envs", "rollout.num_steps", "ppo.lr", "ppo.clip",
              "ppo.epochs", "ppo.num_mini_batch", "ppo.adam_eps", "policy.hidden_size", "policy.rnn_layers",
              "policy.mlp_layers", "log.interval_s", "log.window", "log.bottleneck_interval_s",
              "checkpoint.interval_updates",
              "checkpoint.keep_last", "eval.num_episodes", "eval.video_fps", "eval.rank_wait_s", "dist.timeout_s",
              "dist.startup_timeout_s", "ppo.max_skipped_updates", "dist.bucket_mb")
    for key in ("run.time_budget_s", "run.torch_threads", "env.num_workers", "ppo.value_coef",
                "ppo.entropy_coef", "ppo.max_grad_norm", "preemption.poll_interval_s"):
        if get_key(cfg, key) < 0:
            p.append(f"{key}={get_key(cfg, key)} must be >= 0")
    kl = cfg.ppo.kl_ref
    if kl.checkpoint and not (kl.beta >= 0 and kl.target_kl > 0 and kl.tolerance > 1 and kl.rate > 1):
        p.append(f"ppo.kl_ref: beta={kl.beta} must be >= 0, target_kl={kl.target_kl} > 0, "
                 f"tolerance={kl.tolerance} > 1 and rate={kl.rate} > 1")
    if cfg.ppo.advantage == "grpo":
        if cfg.ppo.group_size < 4:
            p.append(f"ppo.group_size={cfg.ppo.group_size} must be >= 4 with ppo.advantage=grpo: the within-group "
                     f"mean and std of fewer returns are too noisy to be a baseline")
        elif cfg.env.num_envs % cfg.ppo.group_size:
            p.append(f"ppo.group_size={cfg.ppo.group_size} must divide env.num_envs={cfg.env.num_envs} "
                     f"(groups never span ranks)")
    p.extend(_rollout_mode_problems(cfg))
    if not 0 < cfg.preemption.sync_frac <= 1:
        p.append(f"preemption.sync_frac={cfg.preemption.sync_frac} must be in (0, 1]; 1 disables preemption")
    if not 0 < cfg.preemption.min_rollout_fraction <= 1:
        p.append(f"preemption.min_rollout_fraction={cfg.preemption.min_rollout_fraction} must be in (0, 1]")
    for key in ("ppo.gamma", "ppo.gae_lambda"):
        if not 0 <= get_key(cfg, key) <= 1:
            p.append(f"{key}={get_key(cfg, key)} must be in [0, 1]")
    if cfg.env.num_envs > 0 and cfg.ppo.num_mini_batch > 0 and cfg.env.num_envs % cfg.ppo.num_mini_batch:
        p.append(f"ppo.num_mini_batch={cfg.ppo.num_mini_batch} must divide env.num_envs={cfg.env.num_envs} "
                 f"(minibatches are split by environment)")
    if cfg.env.num_workers > 0 and cfg.env.num_envs % cfg.env.num_workers:
        p.append(f"env.num_workers={cfg.env.num_workers} must divide env.num_envs={cfg.env.num_envs}")
    choices = {
        "dist.backend": ("auto", "gloo", "nccl"),
        "dist.device": ("auto", "cpu", "cuda"),
        "ppo.lr_schedule": ("constant", "linear"),
        "ppo.advantage": ("gae", "grpo"),
        "rollout.mode": ("fixed", "variable"),
        "policy.rnn_type": ("gru", "lstm", "none"),
        "policy.architecture": ("ddppo", "habitat_baselines"),
        "log.wandb.mode": ("online", "offline", "disabled"),
        "policy.image_encoder": ("cnn", "resnet"),
        "log.level": ("DEBUG", "INFO", "WARNING", "ERROR"),
    }
    for key, allowed in choices.items():
        if get_key(cfg, key) not in allowed:
            p.append(f"{key}={get_key(cfg, key)!r} must be one of {', '.join(allowed)}")
    if any(not isinstance(n, int) or n <= 0 for n in cfg.policy.resnet_layers) or not cfg.policy.resnet_layers:
        p.append(f"policy.resnet_layers={list(cfg.policy.resnet_layers)} must be a non-empty list of positive ints")
    section = section_for(cfg.env.name)
    if section is None:
        p.append(f"env.name={cfg.env.name!r} is not a known environment; use one of {', '.join(known_names())}")
    else:
        p.extend(f"env.{section}.{msg}" for msg in getattr(cfg.env, section).problems())
    return p


def get_key(cfg: Any, dotted: str) -> Any:
    """`get_key(cfg, "ppo.lr")` -> cfg.ppo.lr."""
    for part in dotted.split("."):
        cfg = cfg[part] if isinstance(cfg, dict) else getattr(cfg, part)
    return cfg


def _schema() -> DictConfig:
    """The schema as a writable typed DictConfig, for layers to be merged onto.

    `OmegaConf.structured` flags the node of every frozen dataclass (the root and
    each section) read-only. omegaconf 2.4's merge writes through those flags, but
    2.3's lifts only the root's, so merging `run.dir` failed with "Cannot set value
    of read-only config node". Clearing the flag on every node makes the merge
    behave the same on both; the `Config` built from it stays a frozen dataclass.
    """
    schema = OmegaConf.structured(Config)
    _set_writable(schema)
    return schema


def _set_writable(node: DictConfig) -> None:
    OmegaConf.set_readonly(node, False)
    for key in node:
        child = node[key]
        if isinstance(child, DictConfig):
            _set_writable(child)


def _wrap(err: OmegaConfBaseException, source: str) -> ConfigError:
    key = getattr(err, "full_key", None)
    msg = str(err).split("\n")[0]
    where = f"{key}: " if key else ""
    return ConfigError(f"{source}: {where}{msg}. Run `ddppo config CONFIG` to see every valid key.")


def _section_problems(layer: Any, schema: Any, prefix: str = "") -> list[str]:
    """Keys of a (plain) layer that give a value where the schema has a section of keys."""
    if not isinstance(layer, dict):
        return []
    out = []
    for key, value in layer.items():
        default = getattr(schema, key, None) if isinstance(key, str) else None
        if not dataclasses.is_dataclass(default):
            continue  # a leaf, or an unknown key (the merge names it)
        if isinstance(value, dict):
            out += _section_problems(value, default, f"{prefix}{key}.")
        else:
            out.append(f"{prefix}{key}={value!r} must be a section of keys (e.g. {prefix}{key}."
                       f"{dataclasses.fields(default)[0].name}=...), not a single value")
    return out


def _non_finite(obj: Any, prefix: str = "") -> list[str]:
    """Float fields holding nan or inf (no option means anything with them)."""
    out = []
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value):
            out += _non_finite(value, f"{prefix}{f.name}.")
        elif isinstance(value, float) and not math.isfinite(value):
            out.append(f"{prefix}{f.name}={value} must be a finite number")
    return out


class UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a key given twice in one mapping (PyYAML keeps the last silently, so a
    repeated `ppo:` section would drop the first one's keys)."""

    def construct_mapping(self, node, deep=False):
        first: dict[Any, int] = {}
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node)
            if key in first:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (first at line {first[key]}); give each key once",
                    key_node.start_mark)
            first[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


def yaml_problem(err: yaml.YAMLError) -> str:
    """A YAML parser error on one line: what is wrong and where."""
    problem = getattr(err, "problem", None) or str(err).splitlines()[0]
    mark = getattr(err, "problem_mark", None)
    return f"{problem} (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else problem


def yaml_layer(text: str, what: str) -> DictConfig:
    """YAML text of config sections as an OmegaConf layer (not yet checked against the schema); ConfigError
    naming `what` if it is not YAML or not a mapping. The one way config YAML is parsed: files, stored configs
    (run dirs, checkpoints) and sweep base configs."""
    try:
        data = yaml.load(text, UniqueKeyLoader)
    except yaml.YAMLError as err:
        raise ConfigError(f"{what} is not valid YAML: {yaml_problem(err)}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{what} must hold a mapping of sections (run:, env:, ppo:, ...), "
                          f"not a {type(data).__name__}")
    return OmegaConf.create(data)


def read_yaml(path: str | Path) -> DictConfig:
    """A YAML config file as a layer (see `yaml_layer`)."""
    path = Path(path)
    if not path.is_file():
        what = "is a directory" if path.is_dir() else "does not exist"
        raise ConfigError(f"config file {str(path)!r} {what}; pass a YAML file such as configs/gridnav.yaml")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"config file {str(path)!r} is not a YAML text file (not UTF-8 text); "
                          f"pass a YAML file such as configs/gridnav.yaml") from None
    except OSError as err:
        raise ConfigError(f"config file {str(path)!r} cannot be read: {err.strerror or err}") from None
    return yaml_layer(text, f"config file {str(path)!r}")


def parse_overrides(overrides: Sequence[str]) -> DictConfig:
    """`["ppo.lr=1e-4", ...]` -> a DictConfig; a malformed item is a ConfigError."""
    for item in overrides:
        if "=" not in item or item.startswith("="):
            raise ConfigError(f"override {item!r} is not of the form key=value (e.g. ppo.lr=1e-4)")
    for item in overrides:  # one at a time first, so a value that is not YAML is named
        try:
            OmegaConf.from_dotlist([item])
        except yaml.YAMLError as err:
            raise ConfigError(f"override {item!r}: the value is not valid YAML ({yaml_problem(err)}); quote it, "
                              f"e.g. 'key=\"...\"'") from None
        except OmegaConfBaseException:
            pass  # reported below, with all of them
    try:
        return OmegaConf.from_dotlist(list(overrides))
    except OmegaConfBaseException as err:
        raise _wrap(err, "overrides") from None


def build_config(*layers: tuple[str, DictConfig]) -> Config:
    """Merge named layers onto the schema, convert to a frozen Config and check it."""
    merged = _schema()
    for source, layer in layers:
        wrong = _section_problems(OmegaConf.to_container(layer), Config())
        if wrong:
            raise ConfigError(f"{source}: " + "; ".join(wrong))
        try:
            merged = OmegaConf.merge(merged, layer)
        except OmegaConfBaseException as err:
            raise _wrap(err, source) from None
    try:
        cfg: Config = OmegaConf.to_object(merged)
    except OmegaConfBaseException as err:
        raise _wrap(err, "config") from None
    found = _non_finite(cfg) + problems(cfg)
    if found:
        raise ConfigError("invalid config:\n  " + "\n  ".join(found))
    return cfg


def load_config(path: str | Path | None, overrides: Sequence[str] = ()) -> Config:
    """Schema <- YAML file (optional) <- dotlist overrides; validated and frozen."""
    layers = []
    if path is not None:
        layers.append((str(path), read_yaml(path)))
    if overrides:
        layers.append(("overrides", parse_overrides(overrides)))
    return build_config(*layers)


def to_yaml(cfg: Config) -> str:
    """The fully resolved config as YAML text (what run.dir/config.yaml holds)."""
    return OmegaConf.to_yaml(OmegaConf.structured(cfg))


def from_yaml_text(text: str, source: str) -> Config:
    """Parse a resolved config written by `to_yaml` (checkpoints, run dirs)."""
    return build_config((source, yaml_layer(text, f"{source}: stored config")))


def diff_keys(a: Config, b: Config) -> list[str]:
    """Dotted keys whose values differ between two configs."""
    out: list[str] = []

    def walk(x: Any, y: Any, prefix: str) -> None:
        if dataclasses.is_dataclass(x) and dataclasses.is_dataclass(y):
            for f in dataclasses.fields(x):
                walk(getattr(x, f.name), getattr(y, f.name), f"{prefix}{f.name}.")
        elif x != y and not (isinstance(x, float) and isinstance(y, float) and math.isclose(x, y)):
            out.append(prefix[:-1])

    walk(a, b, "")
    return out
