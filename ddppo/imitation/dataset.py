"""The demonstration dataset: shards of whole episodes and a manifest that says what is there
(docs/guides/imitation.md).

    DIR/manifest.json          format, version, env name, the recording's config (YAML), observation and action
                               spaces, what was asked (episodes, world size, expert), and the shards known when it
                               was last written, with the totals and `complete`
    DIR/shards/r<rank>.json    each recording rank's journal: its complete shards, rewritten (temp + rename) after
                               every shard; what a reader trusts
    DIR/shards/r<rank>-<i>.npz a shard: `obs.<key>` (steps, ...) in the space's dtype, `actions` (steps,) or
                               (steps, A), `rewards` (steps,), `lengths` (episodes,), `success` (episodes,; NaN where
                               the env reports none), `terminated` (episodes,): episodes one after the other

Every file is written to a temporary name and renamed, so a killed recording leaves complete shards and journals
that list exactly those; anything else in shards/ (a shard written but not journaled) is deleted on `--resume`.
Each journal entry holds the shard's size and sha256, checked when a dataset is read: a truncated or altered
shard is refused naming the file.

Why not Minari: docs/guides/imitation.md ("The format") has the measurement; in short, a Minari dataset is one
HDF5 file written by one process from one gymnasium env's episodes, kept in memory until written, so several
ranks cannot write one dataset and a killed recording keeps nothing.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any, Iterator

import gymnasium
import numpy as np

from ddppo.errors import DatasetError
from ddppo.files import atomic_write, file_sha256

FORMAT, VERSION = "ddppo-demonstrations", 1
MANIFEST = "manifest.json"
SHARDS = "shards"


# ------------------------------------------------------------------------------------------------- spaces
def describe_space(space: gymnasium.spaces.Space) -> dict[str, Any]:
    """A JSON description of a Box or Discrete space (the bounds as their overall min and max)."""
    if isinstance(space, gymnasium.spaces.Discrete):
        return {"type": "discrete", "n": int(space.n)}
    if isinstance(space, gymnasium.spaces.Box):
        low, high = np.asarray(space.low, np.float64), np.asarray(space.high, np.float64)
        return {"type": "box", "shape": list(space.shape), "dtype": str(space.dtype),
                "low": _json_float(low.min()) if low.size else 0.0,
                "high": _json_float(high.max()) if high.size else 0.0}
    raise DatasetError(f"cannot record a {type(space).__name__} space: Box and Discrete are supported")


def _json_float(x: float) -> float | str:
    return float(x) if np.isfinite(x) else ("inf" if x > 0 else "-inf")


def describe_spaces(obs_space: gymnasium.spaces.Dict, action_space: gymnasium.spaces.Space) -> dict[str, Any]:
    return {"observation_space": {k: describe_space(s) for k, s in sorted(obs_space.spaces.items())},
            "action_space": describe_space(action_space)}


def space_mismatch(recorded: dict[str, Any], obs_space: gymnasium.spaces.Dict,
                   action_space: gymnasium.spaces.Space) -> str:
    """"" when the spaces are the ones recorded, else what differs (keys, shapes, dtypes, the action space)."""
    now = describe_spaces(obs_space, action_space)
    had, has = recorded["observation_space"], now["observation_space"]
    out = []
    if sorted(had) != sorted(has):
        out.append(f"observation keys: dataset {sorted(had)}, this env {sorted(has)}")
    for k in sorted(set(had) & set(has)):
        if had[k] != has[k]:
            out.append(f"observation {k!r}: dataset {_space_text(had[k])}, this env {_space_text(has[k])}")
    if recorded["action_space"] != now["action_space"]:
        out.append(f"action space: dataset {_space_text(recorded['action_space'])}, "
                   f"this env {_space_text(now['action_space'])}")
    return "; ".join(out)


def _space_text(d: dict[str, Any]) -> str:
    if d["type"] == "discrete":
        return f"Discrete({d['n']})"
    return f"Box{tuple(d['shape'])} {d['dtype']} [{d['low']}, {d['high']}]"


# ------------------------------------------------------------------------------------------------- files
def journal_path(root: Path, rank: int) -> Path:
    return root / SHARDS / f"r{rank:03d}.json"


def shard_name(rank: int, index: int) -> str:
    return f"r{rank:03d}-{index:05d}.npz"


@dataclasses.dataclass
class Episodes:
    """Whole episodes, one after the other: `obs[key]` (steps, ...), `actions`, `rewards` (steps, ...);
    `lengths`, `success`, `terminated` (episodes,)."""

    obs: dict[str, np.ndarray]
    actions: np.ndarray
    rewards: np.ndarray
    lengths: np.ndarray
    success: np.ndarray
    terminated: np.ndarray

    @property
    def num_episodes(self) -> int:
        return int(self.lengths.shape[0])

    @property
    def num_steps(self) -> int:
        return int(self.actions.shape[0])

    @property
    def starts(self) -> np.ndarray:
        """(episodes,) the first step of each episode."""
        return np.concatenate([[0], np.cumsum(self.lengths)[:-1]]).astype(np.int64)

    def arrays(self) -> dict[str, np.ndarray]:
        return {**{f"obs.{k}": v for k, v in self.obs.items()}, "actions": self.actions, "rewards": self.rewards,
                "lengths": self.lengths, "success": self.success, "terminated": self.terminated}

    @classmethod
    def concatenate(cls, parts: list[Episodes]) -> Episodes:
        return cls({k: np.concatenate([p.obs[k] for p in parts]) for k in parts[0].obs},
                   *(np.concatenate([getattr(p, f) for p in parts])
                     for f in ("actions", "rewards", "lengths", "success", "terminated")))


def write_shard(root: Path, rank: int, index: int, episodes: Episodes) -> dict[str, Any]:
    """Write one shard (temp + rename) and return its journal entry; the journal is the caller's to update."""
    path = root / SHARDS / shard_name(rank, index)
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:
        np.savez(f, **episodes.arrays())
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return {"file": path.name, "rank": rank, "index": index, "episodes": episodes.num_episodes,
            "steps": episodes.num_steps, "bytes": path.stat().st_size, "sha256": file_sha256(path)}


