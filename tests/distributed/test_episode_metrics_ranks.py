"""An env's own scalar episode metric reaches train/<name> on every rank, aggregated over all ranks.

Two gloo ranks run the real Trainer on the synthetic env, wrapped so that every finished episode also reports
`custom_score` (2.0 on rank 0, 4.0 on rank 1) and a list-valued `trace` (not a scalar: skipped). Rank 1 also
declares `rank1_only`, which rank 0 does not: the ranks aggregate the union of their declared names. Each rank
records the scalars it computed every update: both must hold the same train/custom_score, the episode-weighted mean
of both ranks' values (not its own), and rank 0's metrics.jsonl the same.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from dist_harness import read_metrics, spawn_ranks, synthetic

OVERRIDES = synthetic(num_envs=2, num_steps=16, **{"run.total_env_steps": 256, "log.window": 1000,
                                                   "dist.timeout_s": 60, "dist.backend": "gloo", "dist.device": "cpu"})


class Scored:
    """A VecEnv wrapper adding `custom_score` (and a non-scalar `trace`) to every finished episode."""

    def __init__(self, env, score: float, declared: tuple):
        self.env, self.score, self.episodes = env, score, 0
        self.episode_metrics = declared

    def __getattr__(self, name):
        return getattr(self.env, name)

    def step(self, actions):
        res = self.env.step(actions)
        for ep in res.episodes:
            ep.metrics.update(custom_score=self.score, trace=[1.0, 2.0])
        self.episodes += len(res.episodes)
        return res


def scored_worker(rank: int, world: int, port: int, run_dir: str) -> dict:
    import ddppo.train.builder as trainer_module
    from ddppo.config import load_config
    from testutil import gloo_context

    made = []
    plain = trainer_module.make_vec_env

    def make(name, options, spec):
        made.append(Scored(plain(name, options, spec), 2.0 + 2.0 * rank,
                           ("custom_score", "trace") + (("rank1_only",) if rank == 1 else ())))
        return made[-1]

    trainer_module.make_vec_env = make
    cfg = load_config(None, OVERRIDES + [f"run.dir={run_dir}"])
    ctx = gloo_context(rank, world, port, cfg.run.seed, cfg.dist.timeout_s, cfg.dist.startup_timeout_s)
    try:
        trainer = trainer_module.Trainer(cfg, ctx)
        seen = []
        write = trainer.writer.write
        trainer.writer.write = lambda update, steps, scalars: (seen.append(dict(scalars)), write(update, steps,
                                                                                                  scalars))
        try:
            code = trainer.train()
            return {"code": code, "names": getattr(trainer, "metric_names", None), "episodes": made[0].episodes, "last": seen[-1]}
        finally:
            trainer.close()
    finally:
        ctx.close()


@pytest.mark.timeout(180)
def test_a_custom_episode_metric_is_aggregated_over_ranks_into_train_scalars(tmp_path: Path):
    results = spawn_ranks(scored_worker, 2, str(tmp_path / "run"), timeout_s=150)
    assert [r["code"] for r in results] == [0, 0]
    n0, n1 = results[0]["episodes"], results[1]["episodes"]
    assert n0 > 0 and n1 > 0
    expected = (2.0 * n0 + 4.0 * n1) / (n0 + n1)  # every update is in the window (log.window=1000)
    for r in results:
        assert r["last"]["train/custom_score"] == pytest.approx(expected)
        assert "train/trace" not in r["last"] and "train/rank1_only" not in r["last"]  # never a number / reported
    assert read_metrics(tmp_path / "run")[-1]["train/custom_score"] == pytest.approx(expected)
    names = results[0]["names"]
    assert names == results[1]["names"]  # agreed: the union, EPISODE_KEYS first, then sorted
    assert names[-3:] == ("custom_score", "rank1_only", "trace")
