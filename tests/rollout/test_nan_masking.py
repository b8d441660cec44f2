"""NaN-safe masking: data outside the valid steps (an older rollout's data in variable mode's padding, which
may be a NaN/inf reward) never reaches an advantage, a return, a loss term or the advantage statistics. A mask
never multiplies data (NaN * 0 is NaN): GAE, storage, loss and update select with torch.where.

The last test is the variable-mode reproduction: a stale NaN reward left in padding slots must not poison the
next rollout's update (before the fix, GAE carried it into every valid step of the segment and the update was
skipped until the slot was overwritten)."""

from __future__ import annotations

import math

import pytest
import torch

from ddppo.ppo.loss import masked_mean, ppo_loss
from ddppo.advantage.gae import gae, normalize_advantages, rollout_gae
from rollout_testutil import NeverStop
from testutil import build_collector

NAN = float("nan")


def test_gae_selects_away_a_nan_past_an_env_length():
    rewards = torch.tensor([[1.0, 1.0], [1.0, 1.0], [NAN, 1.0], [float("inf"), 1.0]])  # env 0: 2 valid steps
    values = torch.zeros(5, 2)
    adv, ret = gae(rewards, values, torch.zeros(4, 2), 0.9, 0.95, torch.tensor([2, 4]))
    assert torch.isfinite(adv).all() and torch.isfinite(ret).all()
    assert adv[2:, 0].tolist() == [0.0, 0.0] and ret[2:, 0].tolist() == [0.0, 0.0]
    clean, _ = gae(torch.where(torch.isfinite(rewards), rewards, 0.0), values, torch.zeros(4, 2), 0.9, 0.95,
                   torch.tensor([2, 4]))
    assert torch.equal(adv, clean)  # what was in the padding does not matter


def test_a_nan_in_a_valid_step_still_propagates():
    rewards = torch.tensor([[NAN], [1.0]])
    adv, _ = gae(rewards, torch.zeros(3, 1), torch.zeros(2, 1), 0.9, 0.95, torch.tensor([2]))
    assert torch.isnan(adv[0]).all()  # a NaN reward the rollout collected makes a skipped update


def test_masked_mean_ignores_nan_and_inf_outside_the_mask():
    x = torch.tensor([1.0, 3.0, NAN, float("-inf")])
    mask = torch.tensor([1.0, 1.0, 0.0, 0.0])
    assert masked_mean(x, mask).item() == 2.0
    assert masked_mean(x, mask, torch.tensor([0.5, 1.0, 1.0, 1.0])).item() == 1.75  # sum(w x) / count


def test_the_loss_is_finite_with_nan_padding():
    n = 6
    valid = torch.tensor([1.0, 1.0, 1.0, 0.0, 0.0, 0.0])
    pad = torch.where(valid > 0, torch.zeros(n), torch.full((n,), NAN))
    out = ppo_loss(torch.zeros(n), torch.zeros(n), torch.ones(n) + pad, torch.ones(n) + pad, torch.zeros(n),
                   torch.zeros(n) + pad, torch.ones(n) + pad, valid, clip=0.2, clip_value_loss=True, value_coef=0.5,
                   entropy_coef=0.01)
    assert all(math.isfinite(v) for v in out.scalars().values()), out.scalars()


class OneRank:
    def all_reduce_sums(self, t: torch.Tensor, what: str) -> torch.Tensor:
        return t


def test_advantage_statistics_ignore_nan_padding():
    adv = torch.tensor([[1.0, NAN], [3.0, float("inf")]])
    valid = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    out = normalize_advantages(adv, valid, OneRank())
    assert out[:, 0].tolist() == pytest.approx([-1.0, 1.0], abs=1e-6)
    assert adv[:, 0].tolist() == [1.0, 3.0]  # a new tensor: what it was handed is left as it was


