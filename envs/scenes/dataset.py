"""habitat's standard PointNav episode format: read, write, partition, iterate.

A dataset is gzipped JSON `{"episodes": [...]}`; each episode has
`episode_id`, `scene_id`, `start_position` [x, y, z], `start_rotation`
[x, y, z, w], `goals` [{`position`, `radius`}] and `info.geodesic_distance`
(other keys are kept and written back). It comes as one file, or as a split
folder `<split>/<split>.json.gz` (no episodes) + `<split>/content/<scene>.json.gz`,
so the public Gibson / MP3D / HM3D PointNav datasets load as they are.
`scene_id` is relative to a scenes root (a leading `data/scene_datasets/` is
dropped first, as habitat-lab does) unless it is absolute.
"""

from __future__ import annotations

import dataclasses
import glob
import gzip
import json
import os
from typing import Any, Sequence

import numpy as np

from ddppo.envs.base import EnvError
from ddppo.envs.placement import place_scenes, replacement, scene_costs

DEFAULT_SCENE_PREFIX = "data/scene_datasets/"
_KNOWN = ("episode_id", "scene_id", "start_position", "start_rotation", "goals", "info")


@dataclasses.dataclass
class Goal:
    position: list[float]
    radius: float | None = None


@dataclasses.dataclass
class Episode:
    episode_id: str
    scene_id: str
    start_position: list[float]
    start_rotation: list[float]  # [x, y, z, w]
    goals: list[Goal]
    info: dict[str, Any] = dataclasses.field(default_factory=dict)
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)  # other keys of the record, kept as they are

    @property
    def geodesic_distance(self) -> float | None:
        d = self.info.get("geodesic_distance") if self.info else None
        return None if d is None else float(d)

    def to_json(self) -> dict[str, Any]:
        out = {
            "episode_id": self.episode_id,
            "scene_id": self.scene_id,
            "start_position": [float(v) for v in self.start_position],
            "start_rotation": [float(v) for v in self.start_rotation],
            "goals": [{"position": [float(v) for v in g.position], "radius": g.radius} for g in self.goals],
            "info": self.info,
        }
        out.update(self.extra)
        return out

    @classmethod
    def from_json(cls, rec: dict[str, Any]) -> "Episode":
        missing = [k for k in ("episode_id", "scene_id", "start_position", "start_rotation", "goals") if k not in rec]
        if missing:
            raise ValueError(f"missing {', '.join(missing)}")
        pos, rot = [float(v) for v in rec["start_position"]], [float(v) for v in rec["start_rotation"]]
        if len(pos) != 3 or len(rot) != 4:
            raise ValueError("start_position needs 3 numbers and start_rotation 4 ([x, y, z, w])")
        goals = [Goal([float(v) for v in g["position"]], None if g.get("radius") is None else float(g["radius"]))
                 for g in rec["goals"]]
        if not goals or any(len(g.position) != 3 for g in goals):
            raise ValueError("goals must be a non-empty list of {position: [x, y, z], radius}")
        return cls(str(rec["episode_id"]), str(rec["scene_id"]), pos, rot, goals, dict(rec.get("info") or {}),
                   {k: v for k, v in rec.items() if k not in _KNOWN})


# ---------------------------------------------------------------- files
def _load_json(path: str) -> dict[str, Any]:
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rt") as f:
            data = json.load(f)
    except (OSError, ValueError) as err:
        raise EnvError(f"dataset file {path!r} is not readable gzipped JSON: {err}") from err
    if not isinstance(data, dict) or not isinstance(data.get("episodes"), list):
        raise EnvError(f"dataset file {path!r} has no 'episodes' list (not a habitat PointNav dataset)")
    return data


def _parse(path: str) -> list[Episode]:
    out = []
    for k, rec in enumerate(_load_json(path)["episodes"]):
        try:
            out.append(Episode.from_json(rec))
        except (ValueError, TypeError, KeyError, AttributeError) as err:
            eid = rec.get("episode_id", "?") if isinstance(rec, dict) else "?"
            raise EnvError(f"dataset file {path!r}: episode #{k} (episode_id {eid!r}) is malformed: {err}") from err
    return out


