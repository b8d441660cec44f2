"""Run-directory start-up, in the order train/builder.py calls it: a shape change refused before anything is built
(`check_run_dir`), the run dir claimed by its one live writer (`claim_run_dir`), config.yaml written once
start-up has succeeded (`write_run_dir`; the previous one kept beside it when keys changed).

Which checkpoint a run resumes from, and what of it applies, is the checkpoint manager's
(ddppo/checkpoint/manager.py), which holds the resume policy.
"""

from __future__ import annotations

import logging

from ddppo import checkpoint as ckpt
from ddppo.checkpoint.manager import SHAPE_FIX
from ddppo.config import Config, diff_keys
from ddppo.errors import ConfigError
from ddppo.distributed import DistContext
from ddppo.rundir import Claim, RunDir

log = logging.getLogger(__name__)


def check_run_dir(cfg: Config) -> list[str]:
    """Every rank, before anything is built or written: refuse a shape change (once the run dir has
    checkpoints); returns the keys that changed since the stored config."""
    run_dir = RunDir(cfg.run.dir)
    stored = run_dir.read_config()
    if stored is None:
        return []
    changed = ckpt.shape_changes(stored, cfg)
    if changed and run_dir.has_checkpoints():  # without checkpoints nothing was trained: any change is fine
        raise ConfigError(f"run.dir={cfg.run.dir} was trained with a different model shape ({changed}); {SHAPE_FIX}")
    return diff_keys(stored, cfg)


def claim_run_dir(cfg: Config, ctx: DistContext) -> Claim:
    """Rank 0 claims the run dir as its one live writer (held until Trainer.close; its heartbeat refreshed at
    every checkpoint); every rank raises the same ConfigError, naming the holder, when another process trains in
    it. The claim (an empty one off rank 0)."""
    held: list[Claim] = []

    def claim() -> None:
        held.append(RunDir(cfg.run.dir).claim_writer(cfg.checkpoint.stale_claim_s))

    ctx.decide_on_main(claim if ctx.is_main else None, (ConfigError,))
    return held[0] if held else Claim(RunDir(cfg.run.dir).path, None, [])


def write_run_dir(cfg: Config, ctx: DistContext, changed: list[str]) -> None:
    """Rank 0, once start-up has succeeded (a start that fails writes nothing): config.yaml, the
    previous one kept beside it when keys `changed`."""
    if not ctx.is_main:
        return
    run_dir = RunDir(cfg.run.dir)
    run_dir.path.mkdir(parents=True, exist_ok=True)
    if changed or not run_dir.has_config():
        kept = run_dir.write_config(cfg, keep_previous=bool(changed))
        if kept is not None:
            log.warning("config changed since the last run (%s); previous config kept as %s", ", ".join(changed),
                        kept.name)

