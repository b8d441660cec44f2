"""beta rises when training pushes the policy away from the reference, and it is checkpointed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]
BASE = ["env.name=synthetic", "env.num_envs=4", "rollout.num_steps=16", "ppo.num_mini_batch=1",
        "log.tensorboard=false"]


def _train(cfg: Path, run: Path, *extra: str) -> None:
    res = subprocess.run([sys.executable, "-m", "ddppo", "train", str(cfg), f"run.dir={run}", *BASE, *extra],
                         cwd=REPO, capture_output=True, text=True, timeout=180)
    assert res.returncode == 0, res.stderr[-3000:]


def test_beta_rises_when_policy_leaves_reference(tmp_path):
    cfg = tmp_path / "empty.yaml"
    cfg.write_text("{}\n")
    _train(cfg, tmp_path / "ref", "run.total_env_steps=128")
    ref = sorted((tmp_path / "ref" / "checkpoints").glob("ckpt-*.pt"))[-1]
    run = tmp_path / "tuned"
    _train(cfg, run, "run.total_env_steps=640", f"checkpoint.path={ref}", f"ppo.kl_ref.checkpoint={ref}",
           "ppo.kl_ref.beta=0.01", "ppo.kl_ref.target_kl=1e-6", "ppo.lr=1e-2", "ppo.epochs=8")
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert rows[0]["loss/kl_beta"] == 0.01
    assert rows[-1]["loss/kl_ref"] > 1e-6 * 1.5  # the policy did move away
    assert rows[-1]["loss/kl_beta"] > rows[0]["loss/kl_beta"]  # ... and beta rose in response
    saved = torch.load(sorted((run / "checkpoints").glob("ckpt-*.pt"))[-1], weights_only=True)
    assert saved["counters"]["kl_beta"] > 0.01
