"""Reward scaling (normalization/rewards.py), on the host: rewards divided by the running standard deviation of
the discounted return and clipped; the return restarts where an episode ended; the rollout's batch moments are
the moments of every return it advanced, whichever envs stepped."""

import numpy as np
import torch

from ddppo.normalization import RewardScaler

GAMMA = 0.9


def test_scaled_rewards_returns_and_batch_moments_match_a_direct_computation():
    rng = np.random.default_rng(0)
    scaler = RewardScaler(3, GAMMA, clip=5.0, eps=1e-8)
    scaler.merge(100.0, 2.0, 100.0 * 4.0)  # statistics as after an update: var 4, so rewards are halved
    ret = np.zeros(3)
    seen = []
    for t in range(40):
        envs = None if t % 2 else np.array([2, 0])  # every env, or two of them (worker batches)
        rows = np.arange(3) if envs is None else envs
        reward = rng.normal(0, 8, rows.size).astype(np.float32)
        done = rng.random(rows.size) < 0.2
        out = scaler(reward, done, envs)
        assert out.dtype == np.float32
        np.testing.assert_allclose(out, np.clip(reward / np.sqrt(4.0 + 1e-8), -5.0, 5.0), rtol=1e-6)
        ret[rows] = ret[rows] * GAMMA + reward
        seen += list(ret[rows])
        ret[rows[done]] = 0.0
        np.testing.assert_array_equal(scaler.returns, ret)
    n, mean, m2 = scaler.take_batch().tolist()
    assert n == len(seen)
    assert np.isclose(mean, np.mean(seen)) and np.isclose(m2, np.var(seen) * len(seen))
    assert scaler.take_batch().tolist() == [0.0, 0.0, 0.0]  # taken: a fresh batch


def test_saved_returns_round_trip_as_a_tensor():
    a = RewardScaler(2, GAMMA, 10.0, 1e-8)
    a(np.array([1.0, -3.0], np.float32), np.array([False, False]))
    state = a.returns_owner().state_dict()
    assert isinstance(state, torch.Tensor) and state.dtype == torch.float64
    b = RewardScaler(2, GAMMA, 10.0, 1e-8)
    b.returns_owner().load_state_dict(state)
    np.testing.assert_array_equal(b.returns, a.returns)
