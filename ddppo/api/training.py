"""Training from Python: `train(cfg)` runs what `ddppo train` runs (the command calls it), with a config from
`load_config` (the same loader: YAML file or shipped name, `key=value` overrides, validated and frozen)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Sequence

from ddppo import user_code
from ddppo.config import Config
from ddppo.errors import ConfigError
from ddppo.config import load_config as _load

log = logging.getLogger(__name__)


def load_config(config: str | Path | None, overrides: Sequence[str] = ()) -> Config:
    """The validated, frozen config of `config` (a YAML file, or a shipped config's name such as "gridnav";
    None: the schema's defaults) with `overrides` (`["ppo.lr=1e-4", "run.dir=runs/a"]`) applied, as
    `ddppo train CONFIG OVERRIDES...` builds it. A changed copy: `dataclasses.replace(cfg.ppo, lr=1e-4)` is
    not checked; pass overrides instead. Raises ddppo.errors.ConfigError naming the key, value and fix."""
    user_code.workdir_first()  # `policy.architecture=MODULE:NAME` imports MODULE as the command would
    return _load(config, list(overrides))


def train(cfg: Config) -> int:
    """Train as `ddppo train` does with `cfg`: into cfg.run.dir, resuming from its checkpoints if it has some.
    Outside a launcher this is one process (world size 1); under torchrun or srun every rank calls it.

    Returns 0 when training reached run.total_env_steps (or run.time_budget_s), else the exit code `ddppo
    train` would have; a run dir whose run is already finished trains nothing and writes nothing (one warning
    says so, and how to train more). Raises the user errors of ddppo.errors: ConfigError (a run directory that cannot
    be written, a config the machine has no memory for), EnvError (ddppo.envs.base), CheckpointError, LaunchError.
    Logging goes through `logging` (logger "ddppo"): configure it to see progress lines."""
    import psutil

    from ddppo.config.sizes import memory_problem
    from ddppo.distributed import read_launch, run_in_process_group
    from ddppo.rundir import RunDir, unusable_reason

    user_code.workdir_first()
    problem = unusable_reason(cfg.run.dir) or memory_problem(cfg, psutil.virtual_memory().total)
    if problem:
        raise ConfigError(problem)
    launch = read_launch()
    finished = RunDir(cfg.run.dir).finished_message(cfg.run.total_env_steps) if cfg.checkpoint.resume else None
    if finished:  # resuming would train nothing, and write nothing
        from ddppo.train.startup import check_run_dir

        check_run_dir(cfg)  # a changed shape is refused all the same
        if launch.rank == 0:
            log.warning("%s", finished)
        return 0

    def body(ctx) -> int:
        from ddppo.train.builder import Trainer

        trainer = Trainer(cfg, ctx)
        try:
            return trainer.train()
        finally:
            trainer.close()

    return run_in_process_group(cfg, launch, body)
