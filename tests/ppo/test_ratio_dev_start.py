"""loss/ratio_dev_start: the mean |ratio - 1| of the update's first minibatch, before any optimiser step, measures
the numerical gap between the log-probs stored when acting and those of the learning pass."""

from __future__ import annotations

import json

import torch

from ddppo.config import load_config
from ddppo.ppo.update import _Stats


def test_the_start_keys_come_from_the_first_minibatch_only():
    from ddppo.ppo.loss import SCALAR_NAMES

    acc = _Stats()
    first, later = torch.arange(len(SCALAR_NAMES), dtype=torch.float32), torch.full((len(SCALAR_NAMES),), 99.0)
    acc.first = (first, torch.tensor(3.0))
    acc.rows = [(0, first), (0, later), (1, later)]
    stats = acc.result()
    names = list(SCALAR_NAMES)
    assert stats["ratio_dev_start"] == names.index("ratio_dev")
    assert stats["clip_fraction_start"] == names.index("clip_fraction")
    assert stats["ratio_dev"] == (names.index("ratio_dev") + 99 + 99) / 3
    acc.first = (first, torch.tensor(0.0))  # no local sample in the first minibatch: no figure from this rank
    assert "ratio_dev_start" not in acc.result()


def _start_devs(tmp_path, acting: str, learning: str) -> list[float]:
    from testutil import trainer_in_process

    cfg = load_config("configs/gridnav.yaml", [
        f"run.dir={tmp_path / (acting + learning)}", "env.num_envs=4", "rollout.num_steps=16",
        "ppo.num_mini_batch=2", "policy.hidden_size=32", "policy.rnn_type=gru", "run.torch_threads=1",
        "dist.device=cpu", "log.tensorboard=false", "run.total_env_steps=128", f"run.precision={acting}"])
    with trainer_in_process(cfg) as trainer:
        trainer.updater.precision = learning  # learning in another precision than acting: the gap to measure
        assert trainer.train() == 0
    rows = [json.loads(line) for line in (tmp_path / (acting + learning) / "metrics.jsonl").read_text().splitlines()]
    return [r["loss/ratio_dev_start"] for r in rows if "loss/ratio_dev_start" in r]


def test_acting_and_learning_in_fp32_agree_before_the_first_step(tmp_path):
    devs = _start_devs(tmp_path, "fp32", "fp32")
    assert len(devs) == 2 and max(devs) < 1e-6, devs


def test_bf16_acting_with_fp32_learning_shows_the_gap(tmp_path):
    devs = _start_devs(tmp_path, "bf16", "fp32")  # bf16 has 8 bits of mantissa: log-probs differ by ~1e-3
    assert len(devs) == 2 and min(devs) > 1e-4, devs
