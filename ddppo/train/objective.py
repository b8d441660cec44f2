"""What the learner optimises, measured on each rollout it learns on (train/* tags and the progress line).

    reward.model on   the reward the learner sees, per collected step: the env's part, the model's part and their
                      weighted sum (reward.env_weight x env + reward.model_weight x model, before normalize.reward's
                      scaling) -> train/reward_env_step, train/reward_model_step, train/reward_learned_step. The
                      scoring stage tallies both parts as it combines them (rollout/scoring.py's `take_tally`); the
                      tally is taken right after the stage has finished the rollout, so it is that rollout's
    ppo.advantage=grpo  the group-normalised return each sample is weighed by, over the samples in the loss: its
                      mean magnitude (train/grpo_return_abs) and the share of samples whose group had no spread, so
                      that they teach nothing (train/grpo_return_zero_share)

Each rank measures (numerator, denominator) sums; train/stats.py sums both over the ranks and divides, so a rank
that collected more steps weighs more. Which tags exist is fixed by the config, the same on every rank.
"""

from __future__ import annotations


import numpy as np

from ddppo.advantage import Advantages
from ddppo.rollout.rollout import Rollout
from ddppo.rollout.scoring import Scoring

Sums = dict[str, tuple[float, float]]  # tag -> (numerator, denominator) on this rank

REWARD_TAGS = ("train/reward_env_step", "train/reward_model_step", "train/reward_learned_step")
GRPO_TAGS = ("train/grpo_return_abs", "train/grpo_return_zero_share")


class Objective:
    """Measures what one rollout's learning optimises; `scoring`: the run's scoring stage (None, or a stage
    without a reward model: the env's reward is what is learned), `grpo`: the advantages are GRPO's
    group-normalised returns."""

    def __init__(self, scoring: Scoring | None = None, grpo: bool = False, env_weight: float = 1.0,
                 model_weight: float = 1.0):
        self.scoring = scoring if scoring is not None and scoring.scorer is not None else None
        self.grpo = grpo
        self.env_weight, self.model_weight = env_weight, model_weight

    def measure(self, rollout: Rollout, advantages: Advantages) -> Sums:
        """This rank's sums for the rollout just collected (read once per rollout: the tally restarts)."""
        out: Sums = {}
        if self.scoring is not None:
            steps, env, model = (float(x) for x in self.scoring.take_tally())
            learned = self.env_weight * env + self.model_weight * model
            out.update(zip(REWARD_TAGS, ((env, steps), (model, steps), (learned, steps))))
        if self.grpo:
            in_loss = advantages.mask > 0
            a = advantages.advantages[in_loss]
            n = float(in_loss.sum())
            out[GRPO_TAGS[0]] = (float(a.abs().sum()), n)
            out[GRPO_TAGS[1]] = (float((a == 0).sum()), n)
        return out


NO_OBJECTIVE = Objective()


def objective_line(scalars: dict[str, float]) -> list[str]:
    """The progress line's parts for what is optimised (none where the run logs no such tag)."""
    parts = []
    if REWARD_TAGS[2] in scalars:
        env, model, learned = (scalars[t] for t in REWARD_TAGS)
        parts.append(f"learned reward/step {learned:.4f} (env {env:.4f}, model {model:.4f})")
    if GRPO_TAGS[0] in scalars:
        parts.append(f"grpo |return| {scalars[GRPO_TAGS[0]]:.3f} (zero {100 * scalars[GRPO_TAGS[1]]:.0f}%)")
    return parts


def reduce_sums(names: tuple[str, ...], table: np.ndarray) -> dict[str, float]:
    """Every rank's (numerator, denominator) columns (world_size, 2 x len(names)) -> each tag's ratio of sums
    (NaN where no rank had a denominator)."""
    sums = table.reshape(-1, len(names), 2).sum(0)
    return {n: float(num / den) if den > 0 else float("nan") for n, (num, den) in zip(names, sums.tolist())}
