"""What the learner optimises (train/objective.py): a reward model's parts as it combined them, GRPO's
group-normalised returns over the loss's samples, each reduced over ranks as a ratio of sums."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from ddppo.advantage import Advantages
from ddppo.train.loop import progress_line
from ddppo.train.objective import GRPO_TAGS, REWARD_TAGS, Objective, reduce_sums


class Tally:
    scorer = "a reward model"  # the stage has one: what it tallies is measured

    def __init__(self, *sums: float):
        self.tallies = [np.array(sums)]

    def take_tally(self) -> np.ndarray:
        return self.tallies.pop()


def test_the_reward_parts_are_the_tallied_sums_and_their_weighted_sum():
    got = Objective(Tally(4, 2.0, -6.0), env_weight=0.0, model_weight=0.5).measure(None, None)
    assert got == {REWARD_TAGS[0]: (2.0, 4.0), REWARD_TAGS[1]: (-6.0, 4.0), REWARD_TAGS[2]: (-3.0, 4.0)}


def test_grpo_is_measured_over_the_samples_in_the_loss_only():
    adv = torch.tensor([[1.5, 0.0, -1.5], [0.0, 9.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])  # the 9 is outside the loss
    got = Objective(grpo=True).measure(None, Advantages(adv, torch.zeros_like(adv), mask))
    assert got == {GRPO_TAGS[0]: (3.0, 4.0), GRPO_TAGS[1]: (2.0, 4.0)}


def test_a_run_without_a_model_or_grpo_measures_nothing():
    assert Objective().measure(None, None) == {}


def test_ranks_are_reduced_as_a_ratio_of_sums_and_nothing_measured_is_nan():
    table = np.array([[1.0, 1.0, 0.0, 0.0], [3.0, 3.0, 0.0, 0.0]])  # rank 1 collected 3x the steps
    got = reduce_sums(("a", "b"), table)
    assert got["a"] == pytest.approx(4.0 / 4.0) and math.isnan(got["b"])
    assert reduce_sums(("a",), np.array([[1.0, 1.0], [9.0, 3.0]]))["a"] == pytest.approx(10 / 4)  # not (1 + 3) / 2


def test_the_progress_line_shows_what_is_optimised():
    scalars = {REWARD_TAGS[0]: 0.25, REWARD_TAGS[1]: -1.0, REWARD_TAGS[2]: -0.5, GRPO_TAGS[0]: 0.8, GRPO_TAGS[1]: 0.25}
    line = progress_line(10, 100, 5.0, scalars)
    assert "learned reward/step -0.5000 (env 0.2500, model -1.0000)" in line
    assert "grpo |return| 0.800 (zero 25%)" in line
    assert "learned" not in progress_line(10, 100, 5.0, {})
