"""The config schema's run sections. Where a run lives and how it runs: run, dist, checkpoint, log (and its W&B sink)
and eval."""

from __future__ import annotations

from dataclasses import dataclass, field
from ddppo.field_metadata import doc


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
