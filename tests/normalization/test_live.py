"""normalize.update=step on the acting path: each observation is counted, then normalised with the statistics of
everything merged at the last update plus every observation counted since (SB3's VecNormalize order); a finished
episode's last observation is normalised but not counted; the reward scale follows every step's returns."""

from __future__ import annotations

import gymnasium
import numpy as np
import torch

from ddppo.normalization import LiveObsNormalizer, ObsNormalizer, RewardScaler, batch_moments

EPS, CLIP = 1e-8, 10.0


def normalizer(dim: int = 3) -> ObsNormalizer:
    space = gymnasium.spaces.Dict({"state": gymnasium.spaces.Box(-np.inf, np.inf, (dim,), np.float32)})
    return ObsNormalizer(space, CLIP, EPS)


def expected(seen: np.ndarray, x: np.ndarray) -> np.ndarray:
    mean, var = seen.mean(0), seen.var(0)
    return np.clip((x - mean) / np.sqrt(var + EPS), -CLIP, CLIP).astype(np.float32)


def test_each_step_is_counted_then_normalised_with_everything_merged_and_counted_so_far():
    rng = np.random.default_rng(0)
    norm = normalizer()
    merged = rng.normal(3.0, 2.0, (50, 3))  # what the last update merged (over every rank)
    n, mean, m2 = batch_moments(torch.from_numpy(merged))
    norm.stats["state"].merge(torch.tensor(n), mean, m2)
    live = LiveObsNormalizer(norm)
    seen = merged
    for _ in range(5):
        obs = rng.normal(5.0, 1.0, (2, 3)).astype(np.float32)  # a step of two envs
        seen = np.concatenate([seen, obs.astype(np.float64)])
        out = live.observe({"state": obs})["state"]
        np.testing.assert_allclose(out, expected(seen, obs), rtol=1e-5, atol=1e-5)
    final = rng.normal(0.0, 1.0, (1, 3))
    np.testing.assert_allclose(live.normalize({"state": final})["state"], expected(seen, final), rtol=1e-5,
                               atol=1e-5)
    (count, batch_mean, batch_m2), = live.take_batch()  # the 10 counted rows, not the final observation
    fresh = seen[50:]
    assert count == 10
    np.testing.assert_allclose(batch_mean, fresh.mean(0), rtol=1e-12)
    np.testing.assert_allclose(batch_m2, ((fresh - fresh.mean(0)) ** 2).sum(0), rtol=1e-10)
    assert live.take_batch()[0][0] == 0  # taken: a fresh batch


def test_with_no_statistics_yet_the_first_observation_is_its_own_mean():
    live = LiveObsNormalizer(normalizer())
    out = live.observe({"state": np.array([[1.0, -2.0, 7.0]], np.float32)})["state"]
    assert np.array_equal(out, np.zeros((1, 3), np.float32))  # variance 0: (x - x) / sqrt(eps)


def test_statistics_merged_at_an_update_take_effect_on_the_next_step():
    norm = normalizer()
    live = LiveObsNormalizer(norm)
    obs = {"state": np.full((1, 3), 4.0, np.float32)}
    live.observe(obs)
    live.take_batch()
    # mean 0, var 4
    norm.stats["state"].merge(torch.tensor(2.0), torch.zeros(3, dtype=torch.float64),
                              torch.full((3,), 8.0, dtype=torch.float64))
    np.testing.assert_allclose(live.normalize(obs)["state"], np.full((1, 3), 2.0), rtol=1e-6)


def test_the_live_reward_scale_follows_every_steps_returns():
    gamma = 0.9
    frozen = RewardScaler(2, gamma, CLIP, EPS)
    live = RewardScaler(2, gamma, CLIP, EPS, live=True)
    for s in (frozen, live):
        s.merge(4.0, 1.0, 8.0)  # the last update's statistics: mean 1, var 2
    rng = np.random.default_rng(1)
    returns_seen = [1.0 + np.sqrt(2.0) * z for z in (-1.0, 1.0, -1.0, 1.0)]  # mean 1, var 2 as merged
    g = np.zeros(2)
    for _ in range(6):
        r = rng.normal(0.0, 3.0, 2)
        done = np.array([False, rng.random() < 0.3])
        g = g * gamma + r
        returns_seen.extend(g)
        want = np.clip(r / np.sqrt(np.var(returns_seen) + EPS), -CLIP, CLIP)
        np.testing.assert_allclose(live(r, done), want, rtol=1e-5)
        np.testing.assert_allclose(frozen(r, done), np.clip(r / np.sqrt(2.0 + EPS), -CLIP, CLIP), rtol=1e-5)
        g[done] = 0.0
