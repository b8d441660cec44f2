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
