"""habitat-sim behind the `NavSimulator` interface.

This is the only module that imports `habitat_sim`, and only when a simulator
is built. It supports habitat-sim 0.2.x and 0.3.x by using the API both share:
`ShortestPath` + `pathfinder.find_path` for geodesic distances (0.2.2 has no
`Simulator.geodesic_distance`), the "collided" flag that `Simulator.step`
adds to its observations, `recompute_navmesh(pathfinder, settings)`.

Simulator lifetime: every Simulator of the process is created and destroyed by
one owner (`_SIMULATORS`) that destroys them strictly last-created-first, also
at interpreter exit. With several simulators in one process, habitat-sim's
OpenGL contexts are not independent: in 0.2.x, once the first-created
Simulator is closed, every other one still open aborts the process
(`GL::Context::current(): no current context`) on its next render or close.
A `close()` requested out of order therefore only parks the simulator (it is
never used again) until every simulator created after it is gone.

Logging: habitat-sim and Magnum are quiet unless the user set
`HABITAT_SIM_LOG` / `MAGNUM_LOG` (or `GLOG_minloglevel`) in the environment.
"""

from __future__ import annotations

import atexit
import dataclasses
import logging
import math
import os
import sys
import threading
from typing import Any

import numpy as np

from ddppo.envs.base import EnvError
from ddppo.envs.scenes.interface import SimSettings
from ddppo.envs.scenes.layout import NAVMESH_CELL_HEIGHT

log = logging.getLogger(__name__)

INSTALL_HINT = (
    "habitat-sim is needed for env.habitat.backend=habitat but could not be imported ({err}). It is not on PyPI "
    "for Linux; install it into a conda environment: with Python 3.9, `conda install habitat-sim withbullet "
    "headless -c conda-forge -c aihabitat` (stable builds exist for Python 3.9 only), with Python 3.10/3.11 the "
    "same with `-c aihabitat-nightly`; then check it with `python -m ddppo.envs.habitat.check`. Without it, "
    "env.habitat.backend=grid runs the same task on a 2-D double of generated scenes."
)


# habitat-sim's and Magnum's own logging, unless the user asked for it: habitat-sim 0.2.x
# prints hundreds of lines per run (a warning per scene load), and worker processes inherit it.
QUIET_LOG_ENV = {"HABITAT_SIM_LOG": "quiet", "MAGNUM_LOG": "quiet", "GLOG_minloglevel": "2"}


def quiet_logs_by_default() -> None:
    """Set the quiet defaults in os.environ (read by habitat-sim at import, by Magnum per context)."""
    for key, value in QUIET_LOG_ENV.items():
        os.environ.setdefault(key, value)


# glvnd vendor files of Mesa's EGL (Debian/Ubuntu, Fedora, conda-forge), for software rendering
MESA_EGL_VENDOR_FILES = ("/usr/share/glvnd/egl_vendor.d/50_mesa.json", "/etc/glvnd/egl_vendor.d/50_mesa.json")


def renderer_device(gpu_device_id: int) -> int:
    """The `SimulatorConfiguration.gpu_device_id` for a renderer setting (see HabitatOptions.gpu_device_id).

    habitat-sim hands the id to Magnum's EGL context as a CUDA device: N >= 0 selects the EGL device
    whose EGL_CUDA_DEVICE_NV is N (CUDA's numbering in this process, i.e. after CUDA_VISIBLE_DEVICES),
    and -1 asks for no CUDA device, which means simply EGL device 0 -- a GPU, if the NVIDIA EGL vendor
    is installed and listed first. So for -1 this process's EGL is made to load only Mesa's vendor
    library (unless the user chose vendors with __EGL_VENDOR_LIBRARY_FILENAMES/_DIRS), whose device 0 is
    its software rasteriser (llvmpipe). Must run before the first EGL call of the process."""
    if gpu_device_id >= 0:
        return gpu_device_id
    if not ({"__EGL_VENDOR_LIBRARY_FILENAMES", "__EGL_VENDOR_LIBRARY_DIRS"} & set(os.environ)):
        prefixes = [os.path.join(sys.prefix, "share/glvnd/egl_vendor.d/50_mesa.json")]
        for path in [*prefixes, *MESA_EGL_VENDOR_FILES]:
            if os.path.isfile(path):
                os.environ["__EGL_VENDOR_LIBRARY_FILENAMES"] = path
                break
    return -1


