"""The checkpoint manager: given the saved-state owners, it alone saves, loads, prunes and picks the file to resume.

An owner is anything with `state_dict()` and `load_state_dict(state)` (torchtitan's Stateful). Each is
registered once, under a name of its own, which is its namespace in the file (checkpoint/format.py):
- shared owners hold what every rank has alike (model, optimiser, counters): rank 0 writes them once;
- per-rank owners hold each rank's own state (RNG, running episodes, GRPO carry, ...): every rank's are
  gathered to rank 0, which writes them as `rank_states[rank]`;
- the episodes owner (`register_episodes`) is the per-rank owner of the running episodes: it is always asked
  to `resume(state or None)` and says whether the saved episodes continue; the owners registered `episodic`
  hold per-episode state, restored only when they do.
A second owner under a name already taken (or one of the file's own keys) is refused, so no owner can overwrite
another's state. `save` writes through `state_dict()`, the same dict `load_state_dict` takes back. The manager is
training's: evaluation, the KL reference and ddppo.api only read checkpoint files (format.py's `load`,
`newest_valid`) into a policy, never into the owners.

Resume policy:
- a run dir with checkpoints continues from the newest valid one (corrupt ones are skipped with a warning):
  every shared namespace, and, with the same world size, every rank's own namespaces (bit-identical
  continuation on CPU). Rank 0 picks the file, every rank learns the choice and loads it once.
- A changed world size is allowed: shared namespaces are restored; environments and RNGs start afresh from
  per-rank seeds. A changed `env.num_envs` or `env.num_workers` (ENV_LAYOUT_KEYS) starts the episodes afresh
  (the rest of the rank's namespaces are restored).
- A config that changes a shape-affecting key (`config.SHAPE_KEYS`) is refused, naming the keys.
- `checkpoint.path` initialises the weights of a run dir without checkpoints of its own (fine-tuning); the rest
  starts fresh. Another trainer's checkpoint (interop) likewise gives its weights only.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Protocol

from ddppo.config import Config, get_key, to_yaml
from ddppo.distributed import DistContext
from ddppo.errors import CheckpointError
from ddppo.checkpoint import fits
from ddppo.checkpoint import format as fmt

log = logging.getLogger(__name__)

SHAPE_FIX = "use a new run.dir, or set these keys back to the stored values"


class Stateful(Protocol):
    """A saved-state owner: its own namespace of the checkpoint (torchtitan's Stateful)."""

    def state_dict(self) -> Any: ...

    def load_state_dict(self, state: Any) -> None: ...


class Episodes(Protocol):
    """The owner of the running episodes: `resume(None)` starts fresh ones; True when the saved ones continue."""

    def state_dict(self) -> Any: ...

    def resume(self, state: Any) -> bool: ...


class CheckpointManager:
    def __init__(self, cfg: Config, ctx: DistContext, claim: Any = None):
        self.cfg, self.ctx = cfg, ctx
        self.claim = claim  # the run dir's claim (ddppo.rundir.Claim): its heartbeat is refreshed at every save
        self.shared: dict[str, Stateful] = {}
        self.per_rank: dict[str, Any] = {}
        self.episodes: str | None = None  # the name of the episodes owner
        self.episodic: set[str] = set()  # per-rank owners restored only when the episodes continue
        self.model_loaded = False  # set by `resume` when a checkpoint (the run's or checkpoint.path) gave the weights

    # ------------------------------------------------------------------ owners
    def register(self, name: str, owner: Stateful, *, shared: bool = False, episodic: bool = False) -> None:
        """Add an owner under `name`, its namespace; ValueError if the name is taken. Owners are restored in
        the order they are registered, shared ones first."""
        taken = {*self.shared, *self.per_rank, *fmt.FILE_KEYS, "rank"}
        if name in taken:
            raise ValueError(f"saved-state owner {name!r} is registered twice (or takes a name of the checkpoint "
                             f"file's own: {', '.join(fmt.FILE_KEYS)}): each owner needs a namespace of its own")
        (self.shared if shared else self.per_rank)[name] = owner
        if episodic:
            self.episodic.add(name)

    def register_episodes(self, name: str, owner: Episodes) -> None:
        """Add the per-rank owner of the running episodes (one at most)."""
        if self.episodes is not None:
            raise ValueError(f"the running episodes already have an owner ({self.episodes!r}); {name!r} cannot be "
                             f"a second")
        self.register(name, owner)
        self.episodes = name

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        """{shared namespace: state, ..., "rank": {per-rank namespace: state}}: what `save` writes."""
        return {**{n: o.state_dict() for n, o in self.shared.items()},
                "rank": {n: o.state_dict() for n, o in self.per_rank.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Exact inverse of `state_dict`. "rank" may hold only the namespaces that apply (None: another world
        size, nothing of this rank's); a namespace that is absent or None leaves its owner as it is, but the
        episodes owner is always asked, and the `episodic` owners follow it: without continued episodes they
        keep their fresh state."""
        for name, owner in self.shared.items():
            if state.get(name) is not None:
                owner.load_state_dict(state[name])
        rank = state.get("rank") or {}
        continued = False
        for name, owner in self.per_rank.items():
            if name == self.episodes:
                continued = owner.resume(rank.get(name))
            elif rank.get(name) is not None and (continued or name not in self.episodic):
                owner.load_state_dict(rank[name])

    # ------------------------------------------------------------------ files
    def save(self, update: int) -> bool:
        """Every rank hands its own namespaces to rank 0, which writes ckpt-<update>.pt atomically and prunes to
        checkpoint.keep_last. False (logged) on rank 0 when the file could not be written; True elsewhere."""
        state = self.state_dict()
        blobs = self.ctx.gather_objects(fmt.to_bytes(fmt.to_storable(state.pop("rank"))))
        if not self.ctx.is_main:
            return True
        if self.claim is not None:
            self.claim.heartbeat()  # DirectoryBusy if another process took the run dir over: nothing is written
        data = fmt.file_contents(state, to_yaml(self.cfg), [fmt.from_bytes(b) for b in blobs])
        try:
            path = fmt.save(self.cfg.run.dir, update, data, self.cfg.checkpoint.keep_last)
            log.debug("saved %s", path)
            return True
        except CheckpointError as err:
            log.error("%s", err)
        except OSError as err:
            log.error("could not write checkpoint for update %d (%s); the previous checkpoints are intact", update,
                      err)
        return False

    def resume(self, model: str = "model") -> bool:
        """Put the checkpoint that applies into the owners (the same on every rank); True if training continues
        from one (counters restored), False if it starts from update 0 (fresh, or weights only into `model`)."""
        choice = _Choice(self.cfg)
        chosen = self.ctx.decide_on_main(choice if self.ctx.is_main else None, (CheckpointError,))
        if chosen is None:
            return False
        kind, path = chosen
        data = choice.data if self.ctx.is_main else fmt.load(path)  # loaded once per rank
        fits.check_fits(data, self.cfg, self.shared[model].state_dict(), f"checkpoint {path}", SHAPE_FIX)
        self.model_loaded = True
        if kind == "init" or fits.foreign(data) is not None:
            self.shared[model].load_state_dict(data["model"])
            info = fits.foreign(data)
            log.info("initialised weights from %s%s", f"the {info.format} checkpoint " if info else "", path)
            return False
        counters = fmt.counters_of(data)
        state = {**{n: data.get(n) for n in self.shared}, "counters": counters, "rank": self._rank_state(data)}
        self.load_state_dict(state)
        log.info("resumed from %s at update %d (%d env steps)", path, counters["update"], counters["env_steps"])
        return True

    def _rank_state(self, data: dict[str, Any]) -> dict[str, Any] | None:
        """This rank's saved namespaces that apply: none after a world size change; all but the episodes'
        (which have no envs to go to) after an env layout change."""
        ctx, cfg = self.ctx, self.cfg
        if data["world_size"] != ctx.world_size:
            log.warning("world size changed from %d to %d: parameters, optimiser and counters restored; "
                        "environments and RNGs start afresh", data["world_size"], ctx.world_size)
            return None
        state = dict(data["rank_states"][ctx.rank])
        stored = fits.stored_config(data)
        changed = [f"{k} changed from {get_key(stored, k)} to {get_key(cfg, k)}" for k in fits.ENV_LAYOUT_KEYS
                   if get_key(stored, k) != get_key(cfg, k)]
        if changed:
            log.warning("%s: parameters, optimiser, counters and RNGs restored; environments start afresh",
                        ", ".join(changed))
            state.pop(self.episodes, None)
        return state

    def checkpoints(self) -> list[Path]:
        """This run's checkpoint files, oldest first."""
        return fmt.list_checkpoints(self.cfg.run.dir)


class _Choice:
    """Rank 0's choice: ("run" | "init", path), and the file it loaded to make it (not loaded again)."""

    def __init__(self, cfg: Config):
        self.cfg, self.data = cfg, None

    def __call__(self) -> tuple[str, str] | None:
        cfg = self.cfg
        if cfg.checkpoint.resume:
            found = fmt.newest_valid(cfg.run.dir)
            if found is not None:
                self.data = found[1]
                return "run", str(found[0])
        if cfg.checkpoint.path:
            try:
                self.data = fmt.load(cfg.checkpoint.path)  # fail early, naming the file
            except CheckpointError as err:
                raise CheckpointError(f"checkpoint.path: {err}; pass a file that `ddppo train` wrote "
                                      f"(RUN_DIR/checkpoints/ckpt-<update>.pt) or a habitat-baselines "
                                      f"ckpt.N.pth, or leave checkpoint.path empty") from None
            return "init", cfg.checkpoint.path
        return None
