"""`ddppo export --format habitat-baselines`: a run's checkpoint as a habitat-baselines ckpt.N.pth."""

from __future__ import annotations

import io
import logging
from importlib import metadata
from pathlib import Path
from typing import Any

import torch

from ddppo import checkpoint as ckpt
from ddppo.errors import CheckpointError, ConfigError
from ddppo.interop.habitat_checkpoint import LAYOUTS, POLICY_NAMES, to_habitat_keys
from ddppo.model.habitat_baselines import backbone_name
from ddppo.files import atomic_write

log = logging.getLogger(__name__)


def installed_layout() -> tuple[str, str]:
    """(layout, why): the key layout of the habitat-baselines installed here ("0.2" below 0.3, else "0.3"),
    or "0.3" when none is (0.2.x is one dist, `habitat`, that provides habitat_baselines too)."""
    for dist in ("habitat-baselines", "habitat_baselines", "habitat"):
        try:
            version = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
        if dist == "habitat" and not version.startswith("0."):
            continue
        parts = version.split(".")
        major_minor = (int(parts[0]), int(parts[1])) if len(parts) > 1 and parts[1].isdigit() else (0, 3)
        return ("0.2" if major_minor < (0, 3) else "0.3"), f"{dist} {version} is installed here"
    return "0.3", "no habitat-baselines is installed here (pass --habitat-version 0.2 for 0.2.x releases)"


def export_payload(model: dict[str, torch.Tensor], cfg: Any, env_steps: int, layout: str = "0.3") -> dict[str, Any]:
    """What habitat-baselines' trainer writes, with the config as plain data (loads with weights_only=True):
    layout "0.3" (unprefixed keys, lower-case config keys) or "0.2" (`actor_critic.` keys, 0.2.x's upper-case
    config keys). The config names the policy and its sizes only: habitat-baselines' evaluators then run with
    their own config (0.3.x: habitat_baselines.load_resume_state_config=False; 0.2.x: EVAL.USE_CKPT_CONFIG False)."""
    p = cfg.policy
    backbone = backbone_name(p) or "unknown"
    rl = {"policy": {"name": POLICY_NAMES.get(p.architecture, "unknown")}, "ppo": {"hidden_size": p.hidden_size},
          "ddppo": {"rnn_type": p.rnn_type.upper(), "backbone": backbone, "num_recurrent_layers": p.rnn_layers}}
    if layout == "0.2":
        config: dict[str, Any] = {"RL": {k.upper(): v for k, v in rl.items()}, "exported_by": "ddppo"}
    else:
        config = {"habitat_baselines": {"rl": rl}, "exported_by": "ddppo"}
    return {"state_dict": {k: v.detach().cpu().clone() for k, v in to_habitat_keys(model, layout).items()},
            "config": config, "extra_state": {"step": int(env_steps), "wall_time": 0.0}}


def export_habitat_baselines(run_dir: str | Path, out: str | Path, checkpoint: str = "latest",
                             force: bool = False, version: str = "auto") -> tuple[Path, str]:
    """`ddppo export RUN_DIR --format habitat-baselines -o OUT`: a run's checkpoint (the newest valid one, or
    the file `checkpoint`) as a habitat-baselines ckpt.N.pth, in the key layout of release `version` ("0.2",
    "0.3", or "auto": the installed one's). Refuses to replace an existing OUT unless `force`; the file is
    written atomically. Returns the path and the layout written (with why, for auto)."""
    if version == "auto":
        layout, why = installed_layout()
    elif version in LAYOUTS:
        layout, why = version, "as asked"
    else:
        raise ConfigError(f"--habitat-version {version!r}: pass one of auto, {', '.join(LAYOUTS)}")
    out = Path(out)
    if out.exists() and not force:
        raise ConfigError(f"{str(out)!r} exists; pass --force to replace it, or choose another -o path")
    if out.is_dir():
        raise ConfigError(f"-o {str(out)!r} is a directory; pass a file path such as {out / 'ckpt.0.pth'}")
    if checkpoint == "latest":
        found = ckpt.newest_valid(run_dir)
        if found is None:
            raise CheckpointError(f"{str(run_dir)!r} has no checkpoints to export; pass a run dir that `ddppo train` "
                                  f"wrote, or --checkpoint FILE")
        path, data = found
    else:
        path, data = Path(checkpoint), ckpt.load(checkpoint)
    if ckpt.foreign(data) is not None:
        raise CheckpointError(f"{str(path)!r} is already a {ckpt.foreign(data).format} checkpoint; nothing to export")
    cfg = ckpt.stored_config(data, str(path))
    if cfg.policy.architecture not in POLICY_NAMES:
        raise ConfigError(f"{str(path)!r} was trained with policy.architecture={cfg.policy.architecture!r}; only "
                          f"policy.architecture={' or '.join(POLICY_NAMES)} have habitat-baselines' parameters "
                          f"(train with one, or fine-tune from a habitat-baselines checkpoint)")
    payload = export_payload(data["model"], cfg, int(data["counters"].get("env_steps", 0)), layout)
    buf = io.BytesIO()
    torch.save(payload, buf)
    log.info("habitat-baselines %s key layout (%s)", layout, why)
    try:  # without --force, never replace a file that appeared meanwhile (another export to the same -o)
        written = atomic_write(out, buf.getvalue(), fsync=True, exclusive=not force)
    except FileExistsError:
        raise ConfigError(f"{str(out)!r} exists (written meanwhile by another process); pass --force to replace "
                          f"it, or choose another -o path") from None
    return written, f"{layout}.x key layout, {why}"