def import_habitat_sim() -> Any:
    """`habitat_sim`, or an EnvError saying how to install it."""
    quiet_logs_by_default()
    try:
        import habitat_sim  # noqa: PLC0415 - imported lazily on purpose
    except ImportError as err:  # also covers a broken install (missing shared libraries)
        raise EnvError(INSTALL_HINT.format(err=err)) from err
    return habitat_sim


def habitat_sim_available() -> bool:
    try:
        import_habitat_sim()
    except EnvError:
        return False
    return True


def navmesh_path_for(scene_path: str) -> str:
    """Where habitat-sim looks for a scene's navmesh: `<scene without extension>.navmesh`."""
    return os.path.splitext(scene_path)[0] + ".navmesh"


def _xyzw(q: Any) -> np.ndarray:
    """A rotation from habitat-sim (numpy-quaternion or magnum) as [x, y, z, w]."""
    if hasattr(q, "w") and hasattr(q, "x"):  # numpy-quaternion
        return np.array([q.x, q.y, q.z, q.w], dtype=np.float64)
    if hasattr(q, "vector") and hasattr(q, "scalar"):  # magnum.Quaternion
        v = q.vector
        return np.array([v[0], v[1], v[2], q.scalar], dtype=np.float64)
    return np.asarray(q, dtype=np.float64).reshape(4)


TOPDOWN_METERS_PER_PIXEL = 0.05


def _pose_of(state: Any) -> tuple[np.ndarray, np.ndarray]:
    """(position, rotation [x, y, z, w]) of a habitat-sim AgentState, float64."""
    return np.asarray(state.position, dtype=np.float64), _xyzw(state.rotation)


class _SimulatorOwner:
    """Creates and destroys every habitat-sim Simulator of this process, last-created-first."""

    def __init__(self):
        self._lock = threading.Lock()
        self._live: list[list[Any]] = []  # [simulator, close requested], in creation order
        self._atexit = False

    def create(self, hs: Any, config: Any) -> Any:
        sim = hs.Simulator(config)
        with self._lock:
            self._live.append([sim, False])
            if not self._atexit:  # registered after habitat-sim's import, so it runs before its own exit hooks
                atexit.register(self.close_all)
                self._atexit = True
        return sim

    def release(self, sim: Any) -> None:
        """Close `sim` now if nothing created after it is still open, else as soon as that is so."""
        with self._lock:
            for entry in self._live:
                if entry[0] is sim:
                    entry[1] = True
            self._close_tail()

    def close_all(self) -> None:
        with self._lock:
            for entry in self._live:
                entry[1] = True
            self._close_tail()

    def open_count(self) -> int:
        with self._lock:
            return len(self._live)

    def _close_tail(self) -> None:
        while self._live and self._live[-1][1]:
            sim = self._live.pop()[0]
            try:
                sim.close()
            except Exception as err:  # a failed close must not hide the error being handled, nor skip the rest
                log.warning("habitat-sim Simulator.close failed: %s", err)


_SIMULATORS = _SimulatorOwner()


