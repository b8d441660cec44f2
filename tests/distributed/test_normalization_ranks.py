"""Observation and reward normalisation statistics are the same on every rank after real updates.

Two gloo ranks train the real `Trainer` on gymnasium's Pendulum-v1 (continuous actions, a vector observation:
`auto` turns both normalisations on) with different per-rank seeds, so each rank sees other observations and
rewards. After a few updates the observation statistics (in the policy) and the return statistics (the reward
scaler) must be bit-identical on both ranks and cover both ranks' samples: merged by the one all-gather per
update, not kept per rank (which would differ, and drift the weights apart). With normalize.update=step each rank
acts with the merged statistics plus its own steps since the last update, and the ranks agree again at every update.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from dist_harness import digest, spawn_ranks

NUM_ENVS, NUM_STEPS, UPDATES = 4, 16, 4
OVERRIDES = [f"env.name=gym:Pendulum-v1", f"env.num_envs={NUM_ENVS}", f"rollout.num_steps={NUM_STEPS}",
             "ppo.num_mini_batch=2", "ppo.epochs=2", "policy.hidden_size=16", "policy.rnn_type=none",
             "log.tensorboard=false", "checkpoint.interval_updates=1000", "preemption.enabled=false",
             f"run.total_env_steps={2 * NUM_ENVS * NUM_STEPS * UPDATES}", "dist.timeout_s=60"]


def worker(rank: int, world: int, port: int, run_dir: str, mode: str) -> dict:
    from ddppo.config import load_config
    from testutil import gloo_context
    from ddppo.train.builder import Trainer

    cfg = load_config(None, OVERRIDES + [f"run.dir={run_dir}", f"normalize.update={mode}"])
    ctx = gloo_context(rank, world, port, cfg.run.seed, cfg.dist.timeout_s, cfg.dist.startup_timeout_s)
    try:
        trainer = Trainer(cfg, ctx)
        try:
            first_obs = trainer.collector.obs["state"].clone()
            code = trainer.train()
            norm = {k: v for k, v in trainer.policy.state_dict().items() if k.startswith("obs_norm.")}
            moments = trainer.normalization.rewards.moments
            return {"code": code, "update": trainer.progress.update, "first_obs": first_obs.tolist(), "obs": digest(norm),
                    "obs_count": float(norm["obs_norm.stats.state.count"]),
                    "returns": digest(dict(moments.state_dict())), "returns_count": float(moments.count),
                    "returns_moments": [float(moments.mean), float(moments.var), float(moments.count)],
                    "model": digest(trainer.policy.state_dict())}
        finally:
            trainer.close()
    finally:
        ctx.close()


@pytest.mark.timeout(180)
@pytest.mark.parametrize("mode", ["rollout", "step"])
def test_normalisation_statistics_are_identical_on_two_ranks_after_updates(tmp_path: Path, mode: str):
    r0, r1 = spawn_ranks(worker, 2, str(tmp_path / "run"), mode, timeout_s=150)
    assert r0["code"] == r1["code"] == 0 and r0["update"] == r1["update"] == UPDATES
    assert r0["first_obs"] != r1["first_obs"], "the ranks must see different observations for this to test anything"
    assert r0["obs"] == r1["obs"], "observation statistics differ across ranks"
    assert r0["returns"] == r1["returns"], "return statistics differ across ranks"
    # both ranks' samples: every step of every update is in the return statistics; the observation statistics
    # take the last rollout after its update, so all of them too (normalize.update=step counts what the envs
    # returned: the first observation after reset and every step's, the last one included)
    steps = 2 * NUM_ENVS * NUM_STEPS * UPDATES
    assert r0["returns_count"] == steps
    assert r0["obs_count"] == (steps if mode == "rollout" else steps + 2 * NUM_ENVS)
    assert r0["model"] == r1["model"]


@pytest.mark.timeout(180)
def test_the_return_statistics_survive_a_resume_at_another_world_size(tmp_path: Path):
    """The reward scaler's statistics are the same on every rank: saved once as shared state, they are restored
    when a run saved by two ranks resumes on one (issue 44: they came back as count 0, var 1, a shock of the
    scale the critic learnt in). Each env's running return is per rank and starts afresh, as the episodes do."""
    from ddppo.config import load_config
    from testutil import trainer_in_process

    run_dir = tmp_path / "run"
    r0, _ = spawn_ranks(worker, 2, str(run_dir), "rollout", timeout_s=150)
    assert r0["returns_moments"][2] > 0
    more = f"run.total_env_steps={4 * NUM_ENVS * NUM_STEPS * UPDATES}"
    cfg = load_config(None, OVERRIDES + [f"run.dir={run_dir}", more])
    with trainer_in_process(cfg) as trainer:
        assert trainer.progress.update == UPDATES  # resumed, at world size 1
        moments = trainer.normalization.rewards.moments
        assert [float(moments.mean), float(moments.var), float(moments.count)] == r0["returns_moments"]
        assert not trainer.normalization.rewards.returns.any()  # per rank: fresh episodes, fresh returns
