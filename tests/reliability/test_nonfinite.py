"""Non-finite rewards -> non-finite gradients: the update is skipped on every rank, counted and logged;
after `ppo.max_skipped_updates` in a row the run stops non-zero with a message; no checkpoint holds a
non-finite parameter or optimiser value.

The fault is injected with the synthetic env's `nan_reward_at_step` / `nan_reward_steps` /
`nan_reward_ranks`: NaN rewards on one rank make that rank's advantages, loss and gradients NaN, and the
gradient all-reduce carries the NaN to every rank.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pytest

from rel_util import EMPTY_CONFIG, dist_harness, non_finite_paths, synthetic_overrides, tensors_equal

STEPS = 8  # rollout.num_steps; batched env steps are counted from 1, so update u starts at step 8 (u - 1) + 1
OPT_STEPS = 2 * 2  # ppo.epochs x ppo.num_mini_batch
PER_UPDATE = 2 * 4 * STEPS  # env steps of one update on 2 ranks

# Episode statistics record the NaN reward the environment produced (the env's running return, and the
# windowed episode sums behind train/reward); they are diagnostics, never learned state.
EPISODE_STAT_PATHS = re.compile(r"^/rank_states/\d+/collector/env/ret$|^/counters/window/\d+/0$")


def _first_step(update: int) -> int:
    return STEPS * (update - 1) + 1


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.levelname} {record.getMessage()}")


def nonfinite_worker(rank: int, world: int, port: int, run_dir: str) -> dict:
    """Two phases in one process group: (A) NaN rewards on rank 1 in update 2 only, 3 updates;
    (B) resume, NaN rewards on rank 1 from update 5 on, ppo.max_skipped_updates=2 -> stop at update 6."""
    from ddppo.config import load_config
    from testutil import gloo_context
    from ddppo.train.builder import Trainer

    records = _Records()
    logger = logging.getLogger("ddppo")
    logger.addHandler(records)
    logger.setLevel(logging.INFO)
    common = {"checkpoint.interval_updates": 1, "checkpoint.keep_last": 20, "ppo.max_skipped_updates": 2,
              "env.synthetic.nan_reward_ranks": "[1]", "dist.timeout_s": 60}
    phases = {
        "A": {"run.total_env_steps": 3 * PER_UPDATE, "env.synthetic.nan_reward_at_step": _first_step(2),
              "env.synthetic.nan_reward_steps": 1},
        "B": {"run.total_env_steps": 20 * PER_UPDATE, "env.synthetic.nan_reward_at_step": _first_step(5),
              "env.synthetic.nan_reward_steps": 1000},
    }
    ctx = gloo_context(rank, world, port)
    out: dict = {}
    try:
        for name, overrides in phases.items():
            cfg = load_config(EMPTY_CONFIG, synthetic_overrides(Path(run_dir), **common, **overrides))
            trainer = Trainer(cfg, ctx)
            try:
                rc = trainer.train()
            finally:
                trainer.close()
            opt = trainer.updater.optimizer.state_dict()["state"]
            out[name] = {"rc": rc, "update": trainer.progress.update,
                         "digest": dist_harness.digest(trainer.policy.state_dict()),
                         "adam_steps": sorted({float(s["step"]) for s in opt.values()})}
    finally:
        ctx.close()
        logger.removeHandler(records)
    out["log"] = records.lines
    return out


@pytest.mark.timeout(240)
def test_nan_on_one_rank_skips_the_update_everywhere_then_stops_after_max_skipped(tmp_path: Path):
    from ddppo import checkpoint as ckpt

    run = tmp_path / "run"
    ranks = dist_harness.spawn_ranks(nonfinite_worker, 2, str(run), timeout_s=200)
    r0, r1 = ranks
    log = "\n".join(r0["log"])

    # phase A: update 2 skipped on both ranks (identical parameters, same Adam step count), run goes on
    assert r0["A"]["rc"] == r1["A"]["rc"] == 0, log
    assert r0["A"]["digest"] == r1["A"]["digest"], "parameters diverged: the skip was not taken on every rank"
    assert r0["A"]["adam_steps"] == r1["A"]["adam_steps"] == [2 * OPT_STEPS]  # updates 1 and 3 stepped
    # phase B: updates 5 and 6 skipped -> stop at update 6, non-zero, on both ranks
    assert (r0["B"]["rc"], r0["B"]["update"]) == (r1["B"]["rc"], r1["B"]["update"]) == (1, 6), log
    assert r0["B"]["digest"] == r1["B"]["digest"]
    assert r0["B"]["adam_steps"] == r1["B"]["adam_steps"] == [3 * OPT_STEPS]  # updates 1, 3, 4
    assert re.search(r"stopping at update 6: 2 consecutive updates had non-finite gradients "
                     r"\(ppo.max_skipped_updates=2\); lower ppo.lr or check the environment's rewards", log), log
    assert any(ln.startswith("ERROR stopping at update 6") for ln in r1["log"]), "rank 1 says why it stops too"

    # counted: loss/skipped_steps per update; logged: one warning per skipped update
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["update"] for r in rows] == [1, 2, 3, 4, 5, 6]
    assert [r["loss/skipped_steps"] for r in rows] == [0, OPT_STEPS, 0, 0, OPT_STEPS, OPT_STEPS]
    warned = [int(m.group(1)) for m in re.finditer(r"WARNING update (\d+): \d+ of \d+ optimi[sz]er steps skipped",
                                                   log)]
    assert warned == [2, 5, 6], log

    # checkpoints: one per update; a skipped update leaves parameters and optimiser exactly as they were
    saved = {u: ckpt.load(run / "checkpoints" / f"ckpt-{u}.pt") for u in range(1, 7)}
    for u, data in saved.items():
        bad = [p for p in non_finite_paths(data) if not EPISODE_STAT_PATHS.match(p)]
        assert bad == [], f"ckpt-{u}.pt holds non-finite values at {bad}"
        assert data["counters"]["skipped_in_a_row"] == {2: 1, 5: 1, 6: 2}.get(u, 0)
    for skipped, before in ((2, 1), (5, 4), (6, 4)):
        assert tensors_equal(saved[skipped]["model"], saved[before]["model"])
        assert str(saved[skipped]["optimizer"]) == str(saved[before]["optimizer"])
    assert not tensors_equal(saved[3]["model"], saved[2]["model"])  # training went on after the skip


@pytest.mark.timeout(180)
def test_cli_exits_nonzero_with_one_clear_message_after_max_skipped_updates(tmp_path: Path, cli):
    run = tmp_path / "run"
    res = cli("train", str(EMPTY_CONFIG), *synthetic_overrides(
        run, **{"run.total_env_steps": 4 * 8 * 50, "ppo.max_skipped_updates": 3,
                "env.synthetic.nan_reward_at_step": _first_step(2), "env.synthetic.nan_reward_steps": 10**6}),
        timeout=150)
    assert res.returncode == 1, res
    assert "Traceback" not in res.stderr, res
    errors = [ln for ln in res.stderr.splitlines() if " ERROR " in ln]
    assert len(errors) == 1 and "stopping at update 4: 3 consecutive updates had non-finite gradients" in errors[0], res
    from ddppo import checkpoint as ckpt

    (path,) = ckpt.list_checkpoints(run)  # the checkpoint at the stop: the parameters of update 1
    data = ckpt.load(path)
    assert path.name == "ckpt-4.pt" and data["counters"]["skipped_in_a_row"] == 3
    assert [p for p in non_finite_paths(data) if not EPISODE_STAT_PATHS.match(p)] == []
