"""World size changed on resume -- decided: allowed. A 1-rank run resumed by `torchrun` with 2 ranks
restores parameters, optimiser state and counters from the checkpoint; environments (and their RNGs)
start afresh from per-rank seeds, because one rank's environment state cannot be split over two. The
log says so; counters, metrics and checkpoints continue without a gap."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rel_util import EMPTY_CONFIG, describe, dist_harness, run_cli, synthetic_overrides

ENV_STEPS_1 = 4 * 8  # per update with 1 rank
ENV_STEPS_2 = 2 * 4 * 8  # per update with 2 ranks
LR = 2.5e-4


@pytest.mark.timeout(300)
def test_one_rank_run_resumed_with_two_ranks(tmp_path: Path):
    from ddppo import checkpoint as ckpt

    run = tmp_path / "run"
    common = {"checkpoint.interval_updates": 1, "checkpoint.keep_last": 10, "ppo.lr": LR, "dist.timeout_s": 60}
    res = run_cli("train", str(EMPTY_CONFIG), *synthetic_overrides(
        run, **common, **{"run.total_env_steps": 2 * ENV_STEPS_1}))
    assert res.returncode == 0, describe(res)
    total = 2 * ENV_STEPS_1 + 2 * ENV_STEPS_2
    overrides = synthetic_overrides(run, **common, **{"run.total_env_steps": total})
    overrides = [o for o in overrides if not o.startswith("run.dir=")]
    with dist_harness.start_torchrun(2, run, overrides, tmp_path) as job:
        codes = job.wait(timeout_s=240)
        log = job.log_text()
    assert codes == [0], log
    assert "world size changed from 1 to 2: parameters, optimiser and counters restored; environments and " \
           "RNGs start afresh" in log, log
    assert "ckpt-2.pt at update 2 (64 env steps)" in log, log

    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["update"] for r in rows] == [1, 2, 3, 4]
    assert [r["env_steps"] for r in rows] == [32, 64, 128, 192]
    saved = {u: ckpt.load(run / "checkpoints" / f"ckpt-{u}.pt") for u in (2, 3, 4)}
    assert (saved[2]["world_size"], saved[4]["world_size"]) == (1, 2)
    assert len(saved[4]["rank_states"]) == 2
    assert saved[4]["counters"]["update"] == 4 and saved[4]["counters"]["env_steps"] == total
    # optimiser restored: Adam's step count continues (2 updates x 4 optimiser steps before, 2 x 4 after)
    steps = {u: {float(s["step"]) for s in d["optimizer"]["state"].values()} for u, d in saved.items()}
    assert steps == {2: {8.0}, 3: {12.0}, 4: {16.0}}
    # parameters restored: one update (4 Adam steps of at most ~lr each) away from ckpt-2, not a fresh init
    drift = max(float((saved[3]["model"][k] - saved[2]["model"][k]).abs().max()) for k in saved[2]["model"])
    assert 0 < drift < 10 * 4 * LR, drift
    # environments afresh: each rank's synthetic env has stepped 2 updates x 8 steps since it was built
    assert [s["collector"]["env"]["total_steps"] for s in saved[4]["rank_states"]] == [16, 16]
