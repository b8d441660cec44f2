"""Shared by the imitation tests: a tiny gridnav config, a one-rank context, a recorded dataset."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Iterator

from testutil import TINY, as_overrides, gloo_context

TINY_BC = as_overrides({**TINY, "imitation.batch_episodes": 8, "imitation.eval_interval_updates": 10,
                        "imitation.val_fraction": 0.25, "checkpoint.interval_updates": 1000, "log.tensorboard": False})


def config(*overrides: str) -> Any:
    from ddppo.config import load_config

    return load_config("gridnav", [*TINY_BC, *overrides])


@contextlib.contextmanager
def one_rank(seed: int = 0) -> Iterator[Any]:
    ctx = gloo_context(seed=seed)
    try:
        yield ctx
    finally:
        ctx.close()


def record_into(out: Path, episodes: int, *overrides: str, shard_episodes: int = 8, resume: bool = False) -> Any:
    """Record `episodes` gridnav expert episodes into `out` on one in-process rank; the rank's RecordResult."""
    from ddppo.imitation.record import RecordRequest, record_rank

    with one_rank() as ctx:
        return record_rank(config(*overrides), RecordRequest(episodes, str(out), shard_episodes=shard_episodes,
                                                             resume=resume), ctx)


def imitate_and_digest(rank: int, world: int, port: int, overrides: list[str]) -> dict:
    """A `spawn_ranks` worker (tests/distributed/dist_harness.py): behaviour cloning on a gloo rank; the digests of
    its initial and final parameters and Adam state, and its counters."""
    from dist_harness import digest, optimizer_tensors
    from testutil import gloo_context

    from ddppo.imitation.imitate import Imitation

    cfg = config(*overrides)
    ctx = gloo_context(rank, world, port, cfg.run.seed, cfg.dist.timeout_s, cfg.dist.startup_timeout_s)
    try:
        run = Imitation(cfg, ctx)
        try:
            initial = digest(run.policy.state_dict())
            code = run.run()
            return {"code": code, "update": run.progress.update, "samples": run.progress.env_steps, "seed": ctx.seed,
                    "initial": initial, "model": digest(run.policy.state_dict()),
                    "optimizer": digest(optimizer_tensors(run.optimizer)),
                    "train_episodes": run.demos.train.num_episodes}
        finally:
            run.close()
    finally:
        ctx.close()
