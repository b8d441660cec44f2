"""A transformer policy resumes bit for bit: 4 updates in one go == 2 updates, then a resume to 4. The KV cache
carried between rollouts is in the checkpoint (the collector's memory). Fixed rollout mode: variable mode's batches
depend on timing (run.deterministic's note)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]
STEPS = 8 * 16  # env steps per update
ARGS = ["policy.rnn_type=transformer", "policy.transformer.context=12", "env.num_envs=8", "rollout.num_steps=16",
        "ppo.num_mini_batch=2", "ppo.epochs=2", "ppo.lr_schedule=constant", "env.gridnav.num_maps=8",
        "env.gridnav.max_episode_steps=20", "log.tensorboard=false", "checkpoint.interval_updates=1000",
        "run.seed=7", "run.deterministic=true"]


def _train(run: Path, updates: int, *extra: str) -> None:
    cmd = [sys.executable, "-m", "ddppo", "train", str(REPO / "configs" / "gridnav.yaml"), f"run.dir={run}", *ARGS,
           f"run.total_env_steps={updates * STEPS}", *extra]
    res = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]


def _metrics(run: Path) -> list[dict]:
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    timing = ("perf/", "preempt/straggler_wait", "fps", "wall_time")
    return [{k: v for k, v in r.items() if not k.startswith(timing)} for r in rows]


def _final(run: Path) -> dict:
    return torch.load(sorted((run / "checkpoints").glob("ckpt-*.pt"))[-1], weights_only=True)


def test_a_transformer_run_cut_and_resumed_is_bit_identical(tmp_path):
    _train(tmp_path / "straight", 4)
    _train(tmp_path / "split", 2)
    _train(tmp_path / "split", 4)
    assert _metrics(tmp_path / "straight") == _metrics(tmp_path / "split")
    a, b = _final(tmp_path / "straight"), _final(tmp_path / "split")
    assert a["counters"]["update"] == b["counters"]["update"] == 4
    for key, value in a["model"].items():
        assert torch.equal(value, b["model"][key]), key
