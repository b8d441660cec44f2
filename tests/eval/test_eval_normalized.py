"""`ddppo eval` applies the observation statistics a checkpoint was trained with, frozen.

A Pendulum-v1 run (continuous control: normalize.obs=auto is on) trains two updates; the evaluator loads its
checkpoint with the statistics, plays with them (an edited copy whose mean is shifted plays other episodes) and
leaves them as they were saved (evaluation never updates them); also when training normalised on the acting path
(normalize.update=step), where the trained policy itself skipped its normaliser."""

from __future__ import annotations

import pytest
import torch

from ddppo import checkpoint as ckpt
from ddppo.config import load_config
from ddppo.eval.command import eval_settings
from ddppo.eval.loading import resolve_config
from ddppo.eval.runner import Evaluator
from testutil import gloo_context, trainer_in_process

TRAIN = ["env.name=gym:Pendulum-v1", "env.num_envs=2", "rollout.num_steps=16", "ppo.num_mini_batch=1",
         "ppo.epochs=1", "policy.hidden_size=16", "policy.rnn_type=none", "run.total_env_steps=64",
         "log.tensorboard=false"]


def evaluate(run_dir, checkpoint, out_dir) -> tuple[dict, dict]:
    cfg = resolve_config(str(run_dir), ["eval.num_episodes=1", "env.gym.max_episode_steps=50"])
    ctx = gloo_context(seed=cfg.run.seed)
    try:
        ev = Evaluator(cfg, ctx, out_dir, eval_settings(cfg))
        try:
            result = ev.evaluate(checkpoint, 0)
            return result, {k: v.clone() for k, v in ev.policy.state_dict().items() if k.startswith("obs_norm.")}
        finally:
            ev.close()
    finally:
        ctx.close()


@pytest.mark.parametrize("mode", ["rollout", "step"])
def test_eval_applies_the_checkpoints_observation_statistics_frozen(tmp_path, mode):
    run_dir = tmp_path / "run"
    with trainer_in_process(load_config(None, TRAIN + [f"run.dir={run_dir}", f"normalize.update={mode}"])) as trainer:
        assert trainer.train() == 0
    path = ckpt.list_checkpoints(str(run_dir))[-1]
    saved = ckpt.load(path)["model"]
    assert float(saved["obs_norm.stats.state.count"]) > 0

    result, used = evaluate(run_dir, path, tmp_path / "eval")
    assert used and all(torch.equal(v, saved[k]) for k, v in used.items())  # loaded, and not updated by eval

    shifted = dict(ckpt.load(path))
    shifted["model"] = dict(saved)
    shifted["model"]["obs_norm.stats.state.mean"] = saved["obs_norm.stats.state.mean"] + 5.0
    other = tmp_path / "shifted.pt"
    torch.save(ckpt.to_storable(shifted), other)
    result_shifted, _ = evaluate(run_dir, other, tmp_path / "eval2")
    returns = [[e["metrics"]["return"] for e in r["episodes"]] for r in (result, result_shifted)]
    assert returns[0] != returns[1]  # the statistics are applied
