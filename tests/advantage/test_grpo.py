"""GRPO: advantages on hand-made groups, grouped gridnav episodes, no critic, config refusals."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from ddppo.config import load_config
from ddppo.errors import ConfigError
from ddppo.advantage.grpo import grpo_advantages
from ddppo.envs.gridnav.env import STOP, TURN_LEFT, GridNav
from ddppo.envs.gridnav.options import GridNavOptions
from ddppo.envs.base import EnvSpec


def _z(shape):
    return torch.zeros(shape)


def test_advantages_of_one_complete_group_by_hand():
    # 1 group of 4; member m's episode lasts m+1 steps with reward 1 per step, then it idles.
    L, g = 5, 4
    rewards, dones, idle = _z((L, g)), _z((L, g)), _z((L, g))
    for m in range(g):
        rewards[: m + 1, m] = 1.0
        dones[m, m] = 1.0
        idle[m + 1:, m] = 1.0
    adv, mask, carry = grpo_advantages(rewards, dones, idle, _z((2, g)), g)
    R = np.array([1.0, 2.0, 3.0, 4.0])
    expected = (R - R.mean()) / R.std()
    for m in range(g):
        assert torch.allclose(adv[: m + 1, m], torch.full((m + 1,), float(expected[m])), atol=1e-6)
        assert mask[: m + 1, m].tolist() == [1.0] * (m + 1)
        assert mask[m + 1:, m].sum() == 0 and adv[m + 1:, m].abs().sum() == 0  # idle steps: masked
    assert carry.abs().sum() == 0


def test_unfinished_group_is_masked_and_carried_into_the_next_rollout():
    g = 4
    # rollout 1: members 0-2 finish at step 0 (returns 1, 2, 3), member 3 runs on (return 0.5 so far)
    r1 = torch.tensor([[1.0, 2.0, 3.0, 0.5], [0.0, 0.0, 0.0, 0.0]])
    d1 = torch.tensor([[1.0, 1.0, 1.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    i1 = torch.tensor([[0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 0.0]])
    adv, mask, carry = grpo_advantages(r1, d1, i1, _z((2, g)), g)
    assert mask.sum() == 0 and adv.abs().sum() == 0  # the group's episode is not complete yet
    assert carry[0].tolist() == [1.0, 2.0, 3.0, 0.5] and carry[1].tolist() == [1.0, 1.0, 1.0, 0.0]
    # rollout 2: member 3 finishes at step 0 with 3.5 more (return 4): the group completes
    r2 = torch.tensor([[0.0, 0.0, 0.0, 3.5]])
    d2 = torch.tensor([[0.0, 0.0, 0.0, 1.0]])
    i2 = torch.tensor([[1.0, 1.0, 1.0, 0.0]])
    adv, mask, carry = grpo_advantages(r2, d2, i2, carry, g)
    R = np.array([1.0, 2.0, 3.0, 4.0])
    assert mask.tolist() == [[0.0, 0.0, 0.0, 1.0]]
    assert adv[0, 3].item() == pytest.approx((4.0 - R.mean()) / R.std(), rel=1e-5)
    assert carry.abs().sum() == 0


def test_equal_returns_give_zero_advantage():
    g = 4
    adv, mask, _ = grpo_advantages(torch.ones(1, g), torch.ones(1, g), _z((1, g)), _z((2, g)), g)
    assert mask.sum() == g and adv.abs().max() == 0


def test_gridnav_groups_share_episodes_and_restart_together():
    env = GridNav(GridNavOptions(map_size=8, num_maps=4, max_episode_steps=20), EnvSpec(num_envs=8, seed=3,
                                                                                         group_size=4))
    obs = env.reset()
    for k in obs:
        assert np.array_equal(obs[k][0:4], np.repeat(obs[k][0:1], 4, axis=0))  # same episode in a group
        assert np.array_equal(obs[k][4:8], np.repeat(obs[k][4:5], 4, axis=0))
    # member 0 stops at once: it finishes, then idles frozen while the others turn
    res = env.step(np.array([STOP] + [TURN_LEFT] * 7))
    assert res.terminated[0] and not res.done[1:].any() and not res.idle.any()
    frozen = {k: v[0].copy() for k, v in res.obs.items()}
    res = env.step(np.array([TURN_LEFT] * 8))
    assert res.idle.tolist() == [True] + [False] * 7
    assert res.reward[0] == 0 and not res.done[0]
    assert all(e.env_index != 0 for e in res.episodes)
    for k in frozen:
        assert np.array_equal(res.obs[k][0], frozen[k])
    # the other three stop: group 0 completes and restarts together on one new episode; group 1 untouched
    res = env.step(np.array([TURN_LEFT, STOP, STOP, STOP] + [TURN_LEFT] * 4))
    assert res.started.tolist() == [True] * 4 + [False] * 4
    for k in res.obs:
        assert np.array_equal(res.obs[k][0:4], np.repeat(res.obs[k][0:1], 4, axis=0))


def test_grpo_config_refusals():
    with pytest.raises(ConfigError, match="group_size=2 must be >= 4"):
        load_config(None, ["ppo.advantage=grpo", "ppo.group_size=2"])
    with pytest.raises(ConfigError, match="must divide env.num_envs"):
        load_config(None, ["ppo.advantage=grpo", "ppo.group_size=5", "env.num_envs=16"])


def test_no_value_parameters_in_grpo_mode(tmp_path):
    from testutil import gloo_context
    from ddppo.train.builder import Trainer

    cfg = load_config(Path(__file__).resolve().parents[2] / "configs" / "gridnav.yaml", [f"run.dir={tmp_path}", "ppo.advantage=grpo", "env.num_envs=8",
                                               "ppo.group_size=4", "ppo.num_mini_batch=2", "log.tensorboard=false",
                                               "env.gridnav.num_maps=4"])
    ctx = gloo_context()
    try:
        trainer = Trainer(cfg, ctx)
        try:
            assert trainer.policy.critic is None
            assert not any("critic" in name for name in trainer.policy.state_dict())
        finally:
            trainer.close()
    finally:
        ctx.close()
