"""The scoring stage (ddppo/rollout/scoring.py): each stored step observed, then, before advantages, the rewards
combined with a reward model's, scaled in the order observed, and truncations bootstrapped, in a new rollout."""

from __future__ import annotations

import numpy as np
import torch

from ddppo.envs.base import StepResult
from ddppo.rollout.rollout import Rollout
from ddppo.rollout.scoring import Ready, ScoredStep, Scoring


def rollout(L: int, N: int, reward: float = 1.0) -> Rollout:
    z = torch.zeros(L, N)
    return Rollout(obs={}, episode_start=z, memory={}, actions=z, logp=z, values=z,
                   rewards=torch.full((L, N), reward), dones=z, idle=z, valid=torch.ones(L, N), bootstrap=torch.zeros(N))


def result(reward, terminated=None, truncated=None) -> StepResult:
    n = len(reward)
    no = np.zeros(n, bool)
    flags = [no if f is None else np.asarray(f) for f in (terminated, truncated)]
    return StepResult({"x": np.zeros((n, 1), np.float32)}, np.asarray(reward, np.float32), *flags,
                      {"x": np.zeros((n, 1), np.float32)}, [])


class Fixed:
    """A scorer whose model reward for env n is 10 x (n + 1); `late`: its answers are readable only once released
    (a served model answering before advantages)."""

    def __init__(self, late: bool = False):
        self.late, self.released, self.submitted, self.restarts = late, False, [], 0

    def submit(self, step: ScoredStep):
        envs = np.arange(len(step.result.reward)) if step.envs is None else step.envs
        self.submitted.append(envs.tolist())
        values = (10.0 * (envs + 1)).astype(np.float32)
        if not self.late:
            return Ready(values)
        scorer = self

        class Pending:
            def result(self):
                assert scorer.released, "read before finish"
                return values

        return Pending()

    def restart(self):
        self.restarts += 1


class Scale:
    """Records each call (rewards, done, envs) and returns rewards + 100 x call number."""

    def __init__(self):
        self.calls = []

    def __call__(self, reward, done, envs=None):
        self.calls.append((reward.tolist(), done.tolist(), None if envs is None else envs.tolist()))
        return (reward + 100.0 * len(self.calls)).astype(np.float32)


def test_rewards_are_combined_then_scaled_in_the_order_observed_and_placed_at_their_slots():
    scorer, scale = Fixed(), Scale()
    scoring = Scoring(0.9, scale, scorer, env_weight=0.5, model_weight=2.0)
    scoring.begin()
    scoring.observe(ScoredStep(result([1, 2]), 0, np.zeros(2)), None)  # every env, slot 0
    scoring.observe(ScoredStep(result([3], terminated=[True]), np.array([1]), np.zeros(1), np.array([1])), None)
    scoring.observe(ScoredStep(result([4], truncated=[True]), np.array([1]), np.zeros(1), np.array([0])), None)
    rewards = scoring.finish(rollout(3, 2)).rewards
    assert scorer.submitted == [[0, 1], [1], [0]]
    assert scale.calls == [([20.5, 41.0], [False, False], None), ([41.5], [True], [1]), ([22.0], [True], [0])]
    assert rewards.tolist() == [[120.5, 141.0], [322.0, 241.5], [0.0, 0.0]]  # a slot never stored: 0 (masked)
    # what train/objective.py reads: (steps, env reward sum, model reward sum) as combined, before the scaling
    assert scoring.take_tally().tolist() == [4.0, 1 + 2 + 3 + 4, 10 + 20 + 20 + 10]
    assert scoring.take_tally().tolist() == [0.0, 0.0, 0.0]  # read once per rollout: the tally restarts


def test_the_tally_counts_only_the_rows_that_stepped():
    """An idle row (a grouped env waiting for its group: a no-op step, masked out of the loss) is no collected
    step: train/reward_*_step are means over the steps that were."""
    scoring = Scoring(0.9, None, Fixed())
    waiting = result([0, 2])
    waiting.idle = np.array([True, False])
    scoring.observe(ScoredStep(waiting, 0, np.zeros(2)), None)
    scoring.observe(ScoredStep(result([1, 1]), 1, np.zeros(2)), None)
    scoring.finish(rollout(2, 2))
    assert scoring.take_tally().tolist()[0] == 3.0


def test_a_scorer_that_answers_late_gives_the_same_rewards():
    def scored(scorer):
        scoring = Scoring(0.9, Scale(), scorer, env_weight=0.5, model_weight=2.0)
        scoring.observe(ScoredStep(result([1, 2, 3]), 0, np.zeros(3)), None)
        scoring.observe(ScoredStep(result([4, 5], terminated=[True, False]), np.array([1, 1]), np.zeros(2),
                                   np.array([2, 0])), None)
        scorer.released = True  # a served model's answers arrive before advantages
        return scoring.finish(rollout(2, 3)).rewards

    assert torch.equal(scored(Fixed(late=True)), scored(Fixed()))


def test_a_truncation_adds_gamma_times_its_final_value_and_nothing_else():
    asked = []

    def critic(rows):
        asked.append(rows.tolist())
        return torch.tensor([5.0] * len(rows))

    scoring = Scoring(0.5)
    # env 0 truncated, env 1 terminated and truncated (a termination: no bootstrap), env 2 running
    step = result([1, 1, 1], terminated=[False, True, False], truncated=[True, True, False])
    scoring.observe(ScoredStep(step, 1, np.zeros(3)), critic)
    scoring.observe(ScoredStep(result([1], truncated=[True]), np.array([0]), np.zeros(1), np.array([2])), critic)
    before = rollout(2, 3)
    after = scoring.finish(before)
    assert asked == [[0], [0]]
    assert after.rewards.tolist() == [[1.0, 1.0, 3.5], [3.5, 1.0, 1.0]]
    assert torch.equal(before.rewards, torch.ones(2, 3))  # the collected rollout is left as it is


def test_without_a_critic_model_or_scale_the_rollout_is_the_collected_one():
    scoring = Scoring(0.9)
    scoring.observe(ScoredStep(result([1, 1], truncated=[True, False]), 0, np.zeros(2)), None)
    collected = rollout(1, 2)
    assert scoring.finish(collected) is collected


def test_a_new_rollout_drops_what_an_unfinished_one_observed_and_restart_reaches_the_scorer():
    scorer = Fixed()
    scoring = Scoring(0.9, None, scorer)
    scoring.observe(ScoredStep(result([1, 1]), 0, np.zeros(2)), None)
    scoring.begin()
    scoring.observe(ScoredStep(result([2, 2]), 0, np.zeros(2)), None)
    assert scoring.finish(rollout(1, 2)).rewards.tolist() == [[12.0, 22.0]]
    scoring.restart()
    assert scorer.restarts == 1
