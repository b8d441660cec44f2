"""Name the bottleneck from the per-phase timings, with the knob that addresses it.

Each update every rank times its phases; `stats.unpack` reduces them to
mean/min/max over ranks. Over a window of updates, the shares of wall time
point at one of the usual culprits of distributed RL:

  straggler-bound      fast ranks wait at the end-of-rollout sync for the slow ones
  environment-bound    env.step dominates the rollout, and the rollout dominates the update
  policy-bound         policy.act dominates the rollout (inference throughput)
  reward-model-bound   the reward model's scoring (reward.model) dominates the rollout
  learner-bound        forward/backward/optimizer dominate the update
  communication-bound  the gradient all-reduce dominates the update
  memory pressure      resident or device memory near the limit (reported in any case)

Under rollout.overlap_learning the learner runs while the next rollout is collected: its phases overlap the
collection's, and only the time the main thread waited for it (learner_wait) is the learner's to blame.
"""

from __future__ import annotations

import dataclasses
from typing import Iterable, Mapping

from ddppo import timing

LEARN = (timing.ADVANTAGE, timing.LEARN_FORWARD_BACKWARD, timing.OPTIMIZER)
COMMUNICATION = (timing.ALLREDUCE, timing.NORMALIZATION_SYNC)

KNOBS = {
    "straggler-bound": "lower preemption.sync_frac (e.g. 0.6) so slow ranks are preempted; check the slow "
                       "ranks' simulators / nodes",
    "environment-bound": "raise env.num_workers (parallel simulator processes) or ranks per node; "
                         "keep env.num_envs per worker small",
    "policy-bound": "raise env.num_envs (bigger inference batches), run on a GPU, or shrink policy.hidden_size",
    "reward-model-bound": "score fewer observations (reward.mode=terminal), shrink the reward model, run it on a "
                          "GPU, or raise env.num_envs (bigger scoring batches)",
    "learner-bound": "lower ppo.epochs, or use fewer, larger minibatches (lower ppo.num_mini_batch); "
                     "a GPU helps most",
    "communication-bound": "lower ppo.num_mini_batch (fewer all-reduces per update) or ppo.epochs; "
                           "check the interconnect (NCCL on GPUs)",
    "memory pressure": "lower env.num_envs or rollout.num_steps (rollout storage), or policy size",
}
# said of learner-bound only where learning is not already overlapped with collection
OVERLAP_HINT = "; with envs in workers rollout.overlap_learning=true hides it behind collection"


@dataclasses.dataclass
class Diagnosis:
    name: str
    share: float  # share of update wall time (or of memory limit for memory pressure)
    knob: str
    shares: dict[str, float]  # every phase group's share, for the log line

    def line(self) -> str:
        parts = ", ".join(f"{k} {100 * v:.0f}%" for k, v in sorted(self.shares.items(), key=lambda kv: -kv[1]))
        return f"bottleneck: {self.name} ({100 * self.share:.0f}% of wall time) -> {self.knob} [{parts}]"


def _sum(perf: Mapping[str, float], phases: Iterable[str], suffix: str = "") -> float:
    return sum(perf.get(f"perf/{p}_s{suffix}", 0.0) for p in phases)


def diagnose(window: list[Mapping[str, float]], memory_fraction: float = 0.0,
             overlapped: bool = False) -> Diagnosis | None:
    """Diagnose from the reduced perf dicts of recent updates (see stats.unpack); `overlapped`: the learner
    runs beside the collection (rollout.overlap_learning), only its wait counts against it."""
    if not window:
        return None
    total = sum(p.get("perf/update_s", 0.0) for p in window)
    if total <= 0:
        return None
    wait = sum(p.get("perf/straggler_wait_s_max", 0.0) for p in window) / total
    env = sum(_sum(p, (timing.ENV_STEP,)) for p in window) / total
    policy = sum(_sum(p, (timing.POLICY_FORWARD,)) for p in window) / total
    reward = sum(_sum(p, (timing.REWARD_MODEL,)) for p in window) / total
    learn = sum(_sum(p, LEARN) for p in window) / total
    comm = sum(_sum(p, COMMUNICATION) for p in window) / total
    shares = {"straggler wait": wait, "env step": env, "policy forward": policy, "learning": learn,
              "all-reduce": comm}
    if reward > 0:
        shares["reward model"] = reward
    if overlapped:
        learn = sum(_sum(p, (timing.LEARNER_WAIT,)) for p in window) / total
        shares["learner wait"] = learn
    if memory_fraction >= 0.9:
        return Diagnosis("memory pressure", memory_fraction, KNOBS["memory pressure"], shares)
    # a straggler shows as the slowest rank's wait share being large, whatever else dominates
    candidates = {"straggler-bound": wait, "environment-bound": env, "policy-bound": policy,
                  "reward-model-bound": reward, "learner-bound": learn, "communication-bound": comm}
    name = max(candidates, key=candidates.get)
    knob = KNOBS[name] + (OVERLAP_HINT if name == "learner-bound" and not overlapped else "")
    return Diagnosis(name, candidates[name], knob, shares)
