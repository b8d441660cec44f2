"""Weights & Biases as a third metrics sink (rank 0, `log.wandb.enabled`), beside TensorBoard and metrics.jsonl.

The same tags and the same step (global env steps) as TensorBoard; the resolved config is the run config.
The W&B run id is kept in RUN_DIR/wandb_run_id (named and written atomically by ddppo/rundir/), so a resumed
training continues the same W&B run. wandb is imported only here, only when enabled. W&B refuses steps lower
than ones it already has: after a resume from an older checkpoint, the updates logged again are dropped by W&B
(TensorBoard purges and rewrites them).
"""

from __future__ import annotations

import importlib.util
import logging
import math
import secrets
from typing import Any

from ddppo.config import Config, to_yaml
from ddppo.errors import ConfigError
from ddppo.rundir import RunDir

log = logging.getLogger(__name__)


NOT_INSTALLED = ("log.wandb.enabled=true needs the wandb package: pip install 'ddppo[wandb]' (or pip install "
                 "wandb), or set log.wandb.enabled=false")


def check_available(cfg: Config) -> None:
    """Every rank, at start-up: ConfigError when W&B is enabled but wandb is not installed (no import)."""
    if cfg.log.wandb.enabled and importlib.util.find_spec("wandb") is None:
        raise ConfigError(NOT_INSTALLED)


class WandbSink:
    """Rank 0's W&B run (see the module doc)."""

    def __init__(self, cfg: Config):
        try:
            import wandb
        except ImportError:
            raise ConfigError(NOT_INSTALLED) from None
        import yaml

        w = cfg.log.wandb
        run_dir = RunDir(cfg.run.dir)
        run_id = run_dir.wandb_run_id()
        resumed = run_id is not None
        if run_id is None:
            run_id = secrets.token_hex(4)
            run_dir.write_wandb_run_id(run_id)
        self.run = wandb.init(project=w.project, entity=w.entity or None, group=w.group or None,
                              tags=list(w.tags) or None, mode=w.mode, dir=str(run_dir.path), id=run_id,
                              resume="allow", name=run_dir.path.name, config=yaml.safe_load(to_yaml(cfg)))
        log.info("W&B run %s (%s, %s)", run_id, w.mode, "resumed" if resumed else "new")

    def log(self, scalars: dict[str, Any], env_steps: int) -> None:
        values = {k: v for k, v in scalars.items() if "/" in k and math.isfinite(v)}
        if values:
            self.run.log(values, step=int(env_steps))

    def close(self) -> None:
        if self.run is not None:
            self.run.finish()
            self.run = None