@pytest.mark.timeout(120)
def test_variable_mode_a_stale_nan_reward_in_padding_does_not_poison_the_next_update():
    from ddppo.config import PolicyConfig, PPOConfig, RolloutConfig
    from ddppo.distributed import init_distributed
    from ddppo.model.policy import Policy
    from ddppo.advantage import estimator_for
    from ddppo.ppo.update import PPOUpdater
    from ddppo.rollout.factory import storage_steps
    from ddppo.rollout.storage import RolloutStorage
    from ddppo.timing import Timer
    from ddppo.envs.registry import make_vec_env
    from ddppo.envs.base import EnvSpec

    n, cfg = 4, RolloutConfig(num_steps=6, mode="variable", batch_wait_s=0.0, max_env_steps_factor=3.0)
    envs = make_vec_env("synthetic", {"step_sleep_s": 0.002, "step_sleep_sigma": 1.0, "episode_length": 5},
                        EnvSpec(num_envs=n, seed=0, num_workers=n))
    ctx = init_distributed("gloo", "cpu", 60, 60, 0)
    try:
        torch.manual_seed(0)
        policy = Policy(envs.observation_space, envs.action_space, PolicyConfig(hidden_size=8, rnn_type="gru"))
        storage = RolloutStorage(storage_steps(cfg), n, envs.observation_space, envs.action_space,
                                 policy.initial_memory(n), torch.device("cpu"))
        collector = build_collector(cfg, envs, policy, NeverStop())
        ppo = PPOConfig(epochs=1, num_mini_batch=2)
        updater = PPOUpdater(policy, ppo, ctx, advantage=estimator_for(ppo, n))
        timer = Timer()
        for update in (1, 2, 3):
            rollout = collector.collect(update, storage).rollout
            # a NaN reward an earlier rollout left in every slot this one did not write (the storage is reused)
            lengths = storage.lengths
            padding = torch.arange(storage.num_steps)[:, None] >= lengths
            assert padding.any()
            storage.rewards[padding] = NAN  # the buffer under the rollout's view
            adv = rollout_gae(rollout, 0.99, 0.95)
            valid = rollout.valid.bool()
            assert torch.isfinite(adv.advantages[valid]).all(), f"update {update}: padding poisoned GAE"
            assert torch.isfinite(adv.returns).all()
            result = updater.update(rollout, adv, timer)
            assert result.skipped_steps == 0, f"update {update}: skipped for a NaN outside its valid steps"
        assert all(torch.isfinite(p).all() for p in policy.parameters())
    finally:
        envs.close()
        ctx.close()


@pytest.mark.timeout(180)
def test_variable_mode_training_a_nan_reward_makes_skipped_updates_only_where_it_was_collected(tmp_path):
    """The documented promise (docs/design/distributed.md, "Non-finite data") through the real trainer in variable mode: each env's reward is NaN at its 6th
    step, once (synthetic `nan_reward_at_step`), so at most one update per env collects a NaN and is skipped;
    afterwards the NaN stays behind in its env's column, overwritten or in a padding slot, and must not skip
    another update."""
    import json

    from ddppo.config import load_config
    from ddppo.distributed import init_distributed
    from ddppo.train.builder import Trainer

    overrides = [f"run.dir={tmp_path / 'run'}", "env.name=synthetic", "env.num_envs=4", "env.num_workers=4",
                 "rollout.mode=variable", "rollout.num_steps=8", "rollout.max_env_steps_factor=3",
                 "ppo.num_mini_batch=2", "ppo.epochs=1", "policy.hidden_size=16", "log.tensorboard=false",
                 "env.synthetic.step_sleep_s=0.002", "env.synthetic.step_sleep_sigma=1.5",
                 "env.synthetic.nan_reward_at_step=6", "env.synthetic.nan_reward_steps=1",
                 "ppo.max_skipped_updates=5", "run.total_env_steps=320"]
    cfg = load_config(None, overrides)
    ctx = init_distributed("gloo", "cpu", 60, 60, cfg.run.seed)
    try:
        trainer = Trainer(cfg, ctx)
        try:
            assert trainer.train() == 0
        finally:
            trainer.close()
    finally:
        ctx.close()
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    skipped = [r["update"] for r in rows if r["loss/skipped_steps"] > 0]
    assert len(rows) == 10 and 1 <= len(skipped) <= 4, skipped  # 4 envs, one NaN reward each
