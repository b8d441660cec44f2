"""Weights & Biases as a third metrics sink (rank 0, `log.wandb.enabled`), beside TensorBoard and metrics.jsonl.

The same tags and the same step (global env steps) as TensorBoard; the resolved config is the run config.
The W&B run id is kept in RUN_DIR/wandb_run_id, so a resumed training continues the same W&B run. wandb is
imported only here, only when enabled. W&B refuses steps lower than ones it already has: after a resume from
an older checkpoint, the updates logged again are dropped by W&B (TensorBoard purges and rewrites them).
"""

from __future__ import annotations

import importlib.util
import logging
import math
import secrets
from pathlib import Path
from typing import Any

from ddppo.config import Config, to_yaml
from ddppo.errors import ConfigError

log = logging.getLogger(__name__)
RUN_ID_FILE = "wandb_run_id"


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
        run_dir = Path(cfg.run.dir)
        id_file = run_dir / RUN_ID_FILE
        resumed = id_file.is_file()
        run_id = id_file.read_text().strip() if resumed else secrets.token_hex(4)
        if not resumed:
            run_dir.mkdir(parents=True, exist_ok=True)
            id_file.write_text(run_id + "\n")
        self.run = wandb.init(project=w.project, entity=w.entity or None, group=w.group or None,
                              tags=list(w.tags) or None, mode=w.mode, dir=str(run_dir), id=run_id, resume="allow",
                              name=run_dir.name, config=yaml.safe_load(to_yaml(cfg)))
        log.info("W&B run %s (%s, %s)", run_id, w.mode, "resumed" if resumed else "new")

    def log(self, scalars: dict[str, Any], env_steps: int) -> None:
        values = {k: v for k, v in scalars.items() if "/" in k and math.isfinite(v)}
        if values:
            self.run.log(values, step=int(env_steps))

    def close(self) -> None:
        if self.run is not None:
            self.run.finish()
            self.run = None