def _content_files(folder: str) -> list[str]:
    files = sorted(glob.glob(os.path.join(folder, "*.json.gz")) + glob.glob(os.path.join(folder, "*.json")))
    if not files:
        raise EnvError(f"dataset folder {folder!r} holds no *.json.gz episode files")
    return files


def _sources(path: str) -> tuple[list[str], list[Episode] | None]:
    """(per-scene content files, None) for a split folder; ([], episodes) for a single file."""
    if not path:
        raise EnvError("no dataset given: set env.habitat.dataset to a .json.gz file or a split folder")
    if os.path.isdir(path):
        content = os.path.join(path, "content")
        return _content_files(content if os.path.isdir(content) else path), None
    if not os.path.isfile(path):
        raise EnvError(f"dataset {path!r} does not exist")
    episodes = _parse(path)
    content = os.path.join(os.path.dirname(path), "content")
    if not episodes and os.path.isdir(content):
        return _content_files(content), None
    return [], episodes


def read_episodes(path: str) -> list[Episode]:
    """Episodes of a dataset file, or of a split folder (content/*.json.gz or *.json.gz)."""
    files, episodes = _sources(path)
    return episodes if episodes is not None else [ep for f in files for ep in _parse(f)]


def read_partition(path: str, groups: int, group: int, scenes: list[str] = (), num_envs: int = 1,
                   split: str = "scenes", costs: dict[str, float] | None = None) -> list[Episode]:
    """The episodes of worker group `group` of `groups` (disjoint groups that cover the dataset), each group
    holding `num_envs` envs.

    A split folder is divided by its per-scene content files (`group_runs`): whole files per group where every
    group then has an episode per env, so a worker parses only its own scenes' files; otherwise (a group would
    hold fewer episodes than envs) the episodes are cut evenly over the groups so no env replays an episode while
    another goes unused. Counting needs every file read: folders over COUNT_LIMIT_BYTES (the public datasets,
    whose scenes hold thousands of episodes each) are dealt out by files alone. A single file is read whole and
    cut like `partition`. `split="cost"` places whole scenes by `costs` (`cost_placement`), files alone too.
    """
    files, episodes = _sources(path)
    if episodes is not None:
        episodes = filter_scenes(episodes, list(scenes))
        if not episodes:
            raise EnvError(f"dataset {path!r} has no episodes for env.habitat.scenes={list(scenes)}")
        return [episodes[k] for k in partition(episodes, groups, group)]
    if scenes:
        files = [f for f in files if scene_name(f) in set(scenes)]
        if not files:
            raise EnvError(f"dataset {path!r} has no content file for env.habitat.scenes={list(scenes)}")
    if _countable(files):
        parsed = [filter_scenes(_parse(f), list(scenes)) for f in files]
        weights = scene_costs([scene_name(f) for f in files], costs or {}) if split == "cost" else None
        mine = [ep for s, a, b in group_runs([len(p) for p in parsed], groups, group, num_envs, split, weights)
                for ep in parsed[s][a:b]]
        if not mine:
            raise EnvError(f"dataset {path!r} has no episodes")
        return mine
    n = len(files)
    if n >= groups:
        if split == "cost":
            mine = [files[s] for s in cost_placement(scene_costs([scene_name(f) for f in files], costs or {}),
                                                     groups)[group]]
        else:
            mine = files[group * n // groups:(group + 1) * n // groups]
        return [ep for f in mine for ep in filter_scenes(_parse(f), list(scenes))]
    k = group * n // groups  # this group's file, shared with the groups mapped to the same file
    sharing = [g for g in range(groups) if g * n // groups == k]
    episodes = filter_scenes(_parse(files[k]), list(scenes))
    if not episodes:
        raise EnvError(f"dataset file {files[k]!r} has no episodes")
    return [episodes[j] for j in partition(episodes, len(sharing), group - sharing[0])]


# ------------------------------------------------------------------ which (rank, worker) group plays which episodes
COUNT_LIMIT_BYTES = 64 << 20  # a split folder up to this size is counted whole so no env need replay (group_runs)
Run = tuple  # (scene index, first episode, end): a contiguous run of one scene's episodes, in dataset order


def scene_wise_runs(counts: list[int], groups: int) -> list[list[Run]]:
    """Per group, its runs when scenes are dealt out whole: contiguous scenes per group (`groups` <= scenes), or
    the groups mapped to one scene splitting its episodes (more groups than scenes; `partition`'s rule). Each
    scene file is then read by the groups that play it only."""
    n, out = len(counts), []
    for g in range(groups):
        if n >= groups:
            out.append([(s, 0, counts[s]) for s in range(g * n // groups, (g + 1) * n // groups)])
            continue
        k = g * n // groups
        sharing = [h for h in range(groups) if h * n // groups == k]
        place, m, c = g - sharing[0], len(sharing), counts[k]
        out.append([(k, place % c, place % c + 1)] if 0 < c < m else [(k, place * c // m, (place + 1) * c // m)])
    return out


def balanced_runs(counts: list[int], groups: int) -> list[list[Run]]:
    """Per group, its runs when every episode of every scene, in scene order, is cut into `groups` contiguous
    near-equal parts (with fewer episodes than groups, group g plays episode g mod total)."""
    total = sum(counts)
    starts = np.concatenate([[0], np.cumsum(counts)]).astype(int).tolist()
    out = []
    for g in range(groups):
        lo, hi = (g % total, g % total + 1) if 0 < total < groups else (g * total // groups, (g + 1) * total // groups)
        out.append([(s, max(lo, starts[s]) - starts[s], min(hi, starts[s + 1]) - starts[s])
                    for s in range(len(counts)) if max(lo, starts[s]) < min(hi, starts[s + 1])])
    return out


def cost_placement(costs: Sequence[float], groups: int) -> list[list[int]]:
    """Per group, the scenes it plays when whole scenes are placed by cost (`groups` <= scenes): every group as many
    scenes as the others (one more for the first where they do not divide), heaviest first to the group of least
    summed cost (envs/placement.py `place_scenes`), so the groups' summed costs come out as equal as whole scenes
    allow. The same answer in every group for the same costs."""
    return place_scenes([1] * len(costs), costs, groups, "cost")


def cost_runs(counts: list[int], costs: Sequence[float], groups: int) -> list[list[Run]] | None:
    """Per group, its runs when the scenes that have episodes are placed whole by cost (`cost_placement`); None
    where they are fewer than the groups."""
    present = [s for s, c in enumerate(counts) if c > 0]
    if len(present) < groups:
        return None
    placed = cost_placement([float(costs[s]) for s in present], groups)
    return [[(present[k], 0, counts[present[k]]) for k in group] for group in placed]


def scene_file_names(path: str, scenes: Sequence[str]) -> list[str]:
    """The scene names of a split folder's content files (after the `scenes` filter), what split="cost" places
    whole; [] for a single-file dataset, whose episodes are cut evenly (read once: the caller keeps the answer)."""
    files, episodes = _sources(path)
    if episodes is not None:
        return []
    return [scene_name(f) for f in files if not scenes or scene_name(f) in set(scenes)]


def moved_placement(names: Sequence[str], groups: int, placed_by: dict[str, float],
                    measured: dict[str, float]) -> list[list[int]] | None:
    """split="cost" during a run: per group, the scenes (indices into `names`, `scene_file_names`) a placement by
    the `measured` costs gives it, where that makes the slowest group measurably cheaper than the placement by
    `placed_by` (envs/placement.py `replacement`); None where it does not, or where costs place nothing (fewer
    scenes than groups: the episodes are cut evenly). The same answer in every group."""
    if len(names) < groups:
        return None
    current = cost_placement(scene_costs(names, placed_by), groups)
    return replacement(current, [1] * len(names), scene_costs(names, measured), groups)


EPISODE_SPLITS = ("scenes", "episodes", "cost")


def group_runs(counts: list[int], groups: int, group: int, num_envs: int, split: str = "scenes",
               costs: Sequence[float] | None = None) -> list[Run]:
    """The runs of episodes group `group` of `groups` plays, given every scene's episode count (the same answer in
    every group). Scenes are dealt out whole (`scene_wise_runs`: each group reads only its own scene files) unless
    that leaves some group fewer episodes than its `num_envs` envs, whose envs would replay episodes while others
    go unused, or gives two groups the same episode (a scene with fewer episodes than the groups mapped to it): then the episodes are cut evenly over the groups (`balanced_runs`), so no env replays an episode
    whenever the episodes are at least the env slots (groups x num_envs).

    Every group's envs step alike, so a scene's share of the experience is the mean over groups of its share of
    each group's episodes: dealt out whole, a scene holding 1% of the episodes alone in a group gets that group's
    whole share (issue 44: counts [1000, 10] over 2 groups, 50% each). `split="episodes"` (env.habitat.
    episode_split) always cuts evenly, so every scene's share of the experience follows its share of the episodes
    (within one episode per group); `experience_shares` computes both. `split="cost"` deals whole scenes placed by
    `costs` (each scene's seconds per env step: `cost_runs`) so the groups run at one speed, under the same rule
    as `scenes` (cut evenly where that leaves a group short, or where the scenes are fewer than the groups)."""
    if split not in EPISODE_SPLITS:
        raise ValueError(f"split={split!r}: use one of {', '.join(EPISODE_SPLITS)}")
    if split == "episodes":
        return balanced_runs(counts, groups)[group]
    if split == "cost":
        if costs is None or len(costs) != len(counts):
            raise ValueError(f"split='cost' needs one cost per scene ({len(counts)} scenes)")
        wise = cost_runs(counts, costs, groups) or balanced_runs(counts, groups)
    else:
        wise = scene_wise_runs(counts, groups)
    sizes = [sum(b - a for _, a, b in runs) for runs in wise]
    if min(sizes) >= num_envs and sum(sizes) == sum(counts):  # (a scene with fewer episodes than its groups: shared)
        return wise[group]
    return balanced_runs(counts, groups)[group]


def experience_shares(counts: list[int], groups: int, num_envs: int, split: str = "scenes",
                      costs: Sequence[float] | None = None) -> list[float]:
    """Each scene's share of the experience when every group's envs step alike and play their group's episodes in
    turn (the mean over groups of the scene's share of the group's episodes)."""
    shares = [0.0] * len(counts)
    for group in range(groups):
        runs = group_runs(counts, groups, group, num_envs, split, costs)
        size = sum(b - a for _, a, b in runs)
        for s, a, b in runs:
            shares[s] += (b - a) / size / groups
    return shares


def _countable(files: list[str]) -> bool:
    """True if these content files are small enough for every group to read them all (to count episodes)."""
    return sum(os.path.getsize(f) for f in files) <= COUNT_LIMIT_BYTES


def write_json_gz(path: str, data: dict[str, Any]) -> None:
    """One gzipped JSON file, written atomically and byte-reproducibly (no name or time in the gzip header)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    encoded = json.dumps(data).encode()
    with open(tmp, "wb") as raw, gzip.GzipFile(filename="", fileobj=raw, mode="wb", mtime=0) as f:
        f.write(encoded)
    os.replace(tmp, path)


def write_episodes(path: str, episodes: list[Episode]) -> None:
    """One PointNav episode file (`write_json_gz`)."""
    write_json_gz(path, {"episodes": [ep.to_json() for ep in episodes]})


def write_split(folder: str, episodes: list[Episode], split: str | None = None) -> list[str]:
    """habitat's split layout: `<folder>/<split>.json.gz` (empty) + `content/<scene>.json.gz`."""
    split = split or os.path.basename(os.path.normpath(folder))
    by_scene: dict[str, list[Episode]] = {}
    for ep in episodes:
        by_scene.setdefault(scene_name(ep.scene_id), []).append(ep)
    written = []
    for name, eps in sorted(by_scene.items()):
        written.append(os.path.join(folder, "content", f"{name}.json.gz"))
        write_episodes(written[-1], eps)
    written.append(os.path.join(folder, f"{split}.json.gz"))
    write_episodes(written[-1], [])
    return written


# ---------------------------------------------------------------- scenes
def scene_name(scene_id: str) -> str:
    """`gibson/Adrian.glb` -> `Adrian`."""
    return os.path.basename(scene_id).split(".")[0]


def resolve_scene(scene_id: str, scenes_dir: str) -> str:
    """The scene file of an episode's scene_id under the scenes root."""
    if os.path.isabs(scene_id):
        return scene_id
    if scene_id.startswith(DEFAULT_SCENE_PREFIX):
        scene_id = scene_id[len(DEFAULT_SCENE_PREFIX):]
    return os.path.join(scenes_dir, scene_id)


def filter_scenes(episodes: list[Episode], scenes: list[str]) -> list[Episode]:
    if not scenes:
        return episodes
    wanted = set(scenes)
    return [ep for ep in episodes if scene_name(ep.scene_id) in wanted]


# ---------------------------------------------------------------- partition & order
def partition(episodes: list[Episode], num_slots: int, slot: int) -> list[int]:
    """Indices of the episodes env `slot` of `num_slots` plays in one pass.

    Episodes are ordered by scene, then cut into `num_slots` contiguous chunks,
    so every episode belongs to exactly one slot and each slot touches few
    scenes (switching scenes is the expensive part of a reset). With fewer
    episodes than slots, slot k plays episode k mod n (some repeat).
    """
    if not 0 <= slot < num_slots:
        raise ValueError(f"slot {slot} is not in [0, {num_slots})")
    n = len(episodes)
    if n == 0:
        raise EnvError("the dataset has no episodes (after env.habitat.scenes filtering)")
    order = sorted(range(n), key=lambda k: (episodes[k].scene_id, k))
    if n < num_slots:
        return [order[slot % n]]
    return order[slot * n // num_slots:(slot + 1) * n // num_slots]


class EpisodeIterator:
    """Endless passes over one slot's episodes; each pass reshuffled (grouped by scene)."""

    def __init__(self, indices: list[int], scene_of: list[str], seed: int | list[int], shuffle: bool = True):
        self._indices = list(indices)
        self._scene_of = scene_of
        self._shuffle = shuffle
        self._rng = np.random.default_rng(seed)
        self._order: list[int] = []
        self._pos = 0

    @property
    def indices(self) -> list[int]:
        return list(self._indices)

    def _new_pass(self) -> None:
        if not self._shuffle:
            self._order = list(self._indices)
        else:
            groups: dict[str, list[int]] = {}
            for k in self._indices:
                groups.setdefault(self._scene_of[k], []).append(k)
            names = sorted(groups)
            self._rng.shuffle(names)
            self._order = []
            for name in names:
                group = groups[name]
                self._rng.shuffle(group)
                self._order += group
        self._pos = 0

    def __next__(self) -> int:
        if self._pos >= len(self._order):
            self._new_pass()
        k = self._order[self._pos]
        self._pos += 1
        return k

    def state_dict(self) -> dict[str, Any]:
        return {"order": list(self._order), "pos": self._pos, "rng": self._rng.bit_generator.state}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._order = [int(k) for k in state["order"]]
        self._pos = int(state["pos"])
        self._rng.bit_generator.state = state["rng"]
