"""Each scene's share of the gradient under straggler preemption (issue 44), on two real gloo ranks.

Every (rank, env) has its own parameter in a probe policy (testutil.env_value_probe), so the applied gradient
on it is that env's summed sample weight: summed per scene, the scene's real share of the gradient. The
intended share is the one without preemption: every env contributes num_steps samples, so a scene's share is
its share of the env slots. Rank 1 is cut short (fixed mode: 2 of 8 steps; variable mode: fewer steps per env);
the corrections must bring each scene back to its share, and the per-scene weights the trainer reports
(rollout/scenes.py) must be the shares the gradient really has.
"""

from __future__ import annotations

import pytest
from dist_harness import spawn_ranks

NUM_ENVS, T = 4, 8
# fixed mode: rank 0 collects its full rollout, rank 1 is preempted at the minimum (0.25 x 8 steps)
FIXED = {"lengths": {0: 8, 1: 2}, "scenes": {0: ["fast"] * 4, 1: ["slow", "slow", "slow", "fast"]}}
# variable mode: fast envs take more steps than slow ones on each rank, and rank 1 is preempted (12 of 32 steps)
VARIABLE = {"lengths": {0: [14, 14, 2, 2], 1: [6, 2, 2, 2]},
            "scenes": {0: ["fast", "fast", "slow", "slow"], 1: ["fast", "slow", "slow", "slow"]}}


class _Envs:
    def __init__(self, scenes: list[str]):
        self.num_envs, self.env_scenes, self.scenes = len(scenes), scenes, tuple(sorted(set(scenes)))


def fixed_rollout(steps: int, first_env: int):
    """A fixed-mode Rollout of NUM_ENVS envs that collected `steps` of T steps."""
    import gymnasium
    import numpy as np
    import torch

    from ddppo.rollout.storage import RolloutStorage

    space = gymnasium.spaces.Dict({"env": gymnasium.spaces.Box(0, np.inf, (), np.float32)})
    storage = RolloutStorage(T, NUM_ENVS, space, gymnasium.spaces.Discrete(2), {}, torch.device("cpu"))
    ids = torch.arange(first_env, first_env + NUM_ENVS, dtype=torch.float32)
    storage.begin({"env": ids}, torch.ones(NUM_ENVS), {})
    zeros = torch.zeros(NUM_ENVS)
    for _ in range(steps):
        storage.insert(torch.zeros(NUM_ENVS, dtype=torch.long), zeros, zeros, zeros, zeros, {"env": ids})
    return storage.rollout(zeros)


def scene_worker(rank: int, world: int, port: int, mode: str, rank_weighting: bool, form: str) -> dict:
    import torch

    from ddppo.advantage import estimator_for
    from ddppo.config import PPOConfig, PreemptionConfig
    from ddppo.ppo.update import PPOUpdater
    from ddppo.rollout.preemption import Preemption
    from ddppo.rollout.scenes import SceneTally
    from ddppo.rollout.variable import importance_weights, two_sided_weights
    from testutil import env_value_probe, epoch_gradients, gloo_context, variable_rollout

    case = FIXED if mode == "fixed" else VARIABLE
    ctx = gloo_context(rank, world, port)
    try:
        ppo = PPOConfig(epochs=1, num_mini_batch=2, normalize_advantage=False, clip_value_loss=False,
                        value_coef=1.0, entropy_coef=0.0, max_grad_norm=0.0)
        weighting = "per_minibatch" if mode == "fixed" else "per_sample"
        updater = PPOUpdater(env_value_probe(world * NUM_ENVS), ppo, ctx, sample_weighting=weighting,
                             advantage=estimator_for(ppo, NUM_ENVS))
        preemption = Preemption(PreemptionConfig(min_rollout_fraction=0.25, rank_weighting=rank_weighting), ctx, T)
        lengths = case["lengths"][rank]
        if mode == "fixed":
            rollout = fixed_rollout(lengths, rank * NUM_ENVS)
            per_env = [lengths] * NUM_ENVS
        else:
            rollout = variable_rollout(lengths, T, first_env=rank * NUM_ENVS)
            L = torch.tensor(lengths)
            rollout = rollout.replace(env_weight=(two_sided_weights(L, T, 0.25) if form == "two_sided"
                                                  else importance_weights(L, T)))
            per_env = lengths
        rollout = rollout.replace(rank_weight=preemption.rank_weight(sum(per_env) / NUM_ENVS))
        tally = SceneTally(("fast", "slow"), _Envs(case["scenes"][rank]))
        table = tally.zeros()
        weight = None if rollout.env_weight is None else rollout.env_weight.double().numpy()
        tally.add_samples(table, rollout.valid.double().numpy(), weight, rollout.rank_weight)
        grads = epoch_gradients(updater, rollout, seed=rank)[0].tolist()
        return {"grads": grads, "reported": table[:, 1].tolist()}
    finally:
        ctx.close()