class HabitatSim:
    """One habitat-sim Simulator with one agent (depth and optional RGB cameras)."""

    def __init__(self, settings: SimSettings):
        self._hs = import_habitat_sim()
        self.settings = settings
        self._sim: Any = None
        self._pose: tuple[np.ndarray, np.ndarray] | None = None  # cached (position, rotation) of the agent
        self.scene_path = ""

    # ---------------------------------------------------------------- config
    def _camera(self, uuid: str, sensor_type: Any, height: int, width: int, channels: int) -> Any:
        spec = self._hs.CameraSensorSpec()
        spec.uuid = uuid
        spec.sensor_type = sensor_type
        spec.resolution = [height, width]
        spec.position = [0.0, self.settings.sensor_height, 0.0]
        spec.channels = channels
        try:
            spec.hfov = float(self.settings.hfov)
        except TypeError:  # builds whose setter wants a magnum angle
            import magnum  # noqa: PLC0415 - ships with habitat-sim

            spec.hfov = magnum.Deg(float(self.settings.hfov))
        return spec

    def _config(self, scene_path: str) -> Any:
        hs, s = self._hs, self.settings
        sim_cfg = hs.SimulatorConfiguration()
        sim_cfg.scene_id = scene_path
        sim_cfg.gpu_device_id = renderer_device(s.gpu_device_id)
        sim_cfg.random_seed = s.seed
        sim_cfg.enable_physics = False
        sim_cfg.allow_sliding = s.allow_sliding
        sensors = []
        if s.depth_sensor:
            sensors.append(self._camera("depth", hs.SensorType.DEPTH, s.depth_height, s.depth_width, 1))
        if s.rgb:
            sensors.append(self._camera("rgb", hs.SensorType.COLOR, s.rgb_height, s.rgb_width, 4))
        agent = hs.agent.AgentConfiguration()
        agent.height = s.agent_height
        agent.radius = s.agent_radius
        agent.sensor_specifications = sensors
        act, amount = hs.agent.ActionSpec, hs.agent.ActuationSpec
        agent.action_space = {
            "move_forward": act("move_forward", amount(amount=s.forward_step)),
            "turn_left": act("turn_left", amount(amount=s.turn_angle)),
            "turn_right": act("turn_right", amount(amount=s.turn_angle)),
        }
        return hs.Configuration(sim_cfg, [agent])

    def load_scene(self, scene_path: str) -> None:
        if scene_path == self.scene_path and self._sim is not None:
            return
        if not os.path.isfile(scene_path):
            raise EnvError(f"scene file {scene_path!r} does not exist")
        navmesh = navmesh_path_for(scene_path)
        if self.settings.require_navmesh and not os.path.isfile(navmesh):
            raise EnvError(f"navmesh {navmesh!r} of scene {scene_path!r} does not exist; "
                           f"make it with `python -m ddppo.envs.scenes.scene_gen navmesh {scene_path}`")
        config = self._config(scene_path)
        try:
            if self._sim is None:
                self._sim = _SIMULATORS.create(self._hs, config)
            else:
                self._sim.reconfigure(config)
        except Exception as err:  # habitat-sim raises plain RuntimeError/AssertionError
            raise EnvError(f"habitat-sim could not load scene {scene_path!r}: {err}") from err
        self.scene_path = scene_path
        self._pose = None
        pathfinder = self._sim.pathfinder
        if not pathfinder.is_loaded and os.path.isfile(navmesh):
            pathfinder.load_nav_mesh(navmesh)
        if self.settings.require_navmesh and not pathfinder.is_loaded:
            raise EnvError(f"habitat-sim could not load navmesh {navmesh!r} of scene {scene_path!r}")
        self.seed(self.settings.seed)

    def _require(self) -> Any:
        if self._sim is None:
            raise EnvError("HabitatSim: load_scene() must be called before using the simulator")
        return self._sim

    # ---------------------------------------------------------------- agent
    def seed(self, seed: int) -> None:
        sim = self._require()
        sim.seed(int(seed))
        sim.pathfinder.seed(int(seed))

    def set_agent_pose(self, position: np.ndarray, rotation: np.ndarray) -> None:
        state = self._hs.AgentState()
        state.position = np.asarray(position, dtype=np.float32)
        q = np.asarray(rotation, dtype=np.float64)
        norm = float(np.linalg.norm(q))
        # a pose read back from agent_pose() is unit to float32 precision already: renormalising it in
        # float64 would move it by one float32 step, and a resumed run would no longer render bit-exactly
        state.rotation = q if abs(norm - 1.0) < 1e-6 else q / norm
        self._require().get_agent(0).set_state(state, reset_sensors=True)
        self._pose = None

    def agent_pose(self) -> tuple[np.ndarray, np.ndarray]:
        if self._pose is None:  # one get_state per change of pose, however often the task asks
            self._pose = _pose_of(self._require().get_agent(0).get_state())
        return self._pose[0].copy(), self._pose[1].copy()

    def _convert(self, raw: dict) -> dict[str, np.ndarray]:
        # habitat-sim reuses its observation buffers between steps: copy them out
        obs = {}
        if "depth" in raw:
            obs["depth"] = np.array(raw["depth"], dtype=np.float32, copy=True).reshape(
                self.settings.depth_height, self.settings.depth_width)
        if "rgb" in raw:
            obs["rgb"] = np.array(np.asarray(raw["rgb"])[..., :3], dtype=np.uint8, copy=True)
        return obs

    def observe(self) -> dict[str, np.ndarray]:
        return self._convert(self._require().get_sensor_observations())

    def step(self, action: str) -> tuple[dict[str, np.ndarray], bool]:
        sim = self._require()
        raw = sim.step(action)
        # Simulator.step has just read the agent's state (get_state) for its last_state(): reuse it
        self._pose = _pose_of(sim.last_state() if hasattr(sim, "last_state") else sim.get_agent(0).get_state())
        return self._convert(raw), bool(raw.get("collided", False))

    # ---------------------------------------------------------------- navmesh
    def sample_navigable_point(self) -> np.ndarray:
        return np.asarray(self._require().pathfinder.get_random_navigable_point(), dtype=np.float64)

    def is_navigable(self, point: np.ndarray) -> bool:
        return bool(self._require().pathfinder.is_navigable(np.asarray(point, dtype=np.float32)))

    def snap_point(self, point: np.ndarray) -> np.ndarray:
        return np.asarray(self._require().pathfinder.snap_point(np.asarray(point, dtype=np.float32)),
                          dtype=np.float64)

    def _find_path(self, start: np.ndarray, end: np.ndarray) -> Any:
        path = self._hs.ShortestPath()
        path.requested_start = np.asarray(start, dtype=np.float32)
        path.requested_end = np.asarray(end, dtype=np.float32)
        found = self._require().pathfinder.find_path(path)
        return path if found else None

    def geodesic_distance(self, start: np.ndarray, end: np.ndarray) -> float:
        path = self._find_path(start, end)
        if path is None:
            return math.inf
        d = float(path.geodesic_distance)
        return d if math.isfinite(d) else math.inf

    def shortest_path(self, start: np.ndarray, end: np.ndarray) -> list[np.ndarray]:
        path = self._find_path(start, end)
        if path is None:
            return []
        return [np.asarray(p, dtype=np.float64) for p in path.points]

    def topdown_map(self, height: float) -> tuple[np.ndarray, tuple[float, float, float, float]]:
        pathfinder = self._require().pathfinder
        mpp = TOPDOWN_METERS_PER_PIXEL
        free = np.asarray(pathfinder.get_topdown_view(mpp, float(height)), dtype=bool)
        lower = pathfinder.get_bounds()[0]
        nz, nx = free.shape
        x0, z0 = float(lower[0]), float(lower[2])
        return ~free, (x0, x0 + nx * mpp, z0 + nz * mpp, z0)

    def recompute_navmesh(self) -> float:
        """Compute the loaded scene's navmesh for this agent's radius and height; returns its area (m^2)."""
        sim = self._require()
        settings = self._hs.nav.NavMeshSettings()
        settings.set_defaults()
        settings.cell_height = NAVMESH_CELL_HEIGHT  # the grid double stands its agent where this puts it
        settings.agent_radius = self.settings.agent_radius
        settings.agent_height = self.settings.agent_height
        if not sim.recompute_navmesh(sim.pathfinder, settings):
            raise EnvError(f"habitat-sim could not compute a navmesh for {self.scene_path!r}")
        return float(sim.pathfinder.navigable_area)

    def save_navmesh(self, path: str) -> None:
        if not self._require().pathfinder.save_nav_mesh(path):
            raise EnvError(f"habitat-sim could not save the navmesh to {path!r}")

    def close(self) -> None:
        if self._sim is not None:
            sim, self._sim = self._sim, None
            self.scene_path = ""
            _SIMULATORS.release(sim)


def compute_navmesh(scene_path: str, settings: SimSettings, out_path: str | None = None) -> tuple[str, float]:
    """Compute and save `<scene>.navmesh` (or `out_path`); returns (path, navigable area m^2).

    habitat-sim only builds scene collision data when a renderer exists, so the
    simulator is made with a small depth camera.
    """
    small = dataclasses.replace(settings, depth_width=16, depth_height=16, depth_sensor=True, rgb=False,
                                require_navmesh=False)
    sim = HabitatSim(small)
    try:
        sim.load_scene(scene_path)
        area = sim.recompute_navmesh()
        out = out_path or navmesh_path_for(scene_path)
        sim.save_navmesh(out)
    finally:
        sim.close()
    return out, area
