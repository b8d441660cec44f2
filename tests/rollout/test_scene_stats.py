"""Per-scene statistics (rollout/scenes.py), the rank weight and the two-sided in-rank weights (issue 44)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ddppo.config import PreemptionConfig
from ddppo.envs.base import EpisodeInfo
from ddppo.eval.stats import summarize_scenes
from ddppo.rollout.preemption import Preemption
from ddppo.rollout.scenes import SCENE_COLUMNS, SceneTally, metric_key, scene_scalars
from ddppo.rollout.variable import importance_weights, two_sided_weights
from rollout_testutil import AlternatingScenes, NeverStop, expected_scene_samples
from testutil import OneStorage, build_collector, gloo_context


class _Envs:
    def __init__(self, scenes):
        self.num_envs, self.env_scenes = len(scenes), scenes


def test_samples_and_weights_go_to_each_envs_scene():
    tally = SceneTally(("a", "b"), _Envs(["a", "b", "b", None]))
    table = tally.zeros()
    valid = np.ones((8, 4))
    valid[2:, 1:3] = 0.0  # envs 1 and 2 collected 2 steps
    valid[5:, 3] = 0.0
    tally.add_samples(table, valid, np.array([1.0, 2.0, 2.0, 1.0]), 3.0)
    assert table[:, 0].tolist() == [8.0, 4.0]  # the env of no known scene is not counted
    assert table[:, 1].tolist() == [24.0, 24.0]


def test_an_envs_steps_count_for_each_of_its_episodes_scenes():
    """Env 0 finishes an episode of scene b at slot 2 (the env started in a: the finished episode's own scene
    counts) and starts one of a; env 1 finishes one of an undeclared scene at slot 4 and cannot tell its next."""
    tally = SceneTally(("a", "b"), _Envs(["a", "a"]))
    table = tally.zeros()
    tally.add_episodes([EpisodeInfo(0, {"return": 2.0, "success": 1.0, "spl": 0.5}, "b", "a")], table, 2)
    tally.add_episodes([EpisodeInfo(1, {"return": 1.0}, "unknown")], table, np.array([0, 4]))
    assert table[1, 2] == 1 and table[1, 3] == 1.0 and table[1, 5] == 0.5 and table[0, 2] == 0
    assert tally.sample_scenes(6).T.tolist() == [[1, 1, 1, 0, 0, 0], [-1] * 6]
    tally.add_samples(table, np.ones((6, 2)), None, 1.0)
    assert table[:, 0].tolist() == [3.0, 3.0]  # env 1's steps are of an undeclared scene: not counted
    tally.begin()  # the next rollout: env 0 plays on in a
    assert tally.sample_scenes(2)[:, 0].tolist() == [0, 0]


def test_scene_scalars_shares_and_outcomes():
    table = np.zeros((2, len(SCENE_COLUMNS)))
    table[:, 0] = [30, 10]
    table[:, 1] = [30, 30]
    table[0, 2:5] = [4, 3, 4]
    out = scene_scalars(("fast", "slow/1"), table)
    assert out["train/scene/fast/sample_share"] == 0.75 and out["train/scene/slow_1/weight_share"] == 0.5
    assert out["train/scene/fast/success"] == 0.75 and "train/scene/slow_1/success" not in out
    assert out["train/scene_weight_share_min"] == 0.5 and out["train/scene_success_min"] == 0.75
    assert scene_scalars((), np.zeros((0, len(SCENE_COLUMNS)))) == {}
    assert metric_key("data/x.glb") == "data_x.glb"


def test_the_rank_weight_is_bounded_and_an_option():
    ctx = gloo_context()
    try:
        on = Preemption(PreemptionConfig(min_rollout_fraction=0.25, rank_weighting=True), ctx, 8)
        off = Preemption(PreemptionConfig(min_rollout_fraction=0.25, rank_weighting=False), ctx, 8)
    finally:
        ctx.close()
    assert [on.rank_weight(s) for s in (8, 4, 2, 1, 0)] == [1.0, 2.0, 4.0, 4.0, 4.0]
    assert off.rank_weight(2) == 1.0


def test_two_sided_weights_equalise_env_totals_within_the_cap():
    L = torch.tensor([14, 14, 2, 2])
    w = two_sided_weights(L, 8, 0.25).double()
    assert (w * L).tolist() == pytest.approx([8.0] * 4)  # every env's total alike, mean 1 over the samples
    one = importance_weights(L, 8).double() * L
    assert one[2] < one[0]  # VER's one-sided weights leave the slow envs under-weighted
    capped = two_sided_weights(torch.tensor([8, 1]), 8, 0.25).double() * torch.tensor([8.0, 1.0])
    assert capped[1] / capped[0] == pytest.approx(0.5)  # 4 (the cap) x 1 step against 1 x 8 steps
    assert two_sided_weights(torch.tensor([0, 0]), 8, 0.25).tolist() == [1.0, 1.0]


def test_eval_summarises_each_scene():
    eps = [{"metrics": {"success": 1.0}, "scene": "a"}, {"metrics": {"success": 0.0}, "scene": "a"},
           {"metrics": {"success": 1.0}, "scene": "b"}, {"metrics": {"success": 1.0}}]
    out = summarize_scenes(eps)
    assert out["a"]["success"]["mean"] == 0.5 and out["b"]["episode_share"]["mean"] == pytest.approx(1 / 3)
    assert summarize_scenes([{"metrics": {"success": 1.0}}]) == {}


def _collector(env, mode: str, T: int = 8):
    from ddppo.config import PolicyConfig, RolloutConfig
    from ddppo.model.policy import Policy
    from ddppo.rollout.factory import episode_observers, storage_steps
    from ddppo.rollout.storage import RolloutStorage

    cfg = RolloutConfig(num_steps=T, overlap=mode == "overlap", mode="variable" if mode == "variable" else "fixed",
                        importance_weights=mode == "variable")
    policy = Policy(env.observation_space, env.action_space, PolicyConfig(hidden_size=8, rnn_type="gru"))
    storage = RolloutStorage(storage_steps(cfg), env.num_envs, env.observation_space, env.action_space,
                             policy.initial_memory(env.num_envs), torch.device("cpu"))
    return OneStorage(build_collector(cfg, env, policy, NeverStop(),
                                      observers=episode_observers(env, scene_names=("a", "b"))), storage)


@pytest.mark.parametrize("tells_next", [True, False], ids=["tells-next-scene", "cannot-tell"])
@pytest.mark.parametrize("mode", ["fixed", "overlap", "variable"])
def test_each_sample_counts_for_the_scene_of_its_episode(mode, tells_next):
    """Scenes alternate episode by episode, so an env's rollout holds steps of both scenes: each sample (and its
    weight) counts for the scene of the episode it belongs to. Where the env cannot tell the scene of an episode
    it starts, the steps of an episode still running when the rollout ends count for the env's last known scene."""
    env = AlternatingScenes([3, 5, 2, 7], tells_next=tells_next, periods=[1, 2, 1, 3] if mode == "variable" else None)
    collector = _collector(env, mode)
    first, believed = [0] * 4, env.env_scenes
    for update in (1, 2, 3):
        res = collector.collect(update)
        s = collector.storage
        counts = s.lengths.tolist() if s.lengths is not None else [s.step] * 4
        if mode == "variable":
            assert len(set(counts)) > 1  # envs of different speeds
        want = expected_scene_samples(env, first, counts, believed)
        assert res.scenes[:, 0].tolist() == [sum(want.get(n, [0])) for n in ("a", "b")], update
        w = np.ones(4) if res.rollout.env_weight is None else res.rollout.env_weight.double().numpy()
        weights = [float(np.dot(want.get(n, [0] * 4), w)) for n in ("a", "b")]
        assert res.scenes[:, 1].tolist() == pytest.approx(weights), update
        first = [f + c for f, c in zip(first, counts)]