def _shares(ranks: list[dict], case: dict) -> tuple[dict, dict]:
    """(the gradient's per-scene shares, the reported ones), both ranks' envs together."""
    grads = ranks[0]["grads"]
    scenes = [s for r in (0, 1) for s in case["scenes"][r]]
    total = sum(grads)
    measured = {name: sum(g for g, s in zip(grads, scenes) if s == name) / total for name in ("fast", "slow")}
    reported = [sum(r["reported"][i] for r in ranks) for i in range(2)]
    return measured, {"fast": reported[0] / sum(reported), "slow": reported[1] / sum(reported)}


def _intended(case: dict) -> float:
    scenes = [s for r in (0, 1) for s in case["scenes"][r]]
    return scenes.count("slow") / len(scenes)


@pytest.mark.timeout(180)
def test_rank_weighting_gives_a_preempted_ranks_scenes_their_share():
    ranks = spawn_ranks(scene_worker, 2, "fixed", True, "one_sided")
    assert ranks[0]["grads"] == ranks[1]["grads"]
    measured, reported = _shares(ranks, FIXED)
    assert measured["slow"] == pytest.approx(_intended(FIXED), abs=1e-6)  # 3 of 8 env slots
    assert reported["slow"] == pytest.approx(measured["slow"], abs=1e-6)


@pytest.mark.timeout(180)
def test_without_rank_weighting_the_preempted_scene_is_under_weighted():
    """The same rollouts with exact sample-count weighting alone: the slow scene gets 6 of 40 samples' weight."""
    measured, reported = _shares(spawn_ranks(scene_worker, 2, "fixed", False, "one_sided"), FIXED)
    assert measured["slow"] == pytest.approx(6 / 40, abs=1e-6)
    assert reported["slow"] == pytest.approx(measured["slow"], abs=1e-6)


@pytest.mark.timeout(180)
def test_two_sided_weights_with_rank_weighting_give_every_scene_its_share_in_variable_mode():
    ranks = spawn_ranks(scene_worker, 2, "variable", True, "two_sided")
    assert ranks[0]["grads"] == ranks[1]["grads"]
    measured, reported = _shares(ranks, VARIABLE)
    assert measured["slow"] == pytest.approx(_intended(VARIABLE), abs=1e-6)
    assert reported["slow"] == pytest.approx(measured["slow"], abs=1e-6)
    g = ranks[0]["grads"]  # every env of both ranks alike
    assert max(g) == pytest.approx(min(g), rel=1e-5)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("rank_weighting,form", [(False, "one_sided"), (True, "one_sided"), (False, "two_sided")])
def test_each_variable_correction_alone_leaves_the_slow_scene_under_weighted(rank_weighting, form):
    measured, reported = _shares(spawn_ranks(scene_worker, 2, "variable", rank_weighting, form), VARIABLE)
    assert measured["slow"] < _intended(VARIABLE) - 0.04  # 0.568 (two-sided alone) or less, not 0.625
    assert reported["slow"] == pytest.approx(measured["slow"], abs=1e-6)
