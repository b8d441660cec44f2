"""The run directory: the one package that knows its files, their names and how they are written (here), and
who may write them (claim.py: the claim; holder.py: its holder record, and when a holder is gone).

    RUN_DIR/
      config.yaml                 the resolved config (a changed config on resume keeps the old one as
                                  config.<time>.yaml)
      metrics.jsonl               one JSON object per update (rank 0 appends; a crash can tear the last line)
      tb/                         TensorBoard events of training (rank 0)
      checkpoints/ckpt-<U>.pt     the last checkpoint.keep_last checkpoints (what they hold: ddppo/checkpoint/format.py)
      scene_costs.json            each scene's measured seconds per env step (rank 0, at every checkpoint), what
                                  episode_split=cost places scenes by (ddppo/train/scene_costs.py)
      eval/ckpt-<U>.json          evaluation results, eval/tb/, eval/videos/ckpt-<U>/ (ddppo eval)
      wandb_run_id, wandb/        the W&B run a resume continues, and wandb's own files (log.wandb.enabled)
      .lock, .holder.json         who writes them, also eval/.lock, eval/.holder.json (claim.py)

Training, evaluation, sweeps and benchmarks all find these files through `RunDir`. Every file ddppo writes whole
(config.yaml, checkpoints, evaluation results, wandb_run_id) is written with ddppo/files.py's `atomic_write` (temp
file in the same folder + rename), so a reader sees the old file or the new one; the claim's record with claim.py's
own temp file + link or rename. metrics.jsonl is appended a line at a time (train/metrics.py: a line that cannot
be appended is taken back, never left torn) and always read with `read_jsonl` (ddppo/files.py), which skips a torn
line instead of failing on it.
The folders tb/, eval/tb/, eval/videos/ and wandb/ are written by TensorBoard, the video encoder and wandb
themselves.

One live writer per directory (`claim_dir`): `ddppo train` (rank 0) holds RUN_DIR, `ddppo eval` its output folder
(OUT), `ddppo sweep` SWEEP_DIR, for as long as it runs. A second process that would write the same files refuses
at once (DirectoryBusy, exit 2) naming the holder and the fix, unless the holder is gone (holder.py's rules: then
it takes over with one warning). Readers (eval of a training run, sweep summary, export) take none.
docs/guides/run-directory-safety.md.
"""
from __future__ import annotations

import json
import logging
import os
import re
import time
from pathlib import Path

from ddppo.files import atomic_write, last_jsonl, read_json, read_jsonl, write_json
from ddppo.rundir.claim import Claim, claim_dir
from ddppo.rundir.holder import pid_alive

log = logging.getLogger(__name__)

CONFIG = "config.yaml"
METRICS = "metrics.jsonl"
CHECKPOINTS = "checkpoints"
TENSORBOARD = "tb"
EVAL = "eval"
WANDB_RUN_ID = "wandb_run_id"
SCENE_COSTS = "scene_costs.json"
_CHECKPOINT_NAME = re.compile(r"^ckpt-(\d+)\.pt$")
_CHECKPOINT_TEMP = re.compile(r"^\.ckpt-\d+\.pt\.(\d+)\.tmp$")  # atomic_write's temp file of a checkpoint


# ------------------------------------------------------------------------------ whether a directory can hold a run
MIN_FREE_BYTES = 64 << 10  # a run dir on a disk with less free than this cannot take its config and checkpoints


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def unusable_reason(run_dir: str) -> str | None:
    """Why `run.dir` cannot hold a run (one line naming it and the fix), or None. Checked before anything starts,
    writing nothing: empty, a file, under a file, not writable (a read-only disk too), a disk without space."""
    fix = "choose another run.dir"
    if not run_dir.strip():
        return f"run.dir={run_dir!r} is empty: set it to a directory, e.g. run.dir=runs/my-run"
    path = Path(run_dir).expanduser()
    if path.exists() and not path.is_dir():
        return f"run.dir={run_dir} is a file, not a directory: {fix} (or move the file away)"
    for name, want_dir in ((CONFIG, False), (METRICS, False), (CHECKPOINTS, True), (TENSORBOARD, True)):
        inside = path / name
        if inside.exists() and inside.is_dir() != want_dir:
            kind = "a directory" if want_dir else "a file"
            return f"run.dir={run_dir}: {inside} is not {kind}, so the run cannot write it: move it away or {fix}"
    existing = path
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        return f"run.dir={run_dir}: {existing} is a file, so no directory can be made under it: {fix}"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"run.dir={run_dir}: {existing} is not writable (permissions, or a read-only disk): {fix}"
    try:
        stat = os.statvfs(existing)
    except OSError:
        return None
    free = stat.f_bavail * stat.f_frsize
    if free < MIN_FREE_BYTES:
        return (f"run.dir={run_dir}: no space left on its disk ({_size(free)} free, a run needs at least "
                f"{_size(MIN_FREE_BYTES)} for its config and more for checkpoints): free some space or {fix}")
    return None