def write_journal(root: Path, rank: int, entries: list[dict[str, Any]]) -> None:
    atomic_write(journal_path(root, rank), json.dumps({"rank": rank, "shards": entries}, indent=1).encode(), fsync=True)


def read_journal(root: Path, rank: int) -> list[dict[str, Any]]:
    path = journal_path(root, rank)
    if not path.is_file():
        return []
    return _read_json(path)["shards"]


def _read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise DatasetError(f"{path}: not a readable JSON file ({err}); record the dataset again") from None


def all_shards(root: Path) -> list[dict[str, Any]]:
    """Every journaled shard of every rank, in (rank, index) order."""
    entries = []
    for path in sorted((root / SHARDS).glob("r*.json")):
        entries += _read_json(path)["shards"]
    return sorted(entries, key=lambda e: (e["rank"], e["index"]))


def write_manifest(root: Path, header: dict[str, Any], complete: bool = False) -> dict[str, Any]:
    """manifest.json: `header` (format, env, config, spaces, what was asked) with the journaled shards and totals."""
    shards = all_shards(root)
    manifest = {**header, "shards": shards, "episodes": sum(s["episodes"] for s in shards),
                "steps": sum(s["steps"] for s in shards), "complete": complete}
    atomic_write(root / MANIFEST, json.dumps(manifest, indent=1).encode(), fsync=True)
    return manifest


