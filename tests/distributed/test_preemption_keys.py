"""Preemption counters are deleted in every rollout mode: two real gloo ranks run the lockstep, overlapped and
variable collectors (synthetic envs in workers, real `Preemption` on the real store) for several updates each;
afterwards the store (hosted by the test, as torchrun's agent hosts it) holds only the counters of each mode's
last two updates. The ranks are plain (non-daemonic) processes: they start env worker processes of their own.

Before the fix, rank 0 deleted update - 2's counter only when the rollout checked `should_stop(update, 0)`,
which the overlapped loop (it checks from step 1) and the variable loop (it checks after storing a batch) never
do: one store key leaked per update.
"""

from __future__ import annotations

import datetime
import multiprocessing as mp
import traceback

import pytest
from dist_harness import free_port
from testutil import OneStorage, build_collector

UPDATES = 6
MODES = {"lockstep": (dict(), 0), "overlapped": (dict(overlap=True), 2), "variable": (dict(mode="variable"), 2)}


def keys_worker(rank: int, world: int, store_port: int, errors) -> None:
    try:
        _drive_modes(rank, world, store_port)
    except BaseException:
        errors.put(f"rank {rank}:\n{traceback.format_exc()}")
        raise


def _drive_modes(rank: int, world: int, store_port: int) -> None:
    import torch

    from ddppo.config import PolicyConfig, PreemptionConfig, RolloutConfig
    from ddppo.model.policy import Policy
    from ddppo.rollout.factory import storage_steps
    from ddppo.rollout.preemption import Preemption
    from ddppo.rollout.storage import RolloutStorage
    from ddppo.envs.registry import make_vec_env
    from ddppo.envs.base import EnvSpec

    torch.set_num_threads(1)
    from testutil import gloo_context

    ctx = gloo_context(rank, world, store_port, agent_store=True)
    try:
        for i, (mode, (options, workers)) in enumerate(MODES.items()):
            cfg = RolloutConfig(num_steps=8, batch_wait_s=0.0, **options)
            pre = Preemption(PreemptionConfig(sync_frac=0.5, min_rollout_fraction=0.5), ctx, cfg.num_steps)
            assert pre.active
            envs = make_vec_env("synthetic", {"step_sleep_s": 0.001}, EnvSpec(num_envs=2, seed=rank,
                                                                              num_workers=workers))
            try:
                policy = Policy(envs.observation_space, envs.action_space, PolicyConfig(hidden_size=8))
                storage = RolloutStorage(storage_steps(cfg), 2, envs.observation_space, envs.action_space,
                                         policy.initial_memory(2), torch.device("cpu"))
                collector = OneStorage(build_collector(cfg, envs, policy, pre), storage)
                first = 100 * i + 1  # each mode counts its own updates
                for update in range(first, first + UPDATES):
                    res = collector.collect(update)
                    ctx.rollout_barrier(res.steps)  # the trainer's end-of-rollout sync
            finally:
                envs.close()
            ctx.rollout_barrier(0)
    finally:
        ctx.close()


@pytest.mark.timeout(240)
def test_preemption_counters_are_deleted_in_every_rollout_mode():
    import torch.distributed as dist

    from ddppo.distributed.generation import namespace
    from ddppo.rollout.preemption import Preemption

    port = free_port()
    store = dist.TCPStore("127.0.0.1", port, 2, True, timeout=datetime.timedelta(seconds=60), wait_for_workers=False)
    spawn = mp.get_context("spawn")
    errors = spawn.Queue()
    procs = [spawn.Process(target=keys_worker, args=(r, 2, port, errors)) for r in range(2)]
    for p in procs:
        p.start()
    try:
        for p in procs:
            p.join(timeout=200)
        assert all(p.exitcode == 0 for p in procs), [errors.get(timeout=5) for _ in range(errors.qsize() or 1)]
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join(timeout=5)
    attempt = dist.PrefixStore(namespace(1), store)  # the job's first start
    left = {mode: [u for u in range(100 * i - 1, 100 * i + 1 + UPDATES) if attempt.check([Preemption.key(u)])]
            for i, mode in enumerate(MODES)}
    for i, mode in enumerate(MODES):
        last = 100 * i + UPDATES
        # update u deletes u - 2's counter as its rollout starts: only the last two updates' counters remain
        # (a counter exists once a rank finished its full rollout that update)
        assert set(left[mode]) <= {last - 1, last}, (mode, left[mode])
        assert left[mode], (mode, "no counter was ever written: the test checks nothing")