def test_variable_mode_attribution_continues_across_a_saved_state():
    """A checkpoint taken mid-run (steps in flight received, not yet stored, one of them ending an episode) and
    loaded into a new collector: the next rollout counts every scene's samples as the uninterrupted one does."""
    env = AlternatingScenes([3, 5, 2, 7], periods=[1, 2, 1, 3])
    straight = _collector(env, "variable")
    straight.collect(1)
    first = straight.storage.lengths.tolist()
    state = straight.state_dict()
    resumed_env = AlternatingScenes([3, 5, 2, 7], periods=[1, 2, 1, 3])
    resumed = _collector(resumed_env, "variable")
    resumed.load_state_dict(state)
    scenes = next(o for o in resumed.observers if isinstance(o, SceneTally))
    assert [scenes.names[i] for i in scenes.current] == resumed_env.env_scenes  # the restored ones
    pending = [e for u in resumed.unstored for e in u.result.episodes]
    assert [(e.scene, e.next_scene) for e in pending] == [("b", "a")]  # saved with the next episode's scene
    straight_pending = [e for u in straight.unstored for e in u.result.episodes]
    assert [e.step_s for e in pending] == [e.step_s for e in straight_pending] == [0.002]  # and its step time
    a, b = straight.collect(2), resumed.collect(2)
    assert resumed.storage.lengths.tolist() == straight.storage.lengths.tolist()
    want = expected_scene_samples(env, first, straight.storage.lengths.tolist(), None)
    assert a.scenes[:, 0].tolist() == b.scenes[:, 0].tolist() == [sum(want["a"]), sum(want["b"])]