def read_header(root: str | Path) -> dict[str, Any]:
    """The manifest of dataset `root`; DatasetError naming the file when there is none or it is not ddppo's."""
    path = Path(root) / MANIFEST
    if not path.is_file():
        raise DatasetError(f"{path} does not exist: imitation.data must name a directory `ddppo record` wrote")
    manifest = _read_json(path)
    if manifest.get("format") != FORMAT or manifest.get("version") != VERSION:
        raise DatasetError(f"{path} is not a {FORMAT} manifest of version {VERSION} (format "
                           f"{manifest.get('format')!r}, version {manifest.get('version')!r})")
    return manifest


# ------------------------------------------------------------------------------------------------- reading
class Dataset:
    """A recorded dataset, opened: the manifest and every journaled shard (checked when loaded)."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.manifest = read_header(self.root)
        self.shards = all_shards(self.root)
        if not self.shards:
            raise DatasetError(f"{self.root} holds no complete shard (manifest {self.root / MANIFEST}); record "
                               f"episodes into it (`ddppo record ... --out {self.root} --resume`)")

    @property
    def env_name(self) -> str:
        return self.manifest["env"]

    @property
    def num_episodes(self) -> int:
        return sum(s["episodes"] for s in self.shards)

    @property
    def num_steps(self) -> int:
        return sum(s["steps"] for s in self.shards)

    def check_fits(self, env_name: str, obs_space: gymnasium.spaces.Dict, action_space: gymnasium.spaces.Space,
                   ) -> None:
        """DatasetError naming the env, keys, shapes or action space when the dataset was recorded elsewhere."""
        where = self.root / MANIFEST
        if self.env_name != env_name:
            raise DatasetError(f"{where} was recorded on env.name={self.env_name}, not {env_name}: record on this "
                               f"env, or set env.name={self.env_name}")
        found = space_mismatch(self.manifest, obs_space, action_space)
        if found:
            raise DatasetError(f"{where} does not fit this env's spaces ({found}): record with this config's env "
                               f"options")

    def load(self, entries: list[dict[str, Any]] | None = None) -> Episodes:
        """The episodes of `entries` (default every shard), each shard checked against its journal entry."""
        return Episodes.concatenate([load_shard(self.root, e, self.manifest) for e in (entries or self.shards)])


def load_shard(root: Path, entry: dict[str, Any], manifest: dict[str, Any]) -> Episodes:
    """One shard, checked: present, of the journaled size and sha256, with the arrays its manifest describes."""
    path = root / SHARDS / entry["file"]
    fix = f"delete it and its entry in {journal_path(root, entry['rank']).name}, then `ddppo record ... --resume`"
    if not path.is_file():
        raise DatasetError(f"shard {path} is listed in the journal but missing; {fix}")
    size = path.stat().st_size
    if size != entry["bytes"]:
        raise DatasetError(f"shard {path} is truncated or altered ({size} bytes, {entry['bytes']} recorded); {fix}")
    if size == 0 or file_sha256(path) != entry["sha256"]:
        raise DatasetError(f"shard {path} does not match its recorded sha256 (altered or corrupt); {fix}")
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except (OSError, ValueError) as err:
        raise DatasetError(f"shard {path} cannot be read ({err}); {fix}") from None
    keys = sorted(manifest["observation_space"])
    missing = [k for k in (*(f"obs.{k}" for k in keys), "actions", "rewards", "lengths", "success", "terminated")
               if k not in arrays]
    if missing:
        raise DatasetError(f"shard {path} lacks the arrays {missing}; {fix}")
    eps = Episodes({k: arrays[f"obs.{k}"] for k in keys}, arrays["actions"], arrays["rewards"], arrays["lengths"],
                   arrays["success"], arrays["terminated"])
    if int(eps.lengths.sum()) != eps.num_steps or eps.num_steps != entry["steps"] or \
            any(v.shape[0] != eps.num_steps for v in eps.obs.values()):
        raise DatasetError(f"shard {path}: its episode lengths, steps and observations disagree; {fix}")
    return eps


def episode_slices(episodes: Episodes) -> Iterator[slice]:
    for start, length in zip(episodes.starts, episodes.lengths):
        yield slice(int(start), int(start + length))
