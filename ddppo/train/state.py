"""The run directory as the unit of resume: its config, and picking up from its newest checkpoint.

Resume policy:
- `ddppo train` on a run dir with checkpoints continues from the newest valid
  one (corrupt ones are skipped with a warning): parameters, optimiser, counters,
  and, when the world size is unchanged, every rank's RNG, environment and
  recurrent state (bit-identical continuation on CPU).
- A changed world size is allowed: parameters, optimiser and counters are
  restored; environments and RNGs start afresh from per-rank seeds. A changed
  `env.num_envs` or `env.num_workers` likewise starts the environments afresh.
- Environments that cannot restore their state (gymnasium) start fresh
  episodes on every resume, marked as episode starts with a zeroed recurrent
  state, seeded from the resumed update (never a replay of the run start).
- A config that changes a shape-affecting key (`config.SHAPE_KEYS`) is refused,
  naming the keys; other keys (e.g. `ppo.lr`) may change, and the previous
  config.yaml is kept beside the new one.
- `checkpoint.path` initialises the weights of a run dir that has no checkpoints
  of its own (fine-tuning); counters and optimiser start fresh.
"""

from __future__ import annotations

import logging

import torch

from ddppo import checkpoint as ckpt
from ddppo.interop import habitat_checkpoint
from ddppo.config import SHAPE_KEYS, Config, ConfigError, diff_keys, from_yaml_text, get_key
from ddppo.distributed import DistContext
from ddppo.rollout.collector import RolloutCollector
from ddppo.rundir import RunDir

log = logging.getLogger(__name__)

# keys whose change on resume leaves the saved per-env state without envs to go to: they start afresh
ENV_LAYOUT_KEYS = ("env.num_envs", "env.num_workers")


def _shape_conflicts(stored: Config, cfg: Config, where: str) -> None:
    changed = [k for k in diff_keys(stored, cfg) if k in SHAPE_KEYS]
    if changed:
        detail = ", ".join(f"{k}: {get_key(stored, k)!r} -> {get_key(cfg, k)!r}" for k in changed)
        raise ConfigError(f"{where} was trained with a different model shape ({detail}); "
                          f"use a new run.dir, or set these keys back to the stored values")


def check_run_dir(cfg: Config) -> list[str]:
    """Every rank, before anything is built or written: refuse a shape change (once the run dir has
    checkpoints); returns the keys that changed since the stored config."""
    run_dir = RunDir(cfg.run.dir)
    stored = run_dir.read_config()
    if stored is None:
        return []
    if run_dir.has_checkpoints():  # without checkpoints nothing was trained: any change is fine
        _shape_conflicts(stored, cfg, f"run.dir={cfg.run.dir}")
    return diff_keys(stored, cfg)


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


def prepare_run_dir(cfg: Config, ctx: DistContext) -> None:
    """Check the run dir's stored config against this one (every rank); rank 0 writes config.yaml."""
    write_run_dir(cfg, ctx, check_run_dir(cfg))


def _choose(cfg: Config) -> tuple[str, str]:
    """On rank 0: ("run", path) | ("init", path) | ("none", "") | ("error", message)."""
    try:
        if cfg.checkpoint.resume:
            found = ckpt.newest_valid(cfg.run.dir)
            if found is not None:
                return "run", str(found[0])
        if cfg.checkpoint.path:
            try:
                ckpt.load(cfg.checkpoint.path)  # fail early, naming the file
            except ckpt.CheckpointError as err:
                raise ckpt.CheckpointError(f"checkpoint.path: {err}; pass a file that `ddppo train` wrote "
                                           f"(RUN_DIR/checkpoints/ckpt-<update>.pt) or a habitat-baselines "
                                           f"ckpt.N.pth, or leave checkpoint.path "
                                           f"empty") from None
            return "init", cfg.checkpoint.path
        return "none", ""
    except ckpt.CheckpointError as err:
        return "error", str(err)


def restore(cfg: Config, ctx: DistContext, policy: torch.nn.Module, optimizer: torch.optim.Optimizer,
            collector: RolloutCollector) -> tuple[dict, dict | None] | None:
    """Load the checkpoint rank 0 chose; returns (counters, this rank's state or None) or None.

    This rank's state comes back only when its environments continue their saved episodes (the same
    world size and env layout, and envs that restore their state); otherwise the collector has started
    fresh episodes, and per-episode state kept beside it (GRPO's carried returns, the reference
    policy's recurrent state) must start afresh too.
    """
    kind, value = ctx.broadcast_object(_choose(cfg) if ctx.is_main else None)
    if kind == "error":
        raise ckpt.CheckpointError(value)
    if kind == "none":
        return None
    data = ckpt.load(value, map_location=ctx.device)
    if "habitat_baselines" in data:  # weights only: fine-tuning a habitat-baselines policy
        habitat_checkpoint.check(data, cfg, policy, f"checkpoint {value}")
        policy.load_state_dict(data["model"])
        log.info("initialised weights from the habitat-baselines checkpoint %s", value)
        return None
    stored = from_yaml_text(data["config_yaml"], value)
    _shape_conflicts(stored, cfg, f"checkpoint {value}")
    try:
        policy.load_state_dict(data["model"])
    except RuntimeError as err:
        raise ckpt.CheckpointError(f"checkpoint {value} does not fit this model: {str(err)[:500]}") from None
    if kind == "init":
        log.info("initialised weights from %s", value)
        return None
    optimizer.load_state_dict(data["optimizer"])
    counters = ckpt.counters_of(data)
    state = None
    if data["world_size"] == ctx.world_size:
        state = data["rank_states"][ctx.rank]
        ckpt.set_rng_state(state["rng"], ctx.device)
    else:
        log.warning("world size changed from %d to %d: parameters, optimiser and counters restored; "
                    "environments and RNGs start afresh", data["world_size"], ctx.world_size)
    changed = [f"{k} changed from {get_key(stored, k)} to {get_key(cfg, k)}" for k in ENV_LAYOUT_KEYS
               if get_key(stored, k) != get_key(cfg, k)]
    if state is not None and changed:
        log.warning("%s: parameters, optimiser, counters and RNGs restored; environments start afresh",
                    ", ".join(changed))
    continued = collector.resume(None if changed else state, counters["update"])
    log.info("resumed from %s at update %d (%d env steps)", value, counters["update"], counters["env_steps"])
    return counters, state if continued else None
