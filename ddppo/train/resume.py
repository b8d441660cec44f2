"""Resume, with one owner: which checkpoint applies, what of it applies, loaded once, handed to the Trainer.

Resume policy:
- `ddppo train` on a run dir with checkpoints continues from the newest valid
  one (corrupt ones are skipped with a warning): parameters, optimiser, counters,
  and, when the world size is unchanged, every rank's RNG, environment and
  recurrent state (bit-identical continuation on CPU).
- A changed world size is allowed: parameters, optimiser and counters are
  restored; environments and RNGs start afresh from per-rank seeds. A changed
  `env.num_envs` or `env.num_workers` (checkpoint.ENV_LAYOUT_KEYS) likewise starts the environments afresh.
- Environments that cannot restore their state (gymnasium) start fresh
  episodes on every resume, marked as episode starts with a zeroed recurrent
  state, seeded from the resumed update (never a replay of the run start).
- A config that changes a shape-affecting key (`config.SHAPE_KEYS`) is refused,
  naming the keys; other keys (e.g. `ppo.lr`) may change, and the previous
  config.yaml is kept beside the new one.
- `checkpoint.path` initialises the weights of a run dir that has no checkpoints
  of its own (fine-tuning); counters and optimiser start fresh.

Who writes and who reads the saved state: `Trainer.state_dict()` (model, optimizer, counters, and this rank's
owners, one namespace each) is written by rank 0 through checkpoint.py; `resume` picks the file (rank 0
decides, every rank learns the decision), loads it once per rank, keeps what applies (this rank's namespaces
only with the same world size; the collector's only with the same env layout) and hands the rest to
`Trainer.load_state_dict`, the exact inverse of `Trainer.state_dict`.
"""

from __future__ import annotations

import logging
from typing import Any

from ddppo import checkpoint as ckpt
from ddppo.config import Config, ConfigError, diff_keys, get_key
from ddppo.distributed import DistContext
from ddppo.rundir import Claim, RunDir

log = logging.getLogger(__name__)

SHAPE_FIX = "use a new run.dir, or set these keys back to the stored values"


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
    """Rank 0 claims the run dir as its one live writer (held until Trainer.close); every rank raises the same
    ConfigError, naming the holder, when another process trains in it. The claim (an empty one off rank 0)."""
    held: list[Claim] = []
    ctx.decide_on_main((lambda: held.append(RunDir(cfg.run.dir).claim_writer())) if ctx.is_main else None,
                       (ConfigError,))
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


def prepare_run_dir(cfg: Config, ctx: DistContext) -> None:
    """Check the run dir's stored config against this one (every rank); rank 0 writes config.yaml."""
    write_run_dir(cfg, ctx, check_run_dir(cfg))


class _Choice:
    """Rank 0's choice: ("run" | "init", path), and the file it loaded to make it (not loaded again)."""

    def __init__(self, cfg: Config):
        self.cfg, self.data = cfg, None

    def __call__(self) -> tuple[str, str] | None:
        cfg = self.cfg
        if cfg.checkpoint.resume:
            found = ckpt.newest_valid(cfg.run.dir)
            if found is not None:
                self.data = found[1]
                return "run", str(found[0])
        if cfg.checkpoint.path:
            try:
                self.data = ckpt.load(cfg.checkpoint.path)  # fail early, naming the file
            except ckpt.CheckpointError as err:
                raise ckpt.CheckpointError(f"checkpoint.path: {err}; pass a file that `ddppo train` wrote "
                                           f"(RUN_DIR/checkpoints/ckpt-<update>.pt) or a habitat-baselines "
                                           f"ckpt.N.pth, or leave checkpoint.path empty") from None
            return "init", cfg.checkpoint.path
        return None


def resume(cfg: Config, ctx: DistContext, trainer: Any) -> bool:
    """Put the checkpoint that applies into `trainer` (the same on every rank); True if training continues
    from one (counters restored), False if it starts from update 0 (fresh, or weights only)."""
    choice = _Choice(cfg)
    chosen = ctx.decide_on_main(choice if ctx.is_main else None, (ckpt.CheckpointError,))
    if chosen is None:
        return False
    kind, path = chosen
    data = choice.data if ctx.is_main else ckpt.load(path)  # loaded once per rank
    where = f"checkpoint {path}"
    ckpt.check_fits(data, cfg, trainer.policy.state_dict(), where, SHAPE_FIX)
    if kind == "init" or ckpt.foreign(data) is not None:
        trainer.policy.load_state_dict(data["model"])
        foreign = ckpt.foreign(data)
        log.info("initialised weights from %s%s", f"the {foreign.format} checkpoint " if foreign else "", path)
        return False
    counters = ckpt.counters_of(data)
    state = {"model": data["model"], "optimizer": data["optimizer"], "counters": counters,
             "rank": _rank_state(cfg, ctx, data, trainer.rank_owner_names())}
    trainer.load_state_dict(state)
    log.info("resumed from %s at update %d (%d env steps)", path, counters["update"], counters["env_steps"])
    return True


def _rank_state(cfg: Config, ctx: DistContext, data: dict, names: list[str]) -> dict[str, Any] | None:
    """This rank's saved namespaces that apply: none after a world size change; all but the collector's
    (whose episodes have no envs to go to) after an env layout change."""
    if data["world_size"] != ctx.world_size:
        log.warning("world size changed from %d to %d: parameters, optimiser and counters restored; "
                    "environments and RNGs start afresh", data["world_size"], ctx.world_size)
        return None
    state = ckpt.rank_namespaces(data["rank_states"][ctx.rank], names)
    stored = ckpt.stored_config(data)
    changed = [f"{k} changed from {get_key(stored, k)} to {get_key(cfg, k)}" for k in ckpt.ENV_LAYOUT_KEYS
               if get_key(stored, k) != get_key(cfg, k)]
    if changed:
        log.warning("%s: parameters, optimiser, counters and RNGs restored; environments start afresh",
                    ", ".join(changed))
        state.pop("collector", None)
    return state
