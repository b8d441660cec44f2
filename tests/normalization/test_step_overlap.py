"""normalize.update=step with rollout.overlap (fixed mode, two halves of the env workers in turn): every
observation the envs return is counted and normalised on the acting path, as in lockstep (issue 44: the worker
half skipped the host normaliser, so the policy acted and learnt on raw observations while its own normaliser was
off, and only the observations after reset were counted)."""

from __future__ import annotations

import pytest

from testutil import trainer_in_process

NUM_ENVS, NUM_STEPS = 4, 8
SETTINGS = {"normalize.obs": "on", "normalize.update": "step", "env.num_envs": NUM_ENVS, "env.num_workers": 2,
            "rollout.num_steps": NUM_STEPS, "ppo.num_mini_batch": 2, "log.tensorboard": "false",
            "run.total_env_steps": NUM_ENVS * NUM_STEPS, "preemption.enabled": "false"}


@pytest.mark.parametrize("overlap", ["false", "true"])
def test_every_observation_is_counted_with_and_without_overlap(tmp_path, tiny_config, overlap):
    cfg = tiny_config(tmp_path / "run", **SETTINGS, **{"rollout.overlap": overlap})
    with trainer_in_process(cfg) as trainer:
        assert trainer.train() == 0 and trainer.progress.update == 1
        count = float(trainer.policy.obs_norm.stats["depth"].count)
        stored = trainer.learning.storage.obs["depth"][1:NUM_STEPS + 1]
    assert count == NUM_ENVS * (NUM_STEPS + 1)  # the first observation after reset and every step's
    assert stored.abs().max() <= cfg.normalize.clip_obs and stored.mean().abs() < 1.0  # stored normalised
