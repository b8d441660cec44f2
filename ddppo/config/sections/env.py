"""The config schema's env sections. What is collected: env (its family sections, `env.<section>`, are the option
dataclasses the env families declare: envs/registry.py), rollout and its preemption."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from ddppo.envs.family import EnvFamily
from ddppo.envs.registry import families, known_names
from ddppo.field_metadata import doc


@dataclass(frozen=True)
class EnvSettings:
    """Which environment and how many copies per rank: the env section's own keys, before its families'."""

    name: str = field(default="gridnav", metadata=doc(" | ".join(known_names()), shape=True))
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


def _family_field(family: EnvFamily) -> tuple[str, type, dataclasses.Field]:
    if family.section in {f.name for f in dataclasses.fields(EnvSettings)}:
        raise ValueError(f"env family {family.section!r}: its section would hide the key env.{family.section}; "
                         f"rename the section")
    chosen = [*family.names] + ([f"{family.prefix}<{family.prefix_id}>"] if family.prefix else [])
    return family.section, family.options, field(default_factory=family.options,
                                                 metadata=doc(f"options of env.name={' | '.join(chosen)}"))


def env_config(found: dict[str, EnvFamily]) -> type:
    """The env section: EnvSettings' keys, then one section per family of `found` (section -> family)."""
    cls = dataclasses.make_dataclass("EnvConfig", [_family_field(f) for f in found.values()], bases=(EnvSettings,),
                                     frozen=True)
    cls.__module__, cls.__doc__ = __name__, "Which environment, how many copies per rank, and its own options."
    return cls


EnvConfig = env_config(families())


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
                                                 "the envs that share its minibatch)",
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
