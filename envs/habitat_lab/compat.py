"""Everything that differs between habitat-lab 0.2.x and 0.3.x, in one place.

Both versions share `habitat.Env(config, dataset)`, its `current_episode` setter, `reset`, `step`,
`get_metrics`, `task.actions` / `task.is_episode_active`, the dataset registry and the datasets'
`get_scenes_to_load`. They differ in the config: 0.2.x has yacs configs (`habitat.get_config(paths, opts)`
with opts `[KEY, VALUE, ...]`, upper-case keys at the top level, `defrost`/`freeze`), 0.3.x Hydra
configs (`habitat.get_config(path, overrides=["key=value"])`, lower-case keys under `habitat.`,
`habitat.config.read_write`). `Api` hides that behind logical key names, and picks a task config's 0.3.x twin
(`X_v03.yaml` beside `X.yaml`, as the shipped configs/habitat_lab/*_gen_task.yaml have) where 0.3.x is installed.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import io
import logging
import os
import warnings
from typing import Any

from ddppo.envs.base import EnvError

QUIET_ENV = {"HABITAT_SIM_LOG": "quiet", "MAGNUM_LOG": "quiet", "GLOG_minloglevel": "2"}
INSTALL = ("install habitat-lab: 0.3.x with `pip install habitat-lab` (needs habitat-sim 0.3.x), or v0.2.2 for "
           "habitat-sim 0.2.2 from source (`pip install --no-deps -e .` in a checkout of tag v0.2.2)")

# logical key -> config path, per major version
V2_KEYS = {"gpu": "SIMULATOR.HABITAT_SIM_V0.GPU_DEVICE_ID", "seed": "SEED", "data_path": "DATASET.DATA_PATH",
           "split": "DATASET.SPLIT", "scenes_dir": "DATASET.SCENES_DIR", "content_scenes": "DATASET.CONTENT_SCENES",
           "dataset_type": "DATASET.TYPE", "max_steps": "ENVIRONMENT.MAX_EPISODE_STEPS", "dataset": "DATASET"}
V3_KEYS = {"gpu": "habitat.simulator.habitat_sim_v0.gpu_device_id", "seed": "habitat.seed",
           "data_path": "habitat.dataset.data_path", "split": "habitat.dataset.split",
           "scenes_dir": "habitat.dataset.scenes_dir", "content_scenes": "habitat.dataset.content_scenes",
           "dataset_type": "habitat.dataset.type", "max_steps": "habitat.environment.max_episode_steps",
           "dataset": "habitat.dataset"}
V3_TWIN = "_v03.yaml"  # a task config `X.yaml` (0.2.x) with `X_v03.yaml` beside it: the latter on 0.3.x


def import_habitat() -> Any:
    """The `habitat` module, quiet; EnvError saying how to install it when it does not import."""
    for key, value in QUIET_ENV.items():
        os.environ.setdefault(key, value)
    try:  # quiet: gym prints a notice to stderr on import, habitat-lab's modules raise deprecation warnings
        with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            import habitat
    except Exception as exc:  # ImportError, or a broken install (e.g. habitat-sim's native libraries)
        raise EnvError(f"env.name=habitat_lab needs habitat-lab, which does not import ({type(exc).__name__}: "
                       f"{' '.join(str(exc).split())[:200]}); {INSTALL}") from exc
    if getattr(habitat, "__file__", None) is None or not hasattr(habitat, "Env"):
        raise EnvError(f"env.name=habitat_lab: the `habitat` that imports here ({list(habitat.__path__)[:1]}) is not "
                       f"habitat-lab (a folder named habitat shadows it); {INSTALL}")
    logging.getLogger("habitat").setLevel(logging.WARNING)
    try:
        habitat.logger.setLevel(logging.WARNING)
    except AttributeError:
        pass
    return habitat


def version_of(habitat: Any) -> tuple[int, int]:
    parts = str(getattr(habitat, "__version__", "0.3")).split(".")
    return int(parts[0]), int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0


def keep_renderer_on_scene_change(sim: Any) -> None:
    """habitat-lab's simulator closes its renderer before it loads another scene (`close(destroy=False)` in
    `reconfigure`, both versions). With several simulators in one process (an env worker's share, evaluation)
    that takes the other simulators' OpenGL contexts down with it: habitat-sim 0.2.2 then crashes the process
    on their next render. Here the next scene loads into the open renderer instead, as habitat-sim's own
    `Simulator.reconfigure` does (and ddppo's envs/habitat)."""
    original = sim.reconfigure
    if "should_close_on_new_scene" not in inspect.signature(original).parameters:
        return

    def reconfigure(*args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("should_close_on_new_scene", False)
        return original(*args, **kwargs)

    sim.reconfigure = reconfigure


class Api:
    """One installed habitat-lab: its config, datasets and Env behind version-neutral calls."""

    def __init__(self, habitat: Any | None = None):
        self.habitat = habitat if habitat is not None else import_habitat()
        self.version = version_of(self.habitat)
        self.v2 = self.version < (0, 3)
        self.keys = V2_KEYS if self.v2 else V3_KEYS

    # ------------------------------------------------------------------ config
    def load_config(self, path: str, overrides: list[str]) -> Any:
        """The task config with `overrides` (KEY=VALUE strings) applied; EnvError for a missing file or a bad key.
        A path that is not a file here but names a shipped task config (`configs/habitat_lab/...`, as the shipped
        ddppo configs write it) is that one, so the installed package needs no clone."""
        if not os.path.isfile(path):
            from ddppo.configs import find  # data only

            path = str(find(path) or path)
        path = self.task_config_for_version(path)
        if self.v2 and not os.path.isfile(path):
            raise EnvError(f"env.habitat_lab.config={path!r}: no such habitat-lab task config file")
        try:
            if self.v2:
                opts: list[str] = []
                for item in overrides:
                    key, value = item.split("=", 1)
                    opts += [key.strip(), value.strip()]
                return self.habitat.get_config(path, opts)
            return self.habitat.get_config(path, overrides=list(overrides))
        except Exception as exc:  # yacs KeyError / Hydra's errors / a missing 0.3.x config
            summary = " ".join(str(exc).split())[:300]
            if not self.v2 and "No file found for config" in summary:
                raise EnvError(f"env.habitat_lab.config={path!r}: no such habitat-lab task config (a path, or "
                               "one relative to habitat-lab's habitat/config folder)") from exc
            raise EnvError(f"habitat-lab {'.'.join(map(str, self.version))} could not load "
                           f"env.habitat_lab.config={path!r} with overrides {list(overrides)}: "
                           f"{type(exc).__name__}: {summary}") from exc

    def task_config_for_version(self, path: str) -> str:
        """`path`, or where habitat-lab 0.3.x is installed its Hydra twin `<name>_v03.yaml` beside it when there is
        one: the shipped task configs come as a 0.2.x (yacs) file and its 0.3.x twin, and the ddppo configs name the
        0.2.x one, so one ddppo config trains on either version."""
        if self.v2 or not path.endswith(".yaml") or path.endswith(V3_TWIN):
            return path
        twin = path[:-len(".yaml")] + V3_TWIN
        return twin if os.path.isfile(twin) else path

    def get(self, cfg: Any, key: str) -> Any:
        node = cfg
        for part in self.keys[key].split("."):
            node = getattr(node, part)
        return node

    def replace(self, cfg: Any, **values: Any) -> Any:
        """A copy of `cfg` with the logical keys set (the original is never changed)."""
        if self.v2:
            new = cfg.clone()
            new.defrost()
            for key, value in values.items():
                self._assign(new, key, value)
            new.freeze()
            return new
        from habitat.config import read_write

        new = copy.deepcopy(cfg)
        with read_write(new):
            for key, value in values.items():
                self._assign(new, key, value)
        return new

    def _assign(self, cfg: Any, key: str, value: Any) -> None:
        *parents, last = self.keys[key].split(".")
        node = cfg
        for part in parents:
            node = getattr(node, part)
        setattr(node, last, value)

    # ------------------------------------------------------------------ datasets and envs
    def dataset_class(self, cfg: Any) -> Any:
        kind = self.get(cfg, "dataset_type")
        cls = self.habitat.registry.get_dataset(kind)
        if cls is None:
            raise EnvError(f"habitat-lab has no dataset type {kind!r} (the task config's dataset type)")
        return cls

    def scenes_to_load(self, cfg: Any) -> list[str]:
        return list(self.dataset_class(cfg).get_scenes_to_load(self.get(cfg, "dataset")))

    def make_dataset(self, cfg: Any) -> Any:
        return self.habitat.make_dataset(self.get(cfg, "dataset_type"), config=self.get(cfg, "dataset"))

    def make_env(self, cfg: Any, dataset: Any) -> Any:
        env = self.habitat.Env(config=cfg, dataset=dataset)
        keep_renderer_on_scene_change(env.sim)
        return env

    def shortest_path_follower(self, sim: Any, goal_radius: float) -> tuple[Any, dict[int, str]]:
        """habitat-lab's ShortestPathFollower on `sim`, and its action values -> their names (stop, move_forward,
        turn_left, turn_right)."""
        from habitat.sims.habitat_simulator.actions import HabitatSimActions
        from habitat.tasks.nav.shortest_path_follower import ShortestPathFollower

        names = {int(getattr(HabitatSimActions, n)): n for n in ("stop", "move_forward", "turn_left", "turn_right")
                 if hasattr(HabitatSimActions, n)}
        return ShortestPathFollower(sim, goal_radius=goal_radius, return_one_hot=False), names

    @property
    def label(self) -> str:
        return "habitat-lab " + ".".join(map(str, self.version))
