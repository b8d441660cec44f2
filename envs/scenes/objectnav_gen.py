"""Generate ObjectNav episodes on generated scenes, in habitat-lab's ObjectNav-v1 format.

    python -m ddppo.envs.scenes.objectnav_gen --scenes-dir data/scene_datasets \\
        --scenes data/scene_datasets/gen/gen_000.glb data/scene_datasets/gen/gen_001.glb \\
        --out data/datasets/objectnav/gen/v1/train --episodes-per-scene 200 --seed 0

The scenes are `ddppo.envs.scenes.scene_gen`'s (`<scene>.layout.json` and the semantic annotations
`<scene>_semantic.{ply,txt}` next to each .glb); every furniture instance of a wanted category is a goal.
Its view points are the navigable points of a `--view-spacing` grid within `--view-radius` of the object's
footprint with a clear line of sight to it in the floor plan, each facing the object. An episode starts on the
navmesh with its nearest view point of the category `--min-geodesic`..`--max-geodesic` away (geodesic).

Written as habitat-lab reads ObjectNav-v1: a split folder `<out>/<split>.json.gz` (no episodes) +
`<out>/content/<scene>.json.gz` (episodes with `object_category`, `goals_by_category` keyed
`<scene>.glb_<category>`), each with `category_to_task_category_id` (the `--categories` order, so train and
held-out splits agree) and `category_to_mp3d_category_id`; `info.geodesic_distance` is to the nearest view point.
Backend: habitat-sim when it imports (needs `<scene>.navmesh`), else the grid double; `--backend` forces one.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import sys
from typing import Any

import numpy as np

from ddppo.envs.base import EnvError
from ddppo.envs.scenes.dataset import scene_name, write_json_gz
from ddppo.envs.scenes.episode_gen import add_scene_arguments, on_each_scene
from ddppo.envs.scenes.geometry import quat_from_yaw
from ddppo.envs.scenes.interface import NavSimulator
from ddppo.envs.scenes.layout import Layout
from ddppo.envs.scenes.semantic import FURNITURE_CATEGORIES, MP3D_CATEGORY_ID, SemanticObject, scene_objects


@dataclasses.dataclass(frozen=True)
class ObjectNavGenParams:
    """Which goals and starts are acceptable (lengths in metres)."""

    categories: tuple[str, ...] = FURNITURE_CATEGORIES  # goal categories; task category id = index here
    min_geodesic: float = 1.0  # start -> nearest view point of the category
    max_geodesic: float = 30.0
    view_radius: float = 1.0  # view points lie within this distance of the object's footprint
    view_spacing: float = 0.25  # grid step of the view point candidates
    max_tries: int = 2000  # start samples per episode before giving up on the scene


@dataclasses.dataclass
class GoalObject:
    """One goal instance with its view points (positions (N, 3), yaws (N,))."""

    obj: SemanticObject
    positions: np.ndarray
    yaws: np.ndarray

    def to_json(self) -> dict[str, Any]:
        o = self.obj
        center = [(a + b) / 2 for a, b in zip(o.lo, o.hi)]
        return {
            "position": [float(v) for v in center], "radius": None, "object_id": int(o.id),
            "object_name": f"{o.category}_{o.id}", "object_name_id": int(o.id), "object_category": o.category,
            "room_id": str(o.region), "room_name": None,
            "view_points": [{"agent_state": {"position": [float(v) for v in p],
                                             "rotation": [float(v) for v in quat_from_yaw(y)]}, "iou": None}
                            for p, y in zip(self.positions, self.yaws)],
        }


def _line_of_sight(layout: Layout, target: SemanticObject, a: np.ndarray, b: np.ndarray) -> bool:
    """True if the floor-plan segment a -> b (x, z) crosses no wall or other furniture box."""
    steps = np.linspace(0.0, 1.0, max(2, int(math.hypot(*(b - a)) / 0.02) + 1))[:-1]
    pts = a[None, :] + steps[:, None] * (b - a)[None, :]
    for box in layout.boxes:
        if tuple(box.lo) == tuple(target.lo) and tuple(box.hi) == tuple(target.hi):
            continue
        inside = ((pts[:, 0] > box.lo[0]) & (pts[:, 0] < box.hi[0]) & (pts[:, 1] > box.lo[2]) & (pts[:, 1] < box.hi[2]))
        if inside.any():
            return False
    return True


def view_points(sim: NavSimulator, layout: Layout, obj: SemanticObject, params: ObjectNavGenParams) -> GoalObject:
    """The navigable, in-sight view points around one object, each facing it."""
    r, s = params.view_radius, params.view_spacing
    xs = np.arange(obj.lo[0] - r, obj.hi[0] + r + 1e-9, s)
    zs = np.arange(obj.lo[2] - r, obj.hi[2] + r + 1e-9, s)
    positions, yaws = [], []
    y = layout.agent_floor_y
    for x in xs:
        for z in zs:
            near = np.array([min(max(x, obj.lo[0]), obj.hi[0]), min(max(z, obj.lo[2]), obj.hi[2])])
            if math.hypot(x - near[0], z - near[1]) > r:
                continue
            p = np.array([x, y, z])
            if not sim.is_navigable(p):
                continue
            snapped = sim.snap_point(p)
            if not np.all(np.isfinite(snapped)) or math.hypot(*(snapped - p)[[0, 2]]) > 0.05:
                continue
            if not _line_of_sight(layout, obj, np.array([x, z]), near):
                continue
            cx, cz = (obj.lo[0] + obj.hi[0]) / 2, (obj.lo[2] + obj.hi[2]) / 2
            positions.append(snapped)
            yaws.append(math.atan2(-(cx - x), -(cz - z)))  # habitat faces -Z at yaw 0
    return GoalObject(obj, np.array(positions, dtype=np.float64).reshape(-1, 3), np.array(yaws, dtype=np.float64))


def nearest_view_point(sim: NavSimulator, start: np.ndarray, goals: list[GoalObject],
                       bound: float = math.inf) -> tuple[float, int]:
    """(geodesic distance from `start` to the nearest view point of `goals`, that goal's index); inf if none
    within `bound`. View points are tried in order of straight-line distance, which bounds the geodesic."""
    cands = [(float(np.hypot(*(p - start)[[0, 2]])), k, p) for k, g in enumerate(goals) for p in g.positions]
    cands.sort(key=lambda c: c[0])
    best, best_k = math.inf, -1
    for euclid, k, p in cands:
        if euclid >= min(best, bound):
            break
        d = sim.geodesic_distance(p, start)  # end=start: the grid double reuses one distance field
        if d < best:
            best, best_k = d, k
    return (best, best_k) if best <= bound else (math.inf, -1)


def scene_goals(sim: NavSimulator, scene_file: str, params: ObjectNavGenParams) -> dict[str, list[GoalObject]]:
    """The wanted categories' goal objects of one scene that have view points, by category."""
    plan = os.path.splitext(scene_file)[0] + ".layout.json"
    if not os.path.isfile(plan):
        raise EnvError(f"scene {scene_file!r} has no floor plan {plan!r} (objectnav_gen needs scene_gen's scenes)")
    layout = Layout.load(plan)
    sim.load_scene(scene_file)
    out: dict[str, list[GoalObject]] = {}
    for obj in scene_objects(scene_file, layout):
        if obj.category in params.categories:
            goal = view_points(sim, layout, obj, params)
            if len(goal.positions):
                out.setdefault(obj.category, []).append(goal)
    return out


def generate_for_scene(sim: NavSimulator, scene_file: str, scene_id: str, num: int, seed: int,
                       params: ObjectNavGenParams = ObjectNavGenParams()) -> dict[str, Any]:
    """One content file's data ({episodes, goals_by_category}) for one scene, deterministic given the seed."""
    goals = scene_goals(sim, scene_file, params)
    if not goals:
        raise EnvError(f"scene {scene_file!r} has no reachable object of the categories {list(params.categories)}")
    sim.seed(seed)
    rng = np.random.default_rng(seed)
    cats = sorted(goals)
    episodes = []
    for k in range(num):
        cat = cats[int(rng.integers(len(cats)))]
        for _ in range(params.max_tries):
            start = sim.sample_navigable_point()
            if not np.all(np.isfinite(start)):
                continue
            d, g = nearest_view_point(sim, start, goals[cat], params.max_geodesic)
            if math.isfinite(d) and d >= params.min_geodesic:
                break
        else:
            raise EnvError(f"scene {scene_file!r}: no start {params.min_geodesic}-{params.max_geodesic} m from a "
                           f"{cat!r} after {params.max_tries} samples (episode {k}); loosen --min/--max-geodesic")
        episodes.append({
            "episode_id": str(k), "scene_id": scene_id, "start_position": [float(v) for v in start],
            "start_rotation": [float(v) for v in quat_from_yaw(float(rng.uniform(0, 2 * math.pi)))],
            "info": {"geodesic_distance": float(d), "closest_goal_object_id": int(goals[cat][g].obj.id)},
            "goals": [], "object_category": cat, "shortest_paths": None,
        })
    key = os.path.basename(scene_id)
    return {"episodes": episodes,
            "goals_by_category": {f"{key}_{c}": [g.to_json() for g in goals[c]] for c in cats}}


def category_maps(categories: tuple[str, ...]) -> dict[str, dict[str, int]]:
    return {"category_to_task_category_id": {c: k for k, c in enumerate(categories)},
            "category_to_mp3d_category_id": {c: MP3D_CATEGORY_ID.get(c, MP3D_CATEGORY_ID["furniture"])
                                             for c in categories}}


def write_objectnav_split(folder: str, per_scene: dict[str, dict[str, Any]], categories: tuple[str, ...]) -> list[str]:
    """`<folder>/<split>.json.gz` + `content/<scene>.json.gz`, each carrying the category maps."""
    maps = category_maps(categories)
    written = []
    for scene_id, data in sorted(per_scene.items()):
        written.append(os.path.join(folder, "content", f"{scene_name(scene_id)}.json.gz"))
        write_json_gz(written[-1], {**data, **maps})
    written.append(os.path.join(folder, f"{os.path.basename(os.path.normpath(folder))}.json.gz"))
    write_json_gz(written[-1], {"episodes": [], **maps})
    return written


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m ddppo.envs.scenes.objectnav_gen", description=__doc__.split("\n\n")[0])
    add_scene_arguments(p)
    p.add_argument("--out", required=True, help="split folder to write (<out>/<split>.json.gz + content/)")
    p.add_argument("--categories", nargs="+", default=list(FURNITURE_CATEGORIES),
                   help=f"goal categories, in task-id order (known: {', '.join(FURNITURE_CATEGORIES)})")
    d = ObjectNavGenParams()
    p.add_argument("--min-geodesic", type=float, default=d.min_geodesic)
    p.add_argument("--max-geodesic", type=float, default=d.max_geodesic)
    p.add_argument("--view-radius", type=float, default=d.view_radius)
    p.add_argument("--view-spacing", type=float, default=d.view_spacing)
    p.add_argument("--max-tries", type=int, default=d.max_tries)
    return p


def _check_args(args: argparse.Namespace) -> str | None:
    unknown = [c for c in args.categories if c not in FURNITURE_CATEGORIES]
    if unknown:
        return f"--categories {unknown} are not categories of the generated scenes ({', '.join(FURNITURE_CATEGORIES)})"
    if len(set(args.categories)) != len(args.categories):
        return f"--categories {args.categories} names a category twice"
    if not (0 <= args.min_geodesic <= args.max_geodesic and args.episodes_per_scene > 0):
        return "need 0 <= --min-geodesic <= --max-geodesic and --episodes-per-scene > 0"
    if not (args.view_radius > 0 and args.view_spacing > 0):
        return "need --view-radius > 0 and --view-spacing > 0"
    return None


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    problem = _check_args(args)
    if problem:
        print(f"error: {problem}")
        return 2
    params = ObjectNavGenParams(tuple(args.categories), args.min_geodesic, args.max_geodesic, args.view_radius,
                                args.view_spacing, args.max_tries)
    found: set[str] = set()

    def one_scene(sim: NavSimulator, scene_file: str, scene_id: str, seed: int) -> dict[str, Any]:
        data = generate_for_scene(sim, scene_file, scene_id, args.episodes_per_scene, seed=seed, params=params)
        cats = sorted({e["object_category"] for e in data["episodes"]})
        found.update(key.rsplit("_", 1)[1] for key in data["goals_by_category"])
        geo = [e["info"]["geodesic_distance"] for e in data["episodes"]]
        print(f"{scene_id}: {len(geo)} episodes ({', '.join(cats)}), geodesic {min(geo):.2f}-{max(geo):.2f} m, "
              f"{sum(len(g['view_points']) for v in data['goals_by_category'].values() for g in v)} view points")
        return data

    try:
        backend, results = on_each_scene(args, one_scene)
        per_scene = dict(results)
        missing = [c for c in params.categories if c not in found]
        if missing:
            raise EnvError(f"no scene has a reachable object of categor{'y' if len(missing) == 1 else 'ies'} "
                           f"{missing}; drop them from --categories or add scenes")
        written = write_objectnav_split(args.out, per_scene, params.categories)
        print(f"wrote {sum(len(d['episodes']) for d in per_scene.values())} episodes ({backend} backend) to "
              f"{', '.join(written)}")
        return 0
    except (EnvError, OSError) as err:
        print(f"error: {err}")
        return 2

if __name__ == "__main__":
    sys.exit(main())
