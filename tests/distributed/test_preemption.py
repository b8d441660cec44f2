"""Straggler preemption with real ranks.

1. `torchrun` with 3 ranks on the sleep-based synthetic env, rank 2 much slower:
   with the default sync_frac=0.6 (2 of 3 ranks), rank 2 is preempted every
   update, never before min_rollout_fraction, and the two fast ranks always
   collect their full rollout (read from metrics.jsonl preempt/*).
2. The done-counter of one update never leaks into the next, nor into a restarted
   attempt that redoes the same update: two ranks drive `Preemption` directly
   through `init_distributed` against a store hosted outside the ranks (as
   torchrun's agent does, surviving restarts), for two attempts.
"""

from __future__ import annotations

import datetime
import time
from pathlib import Path

import pytest
from dist_harness import free_port, spawn_ranks, start_torchrun, synthetic

NUM_STEPS, MIN_FRACTION = 16, 0.25


@pytest.mark.timeout(240)
def test_slow_rank_is_preempted_after_the_minimum_and_fast_ranks_collect_in_full(tmp_path: Path):
    updates = 4  # env steps per update when rank 2 stops at the minimum: 2 envs x (16 + 16 + 4)
    overrides = synthetic(num_envs=2, num_steps=NUM_STEPS, **{
        # fast ranks: 16 steps in ~0.1 s; rank 2 needs 4 steps (0.8 s) before it may stop, 3.2 s for all 16
        "env.synthetic.step_sleep_s": 0.005, "env.synthetic.slow_ranks": "[2]", "env.synthetic.slow_factor": 40,
        "preemption.min_rollout_fraction": MIN_FRACTION,  # sync_frac: the default 0.6 -> 2 of 3 ranks
        "run.total_env_steps": updates * 2 * (2 * NUM_STEPS + 4), "dist.timeout_s": 60})
    with start_torchrun(3, tmp_path / "run", overrides, tmp_path) as job:
        codes = job.wait(timeout_s=200)
        assert codes == [0], job.log_text()
        rows = job.metrics()
    assert len(rows) >= 2, job.log_text()
    for row in rows:
        slow = row["preempt/steps_fraction_min"]
        fast_sum = 3 * row["preempt/steps_fraction_mean"] - slow  # the two fast ranks together
        where = f"update {row['update']}: {row}"
        assert row["preempt/num_preempted"] == 1, where
        assert MIN_FRACTION <= slow < 1.0, where  # never before the minimum
        assert fast_sum == pytest.approx(2.0), where  # both fast ranks collected all their steps
    steps = [row["env_steps"] for row in rows]
    assert all(b > a for a, b in zip(steps, steps[1:]))
    # where between the minimum and the full rollout rank 2 stops depends on how loaded the machine is (how long
    # the fast ranks take): not asserted. The 40x margin keeps the rank-2-is-preempted assert independent of load.


# ----------------------------------------------------- counter namespacing
def counter_worker(rank: int, world: int, _port: int, store_port: int) -> list[str]:
    """Drives Preemption as the collector does: begin(update), should_stop(update, t) before each step,
    finished() at the end."""
    import torch.distributed as dist

    from ddppo.config import PreemptionConfig
    from testutil import gloo_context
    from ddppo.rollout.preemption import Preemption

    problems: list[str] = []
    # threshold: 1 of 2; a new counter read as soon as the last answered (the interval is tested on its own)
    cfg = PreemptionConfig(enabled=True, sync_frac=0.5, min_rollout_fraction=0.25, poll_interval_s=0.0)
    # attempt 1 redoes updates 3 and 4 (a restart from a checkpoint); in it rank 0 is the straggler
    for attempt, updates, finisher in ((0, range(1, 5), 0), (1, range(3, 7), 1)):
        # no attempt number is passed: the ranks agree on a fresh generation in the store at every start
        ctx = gloo_context(rank, world, store_port, timeout_s=30, agent_store=True)
        pre = Preemption(cfg, ctx, num_steps=8)
        assert pre.active and pre.min_steps == 2 and pre.threshold == 1
        where = f"attempt {attempt}"
        for update in updates:
            ctx.rollout_barrier(0)
            pre.begin(update)  # as every collector does when its rollout starts
            if pre.should_stop(update, 0):  # every rank starts its rollout
                problems.append(f"{where} update {update}: stopped at step 0")
            ctx.rollout_barrier(0)
            if rank != finisher and pre.should_stop(update, 7):
                problems.append(f"{where} update {update}: stopped before any rank finished (an old count leaked)")
            ctx.rollout_barrier(0)
            if rank == finisher:
                pre.finished(update)  # collected in full
            ctx.rollout_barrier(0)
            if rank != finisher:
                if pre.should_stop(update, 1):
                    problems.append(f"{where} update {update}: stopped before the minimum")
                # the read never holds a step: the stop comes at a step after the store has answered
                if not any(pre.should_stop(update, t) or time.sleep(0.05) for t in range(2, 8)):
                    problems.append(f"{where} update {update}: not stopped after the other rank finished")
                count = ctx.add_to_counter(pre.key(update), 0)
                if count != 1:
                    problems.append(f"{where} update {update}: counter {count} != 1")
        ctx.rollout_barrier(0)
        ctx.close()
        assert not dist.is_initialized()
    return problems


@pytest.mark.timeout(180)
def test_preemption_counter_never_leaks_across_updates_or_restarts():
    import torch.distributed as dist

    port = free_port()
    # the launcher's store (torchrun's agent): it outlives the attempts, like across --max-restarts
    store = dist.TCPStore("127.0.0.1", port, 2, True, timeout=datetime.timedelta(seconds=60),
                          wait_for_workers=False)
    problems = spawn_ranks(counter_worker, 2, port, timeout_s=150)
    assert problems == [[], []]
    # each attempt counted under its own generation's namespace ("ddppo/<generation>/", 1 then 2: rank 0 of
    # each start takes the next from the store): attempt 0's counts of updates 3 and 4 are still there, yet
    # attempt 1 (which redid them) never saw them
    assert store.add("ddppo/generation", 0) == 2
    attempt0, attempt1 = (dist.PrefixStore(f"ddppo/{g}/", store) for g in (1, 2))
    assert [attempt0.add(f"preempt/done/{u}", 0) for u in (3, 4)] == [1, 1]
    assert [attempt1.add(f"preempt/done/{u}", 0) for u in (5, 6)] == [1, 1]
    # counters two updates old are deleted as training goes on (nobody reads them any more), also when
    # rank 0 (which deletes them) is the straggler that never finishes (attempt 1)
    assert not any(attempt0.check([f"preempt/done/{u}"]) for u in (1, 2))
    assert not any(attempt1.check([f"preempt/done/{u}"]) for u in (3, 4))