def checkpoint_update(path: str | Path) -> int | None:
    """The update of a checkpoint file named ckpt-<update>.pt; None for any other name."""
    m = _CHECKPOINT_NAME.match(Path(path).name)
    return int(m.group(1)) if m else None


# ------------------------------------------------------------------------------ the run directory
class RunDir:
    """One run directory (`run.dir`). Creating the object touches nothing on disk."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.config_path = self.path / CONFIG
        self.metrics_path = self.path / METRICS
        self.tensorboard_dir = self.path / TENSORBOARD
        self.checkpoint_dir = self.path / CHECKPOINTS
        self.eval_dir = self.path / EVAL  # where `ddppo eval` writes by default
        self.wandb_run_id_path = self.path / WANDB_RUN_ID
        self.scene_costs_path = self.path / SCENE_COSTS

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    # ---------------------------------------------------------------- config.yaml
    def has_config(self) -> bool:
        return self.config_path.is_file()

    def read_config(self):
        """The stored config (validated against the schema), or None when there is none; ConfigError if it
        does not read."""
        from ddppo.config import from_yaml_text

        if not self.has_config():
            return None
        return from_yaml_text(self.config_path.read_text(), str(self.config_path))

    def write_config(self, cfg, keep_previous: bool = False) -> Path | None:
        """Write config.yaml (atomically). With `keep_previous`, an existing one is first copied to
        config.<time>[.N].yaml; returns that name (None when nothing was kept)."""
        from ddppo.config import to_yaml

        kept = None
        if keep_previous and self.has_config():  # a copy, then the new file: config.yaml exists at every instant
            kept = _unused(self.path / f"config.{time.strftime('%Y%m%d-%H%M%S')}.yaml")
            atomic_write(kept, self.config_path.read_bytes())
        atomic_write(self.config_path, to_yaml(cfg))
        return kept

    # ---------------------------------------------------------------- metrics.jsonl
    def metrics(self) -> list[dict]:
        """Every whole record of metrics.jsonl (a torn last line is skipped)."""
        return [r for r in read_jsonl(self.metrics_path) if "update" in r or "env_steps" in r]

    def last_metrics(self) -> dict | None:
        """The last whole record of metrics.jsonl, read from its end."""
        return last_jsonl(self.metrics_path)

    def truncate_metrics(self, last_update: int, last_record: str | None = None) -> None:
        """Keep only the records of updates <= last_update (atomic rewrite): a resume never logs an update twice.
        `last_record`: the record of `last_update` as the checkpoint resumed from holds it (a JSON line); it is
        put back where the file lacks it (a kill or a crash tore that line, which read_jsonl skips), so no
        update's record is lost either."""
        if not self.metrics_path.exists() and last_record is None:
            return
        kept = [r for r in read_jsonl(self.metrics_path) if _update_at_most(r, last_update)]
        if last_record is not None and not any(r.get("update") == last_update for r in kept):
            record = json.loads(last_record)
            if record.get("update") == last_update:
                kept.append(record)
        atomic_write(self.metrics_path, "".join(json.dumps(r) + "\n" for r in kept))

    def target_env_steps(self) -> int | None:
        """run.total_env_steps of config.yaml (a resumed run may have raised it); None without a readable one."""
        from ddppo.errors import ConfigError

        try:
            stored = self.read_config()
        except (OSError, ConfigError):
            return None
        return stored.run.total_env_steps if stored is not None else None

    def is_finished(self, last: dict | None = None, default_target: int | None = None) -> bool:
        """Training reached its budget: the last metrics record's env_steps >= run.total_env_steps of config.yaml
        (`default_target` where there is none). `last`: that record, where the caller has read it."""
        last = self.last_metrics() if last is None else last
        target = self.target_env_steps()
        target = default_target if target is None else target
        try:
            return target is not None and last["env_steps"] >= target
        except (KeyError, TypeError):
            return False

    # ---------------------------------------------------------------- checkpoints
    def checkpoint_path(self, update: int) -> Path:
        return self.checkpoint_dir / f"ckpt-{update}.pt"

    def checkpoints(self) -> list[Path]:
        """Checkpoint files, oldest first."""
        if not self.checkpoint_dir.is_dir():
            return []
        found = [(checkpoint_update(p), p) for p in self.checkpoint_dir.iterdir()]
        return [p for u, p in sorted((u, p) for u, p in found if u is not None)]

    def has_checkpoints(self) -> bool:
        return bool(self.checkpoints())

    def set_aside_newer(self, update: int) -> list[tuple[Path, Path]]:
        """Checkpoints of later updates than `update` (just written) belong to an abandoned timeline (a corrupt
        newest one that resume skipped, or a run started with checkpoint.resume=false). Left in place they would
        outrank the new checkpoint in pruning (deleting it) and on the next resume; they are renamed to
        `*.stale`, never deleted. Returns (old, new) names."""
        moved = []
        for path in self.checkpoints():
            if checkpoint_update(path) > update:
                stale = path.with_name(path.name + ".stale")
                os.replace(path, stale)
                moved.append((path, stale))
        return moved

    def prune_checkpoints(self, keep_last: int) -> None:
        """Delete all but the `keep_last` newest checkpoints."""
        for old in self.checkpoints()[:-keep_last]:
            old.unlink(missing_ok=True)

    # ---------------------------------------------------------------- scene_costs.json
    def scene_costs(self) -> dict[str, float]:
        """The measured scene costs written so far ({} where none are, or the file does not read as an object)."""
        data = read_json(self.scene_costs_path)
        return data if isinstance(data, dict) else {}

    def write_scene_costs(self, costs: dict[str, float]) -> None:
        """{scene: seconds per env step}, sorted by scene, atomically."""
        write_json(self.scene_costs_path, {name: costs[name] for name in sorted(costs)}, allow_nan=False)

    # ---------------------------------------------------------------- the one live writer
    def claim_writer(self, stale_after_s: float | None = None) -> Claim:
        """`ddppo train`'s claim on this run dir (DirectoryBusy while another process trains in it; its heartbeat
        is refreshed at every checkpoint, and a holder silent for `stale_after_s` counts as gone). Under the claim,
        checkpoint temp files that a killed writer left (as large as a checkpoint) are removed: only those
        (`.ckpt-<U>.pt.<pid>.tmp`), and none whose pid is a live process on this host."""
        claim = claim_dir(self.path, "ddppo train", "choose another run.dir", "wait for it to finish, or stop it "
                          "(it checkpoints first; a new `ddppo train` then resumes from there)", stale_after_s)
        for tmp in self.checkpoint_dir.iterdir() if self.checkpoint_dir.is_dir() else []:
            m = _CHECKPOINT_TEMP.match(tmp.name)
            if m and not pid_alive(int(m.group(1))):
                log.info("removing %s, left by a writer that was killed mid-write", tmp)
                tmp.unlink(missing_ok=True)
        return claim

    def finished_message(self, total_env_steps: int) -> str | None:
        """What to tell a `ddppo train` that would resume a finished run and train nothing (None if it would
        train): the last metrics record reached `total_env_steps` and the newest checkpoint holds that update."""
        last, newest = self.last_metrics(), self.checkpoints()[-1:]
        try:
            done = last["env_steps"] >= total_env_steps and checkpoint_update(newest[0]) >= last["update"]
        except (KeyError, TypeError, IndexError):
            return None
        if not done:
            return None
        return (f"run.dir={self.path} is already finished: {last['env_steps']:,} of run.total_env_steps="
                f"{total_env_steps:,} env steps, update {last['update']}; nothing to train. To train it further raise "
                f"the budget "
                f"(e.g. run.total_env_steps={2 * max(total_env_steps, last['env_steps'])}); for a new run pass "
                f"another run.dir")

    # ---------------------------------------------------------------- W&B
    def wandb_run_id(self) -> str | None:
        """The W&B run that training in this directory logs to (log.wandb.enabled); None before the first one
        (also where the file is empty or unreadable: a new run is better than an empty id)."""
        try:
            return self.wandb_run_id_path.read_text().strip() or None
        except OSError:
            return None

    def write_wandb_run_id(self, run_id: str) -> None:
        atomic_write(self.wandb_run_id_path, run_id + "\n")

    # ---------------------------------------------------------------- evaluation outputs
    @staticmethod
    def eval_result_path(out_dir: str | Path, name: int | str) -> Path:
        """OUT/<name>.json; an int is an update: ckpt-<update>.json."""
        return Path(out_dir) / f"{_result_name(name)}.json"

    @staticmethod
    def eval_video_stem(out_dir: str | Path, name: int | str) -> Path:
        return Path(out_dir) / "videos" / _result_name(name) / "episode"


def _result_name(name: int | str) -> str:
    return f"ckpt-{name}" if isinstance(name, int) else name


def _update_at_most(record: dict, last_update: int) -> bool:
    try:
        return record["update"] <= last_update
    except (KeyError, TypeError):
        return False


def _unused(path: Path) -> Path:
    """`path`, or `stem.1.yaml`, `stem.2.yaml`, ... : a name nothing has yet (rename overwrites)."""
    candidate, n = path, 0
    while candidate.exists():
        n += 1
        candidate = path.with_name(f"{path.stem}.{n}{path.suffix}")
    return candidate
