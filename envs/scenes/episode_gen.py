"""Generate PointNav episodes on scenes' navmeshes, in habitat's standard format.

    python -m ddppo.envs.scenes.episode_gen --scenes-dir data/scene_datasets --scenes gen/gen_000.glb gen/gen_001.glb \\
        --out data/datasets/pointnav/gen/train --episodes-per-scene 200 --seed 0

Start and goal are sampled on the navmesh, must be connected (finite geodesic
distance, i.e. the same island), on the same floor, within geodesic-distance
bounds, and not a trivial straight line (geodesic / euclidean ratio at least
`--min-ratio`). `--out` ending in .json.gz writes one file; otherwise a split
folder (`<out>/<split>.json.gz` + `<out>/content/<scene>.json.gz`).

Backend: habitat-sim when it imports (needs `<scene>.navmesh`), else the grid
double (needs `<scene>.layout.json` from scene_gen); `--backend` forces one.
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import math
import os
import sys
from typing import Callable, TypeVar

import numpy as np

from ddppo.envs.base import EnvError
from ddppo.envs.scenes.dataset import Episode, Goal, write_episodes, write_split
from ddppo.envs.scenes.geometry import quat_from_yaw
from ddppo.envs.scenes.backends import make_simulator
from ddppo.envs.scenes.interface import NavSimulator, SimSettings

T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class EpisodeGenParams:
    """What makes a start/goal pair acceptable."""

    min_geodesic: float = 1.0  # m
    max_geodesic: float = 30.0  # m
    min_ratio: float = 1.1  # geodesic / euclidean distance, at least
    max_height_diff: float = 0.5  # |start y - goal y|: same floor
    goal_radius: float = 0.2  # written as goals[].radius (the success distance)
    max_tries: int = 2000  # samples per episode before giving up on the scene


def sample_episode(sim: NavSimulator, rng: np.random.Generator, params: EpisodeGenParams) -> tuple | None:
    """One acceptable (start, goal, yaw, geodesic) or None after `max_tries` samples."""
    for _ in range(params.max_tries):
        start, goal = sim.sample_navigable_point(), sim.sample_navigable_point()
        if not (np.all(np.isfinite(start)) and np.all(np.isfinite(goal))):
            continue
        if abs(start[1] - goal[1]) > params.max_height_diff:
            continue
        euclid = float(np.linalg.norm(goal - start))
        geo = sim.geodesic_distance(start, goal)
        if not (math.isfinite(geo) and params.min_geodesic <= geo <= params.max_geodesic):
            continue
        if geo < params.min_ratio * max(euclid, 1e-6):
            continue
        return start, goal, float(rng.uniform(0, 2 * math.pi)), geo
    return None


def generate_for_scene(sim: NavSimulator, scene_file: str, scene_id: str, num: int, seed: int,
                       params: EpisodeGenParams = EpisodeGenParams()) -> list[Episode]:
    """`num` episodes on one scene (deterministic given the seed and the simulator)."""
    sim.load_scene(scene_file)
    sim.seed(seed)
    rng = np.random.default_rng(seed)
    episodes = []
    for k in range(num):
        found = sample_episode(sim, rng, params)
        if found is None:
            raise EnvError(f"scene {scene_file!r}: no start/goal pair met the bounds after {params.max_tries} "
                           f"samples (episode {k}); loosen --min-geodesic/--max-geodesic/--min-ratio")
        start, goal, yaw, geo = found
        episodes.append(Episode(
            episode_id=str(k), scene_id=scene_id, start_position=[float(v) for v in start],
            start_rotation=[float(v) for v in quat_from_yaw(yaw)],
            goals=[Goal([float(v) for v in goal], params.goal_radius)],
            info={"geodesic_distance": geo},
        ))
    return episodes


def pick_backend(requested: str) -> str:
    if requested != "auto":
        return requested
    from ddppo.envs.scenes.sim import habitat_sim_available  # lazy: habitat-sim is optional

    return "habitat" if habitat_sim_available() else "grid"


def _scene_files(scenes_dir: str, scenes: list[str]) -> list[str]:
    if scenes:
        files = [s if os.path.isabs(s) or os.path.exists(s) else os.path.join(scenes_dir, s) for s in scenes]
    else:
        files = sorted(glob.glob(os.path.join(scenes_dir, "**", "*.glb"), recursive=True))
    if not files:
        raise EnvError(f"no scenes: pass --scenes, or put .glb files under --scenes-dir {scenes_dir!r}")
    missing = [f for f in files if not os.path.isfile(f)]
    if missing:
        raise EnvError(f"scene file(s) not found: {', '.join(missing)}")
    return files


def add_scene_arguments(p: argparse.ArgumentParser) -> None:
    """The arguments every episode generator takes: which scenes, how many episodes, the simulator."""
    p.add_argument("--scenes-dir", required=True, help="scenes root; written scene_ids are relative to it")
    p.add_argument("--scenes", nargs="*", default=[], help="scene .glb files (default: every .glb under the root)")
    p.add_argument("--episodes-per-scene", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--backend", choices=("auto", "habitat", "grid"), default="auto")
    p.add_argument("--agent-radius", type=float, default=0.1)
    p.add_argument("--agent-height", type=float, default=1.5)
    p.add_argument("--gpu-device-id", type=int, default=-1)


def on_each_scene(args: argparse.Namespace, generate: Callable[[NavSimulator, str, str, int], T]
                  ) -> tuple[str, list[tuple[str, T]]]:
    """(backend, [(scene_id, generate(sim, scene_file, scene_id, seed)) for each scene of `args`]), on one
    simulator of the backend `args` asks for, closed at the end; scene_ids are relative to --scenes-dir."""
    backend = pick_backend(args.backend)
    files = _scene_files(args.scenes_dir, args.scenes)
    sim = make_simulator(backend, SimSettings(agent_radius=args.agent_radius, agent_height=args.agent_height,
                                              gpu_device_id=args.gpu_device_id, seed=args.seed, depth_sensor=False,
                                              depth_width=1, depth_height=1))
    try:
        out = []
        for k, scene_file in enumerate(files):
            rel = os.path.relpath(os.path.abspath(scene_file), os.path.abspath(args.scenes_dir))
            scene_id = scene_file if rel.startswith("..") else rel.replace(os.sep, "/")
            out.append((scene_id, generate(sim, scene_file, scene_id, args.seed * 100_003 + k)))
        return backend, out
    finally:
        sim.close()


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m ddppo.envs.scenes.episode_gen", description=__doc__.split("\n\n")[0])
    add_scene_arguments(p)
    p.add_argument("--out", required=True, help="a .json.gz file, or a split folder")
    p.add_argument("--min-geodesic", type=float, default=EpisodeGenParams.min_geodesic)
    p.add_argument("--max-geodesic", type=float, default=EpisodeGenParams.max_geodesic)
    p.add_argument("--min-ratio", type=float, default=EpisodeGenParams.min_ratio,
                   help="minimum geodesic/euclidean distance ratio")
    p.add_argument("--goal-radius", type=float, default=EpisodeGenParams.goal_radius)
    p.add_argument("--max-tries", type=int, default=EpisodeGenParams.max_tries)
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    params = EpisodeGenParams(args.min_geodesic, args.max_geodesic, args.min_ratio, goal_radius=args.goal_radius,
                              max_tries=args.max_tries)
    if not (0 <= params.min_geodesic <= params.max_geodesic and args.episodes_per_scene > 0):
        print("error: need 0 <= --min-geodesic <= --max-geodesic and --episodes-per-scene > 0")
        return 2

    def one_scene(sim: NavSimulator, scene_file: str, scene_id: str, seed: int) -> list[Episode]:
        eps = generate_for_scene(sim, scene_file, scene_id, args.episodes_per_scene, seed=seed, params=params)
        print(f"{scene_id}: {len(eps)} episodes, geodesic {min(e.geodesic_distance for e in eps):.2f}-"
              f"{max(e.geodesic_distance for e in eps):.2f} m")
        return eps

    try:
        backend, per_scene = on_each_scene(args, one_scene)
        episodes = [ep for _, eps in per_scene for ep in eps]
        if args.out.endswith(".json.gz"):
            write_episodes(args.out, episodes)
            written = [args.out]
        else:
            written = write_split(args.out, episodes)
        print(f"wrote {len(episodes)} episodes ({backend} backend) to {', '.join(written)}")
        return 0
    except (EnvError, OSError) as err:
        print(f"error: {err}")
        return 2

if __name__ == "__main__":
    sys.exit(main())
