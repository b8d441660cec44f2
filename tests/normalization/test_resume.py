"""Normalisation statistics are saved in checkpoints and restored on resume, bit for bit: N updates in one go
== N/2 updates, a new Trainer resuming from the checkpoint, N/2 more (gridnav restores its episodes, so the
whole run is deterministic; normalize.obs/reward are on explicitly, `auto` leaves them off for gridnav), with the
statistics of the acting path changing once per update (normalize.update=rollout) or after every step (step: the
saved observation is already normalised and the resumed rollout starts an empty batch, as the straight run's)."""

from __future__ import annotations

import pytest
import torch

from ddppo import checkpoint as ckpt
from testutil import trainer_in_process

UPDATES = 6
NORMALIZE = {"normalize.obs": "on", "normalize.reward": "on", "ppo.lr_schedule": "constant",
             "log.tensorboard": "false", "checkpoint.interval_updates": 1000, "run.torch_threads": 1}


def run(tiny_config, run_dir, updates: int, mode: str) -> None:
    cfg = tiny_config(run_dir, **NORMALIZE, **{"run.total_env_steps": updates * 4 * 32, "normalize.update": mode})
    with trainer_in_process(cfg) as trainer:
        assert trainer.normalization.rewards is not None and trainer.policy.obs_norm is not None
        assert trainer.train() == 0


def final(run_dir) -> dict:
    return ckpt.load(ckpt.list_checkpoints(str(run_dir))[-1])


@pytest.mark.parametrize("mode", ["rollout", "step"])
def test_normalisation_statistics_resume_bit_exactly(tmp_path, tiny_config, mode):
    run(tiny_config, tmp_path / "straight", UPDATES, mode)
    run(tiny_config, tmp_path / "split", UPDATES // 2, mode)
    half = final(tmp_path / "split")
    assert float(half["model"]["obs_norm.stats.depth.count"]) > 0
    assert float(half["reward_scale"]["count"]) > 0  # shared: the same on every rank, written once
    run(tiny_config, tmp_path / "split", UPDATES, mode)
    a, b = final(tmp_path / "straight"), final(tmp_path / "split")
    assert a["counters"]["update"] == b["counters"]["update"] == UPDATES
    norm_keys = [k for k in a["model"] if k.startswith("obs_norm.")]
    assert norm_keys
    for key, value in a["model"].items():  # the statistics, and the weights trained on what they scaled
        assert torch.equal(value, b["model"][key]), key
    for key in ("mean", "var", "count"):
        assert torch.equal(a["reward_scale"][key], b["reward_scale"][key]), key
    assert torch.equal(a["rank_states"][0]["reward_returns"], b["rank_states"][0]["reward_returns"])
