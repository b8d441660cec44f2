"""Check a habitat-sim install end to end: `python -m ddppo.envs.habitat.check [--gpu-device-id N]`.

Generates one small scene in a temporary folder, computes its navmesh, renders
depth along a walk, compares the depth with the grid double of the same floor
plan, closes two simulators out of creation order, and prints what it found:
habitat-sim's version, the renderer device, steps/s and the depth agreement.
Exit 0 when everything works, 1 when habitat-sim imports but something fails,
2 when habitat-sim does not import (with how to install it).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
import time

import numpy as np

from ddppo.envs.base import EnvError
from ddppo.envs.scenes.geometry import quat_from_yaw
from ddppo.envs.scenes.gridsim import GridSim
from ddppo.envs.scenes.interface import SimSettings
from ddppo.envs.scenes.layout import LayoutParams
from ddppo.envs.scenes.scene_gen import generate_scenes


def run_check(gpu_device_id: int, resolution: int = 128, steps: int = 300) -> list[str]:
    """The report lines; raises EnvError (or habitat-sim's own errors) when a stage fails."""
    from ddppo.envs.scenes.sim import HabitatSim, import_habitat_sim

    hs = import_habitat_sim()
    lines = [f"habitat-sim {getattr(hs, '__version__', '?')} from {hs.__file__}"]
    params = LayoutParams(size_min=5.0, size_max=6.0, max_rooms=2, max_furniture=2)
    with tempfile.TemporaryDirectory(prefix="ddppo-habitat-check-") as root:
        (scene,), _ = generate_scenes(root, 1, seed=0, params=params, gpu_device_id=gpu_device_id)
        if not scene.navmesh:
            raise EnvError("the navmesh of the check scene was not written")
        lines.append(f"navmesh computed for a generated scene ({scene.glb})")
        settings = SimSettings(depth_width=resolution, depth_height=resolution, gpu_device_id=gpu_device_id)
        first, second = HabitatSim(settings), HabitatSim(dataclasses.replace(settings, seed=1))
        grid = GridSim(settings)
        try:
            for sim in (first, second, grid):
                sim.load_scene(scene.glb)
            start = first.sample_navigable_point()
            differences = []
            for yaw in np.linspace(0.0, 2 * np.pi, 8, endpoint=False):
                first.set_agent_pose(start, quat_from_yaw(yaw))
                grid.set_agent_pose(first.agent_pose()[0], quat_from_yaw(yaw))
                differences.append(float(np.median(np.abs(first.observe()["depth"] - grid.observe()["depth"]))))
            lines.append(f"depth vs the grid double: median |difference| {np.median(differences) * 100:.1f} cm "
                         f"(worst view {max(differences) * 100:.1f} cm)")
            moves = np.random.default_rng(0).integers(0, 3, size=steps)
            names = ("move_forward", "turn_left", "turn_right")
            second.step("move_forward")  # first render outside the timing
            begin = time.perf_counter()
            for a in moves:
                depth = second.step(names[int(a)])[0]["depth"]
            fps = steps / (time.perf_counter() - begin)
            lines.append(f"{resolution}x{resolution} depth: {fps:,.0f} steps/s on renderer device {gpu_device_id} "
                         f"(last frame {depth.min():.2f}-{depth.max():.2f} m)")
        finally:
            first.close()  # out of creation order on purpose: must not abort the process
            second.close()
    lines.append("closed two simulators out of creation order: no abort")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ddppo.envs.habitat.check", description=__doc__.split("\n\n")[0])
    p.add_argument("--gpu-device-id", type=int, default=-1,
                   help="renderer: -1 = software (Mesa llvmpipe), N = the GPU CUDA calls N")
    p.add_argument("--resolution", type=int, default=128, help="depth image side (pixels)")
    args = p.parse_args(argv)
    from ddppo.envs.scenes.sim import habitat_sim_available, import_habitat_sim

    if not habitat_sim_available():
        try:
            import_habitat_sim()
        except EnvError as err:
            print(f"error: {err}")  # noqa: T201 - a command-line report
        return 2
    try:
        for line in run_check(args.gpu_device_id, args.resolution):
            print(line)  # noqa: T201
    except Exception as err:  # any stage failing is the finding; say which, briefly
        print(f"error: habitat-sim is installed but the check failed: {type(err).__name__}: {err}")  # noqa: T201
        return 1
    print("ok")  # noqa: T201
    return 0


if __name__ == "__main__":
    sys.exit(main())
