"""Env families registered with their options (envs/family.py, envs/registry.py): the built-in ones found as
packages, the config's `env.<section>` sections made from them, a declaration or a registration that cannot work
refused by name; and a new family as one package of its own, written into a folder (`tinyfam`: a corridor walked
to its end, options `env.tiny.length` and `env.tiny.reward`) and installed as a plugin is, by its
`ddppo.env_families` entry point (a dist-info beside it, found by importlib.metadata once the folder is on
sys.path): `ddppo config` validates its keys and `ddppo train` trains on it (subprocesses: the schema is made
from the families once, when ddppo.config is first imported)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf
from omegaconf.errors import ConfigKeyError, ValidationError

from ddppo.config import EnvConfig, load_config, loading
from ddppo.config.sections.env import env_config
from ddppo.envs import registry
from ddppo.envs.base import EnvError
from ddppo.envs.family import EnvFamily
from ddppo.envs.gridnav.options import GridNavOptions
from ddppo.envs.registry import families, known_names, section_for
from testutil import REPO, cli_env

OPTIONS = '''
import dataclasses

from ddppo.field_metadata import doc


@dataclasses.dataclass(frozen=True)
class TinyOptions:
    """A corridor walked to its end."""

    length: int = dataclasses.field(default=4, metadata=doc("cells from the start to the end", shape=True, ge=2))
    reward: float = dataclasses.field(default=1.0, metadata=doc("reward for reaching the end", gt=0))
'''

INIT = '''
from ddppo.envs.family import EnvFamily
from tinyfam.options import TinyOptions

FAMILY = EnvFamily("tiny", TinyOptions, "tinyfam.env:make_tiny", names=("tiny",))
'''

ENV = '''
import gymnasium
import numpy as np

from ddppo.envs.base import EpisodeInfo, StepResult


class Corridor:
    """`num_envs` corridors of `length` cells: action 1 steps forward, 0 stays; the end pays `reward`."""

    def __init__(self, options, spec):
        self.num_envs, self.length, self.reward = spec.num_envs, options.length, options.reward
        self.observation_space = gymnasium.spaces.Dict(
            {"onehot": gymnasium.spaces.Box(0.0, 1.0, (options.length,), np.float32)})
        self.action_space = gymnasium.spaces.Discrete(2)
        self.pos = np.zeros(self.num_envs, np.int64)
        self.steps = np.zeros(self.num_envs, np.int64)
        self.returns = np.zeros(self.num_envs, np.float64)

    def _obs(self):
        return {"onehot": np.eye(self.length, dtype=np.float32)[self.pos]}

    def reset(self):
        self.pos[:], self.steps[:], self.returns[:] = 0, 0, 0.0
        return self._obs()

    def step(self, actions):
        self.pos = np.minimum(self.pos + (np.asarray(actions).reshape(-1) == 1), self.length - 1)
        self.steps += 1
        terminated = self.pos == self.length - 1
        truncated = ~terminated & (self.steps >= 4 * self.length)
        reward = np.where(terminated, self.reward, 0.0).astype(np.float32)
        self.returns += reward
        final = self._obs()
        done = terminated | truncated
        episodes = [EpisodeInfo(int(i), {"return": float(self.returns[i]), "length": float(self.steps[i])})
                    for i in np.flatnonzero(done)]
        self.pos[done], self.steps[done], self.returns[done] = 0, 0, 0.0
        return StepResult(self._obs(), reward, terminated, truncated, final, episodes)

    def close(self):
        pass

    def state_dict(self):
        return {"pos": self.pos.copy(), "steps": self.steps.copy(), "returns": self.returns.copy()}

    def load_state_dict(self, state):
        self.pos, self.steps, self.returns = (np.array(state[k]) for k in ("pos", "steps", "returns"))


def make_tiny(options, spec):
    return Corridor(options, spec)
'''


def write_family_package(folder: Path) -> Path:
    """The package `tinyfam` and its entry point in `folder` (put it on PYTHONPATH); returns `folder`."""
    package = folder / "tinyfam"
    package.mkdir(parents=True)
    for name, text in (("__init__.py", INIT), ("options.py", OPTIONS), ("env.py", ENV)):
        (package / name).write_text(text.lstrip())
    info = folder / "tinyfam-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tinyfam\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[ddppo.env_families]\ntiny = tinyfam:FAMILY\n")
    return folder


# ------------------------------------------------------------------ the registry and the schema (in process)
def test_the_built_in_families_are_found_as_packages_with_their_options():
    found = families()
    assert list(found)[:5] == ["gridnav", "gym", "habitat", "habitat_lab", "synthetic"]
    assert found["gridnav"].options is GridNavOptions and found["gridnav"].grouped_episodes
    assert known_names() == ["gridnav", "gym:<gymnasium id>", "habitat_lab", "habitat_pointnav", "synthetic"]
    assert [section_for(n) for n in ("gym:CartPole-v1", "habitat_pointnav", "gym:", "nosuch")] == [
        "gym", "habitat", None, None]
    assert [f.name for f in dataclasses.fields(EnvConfig)][4:] == list(found)  # one env section per family


def tiny_options() -> type:
    namespace: dict = {}
    exec(compile(OPTIONS, "tinyfam/options.py", "exec"), namespace)
    return namespace["TinyOptions"]


def test_a_new_familys_options_are_an_env_section_validated_by_omegaconf():
    tiny = EnvFamily("tiny", tiny_options(), "tinyfam.env:make_tiny", names=("tiny",))
    schema = loading._schema(env_config({**families(), "tiny": tiny}))  # writable as ddppo's (omegaconf 2.3 too)
    merged = OmegaConf.merge(schema, OmegaConf.from_dotlist(["name=tiny", "tiny.length=7"]))
    assert OmegaConf.to_object(merged).tiny == tiny.options(length=7)
    with pytest.raises(ConfigKeyError, match="tiny.nosuch"):
        OmegaConf.merge(schema, OmegaConf.from_dotlist(["tiny.nosuch=1"]))
    with pytest.raises(ValidationError, match="tiny.length"):
        OmegaConf.merge(schema, OmegaConf.from_dotlist(["tiny.length=abc"]))


@pytest.mark.parametrize("change, problem", [
    ({"section": "my-env"}, "section must be a Python identifier"),
    ({"options": dict}, "options must be a frozen dataclass class"),
    ({"factory": "tinyfam.env.make_tiny"}, "factory='tinyfam.env.make_tiny' must be 'module:function'"),
    ({"simulator_fps": "x:"}, "simulator_fps='x:' must be 'module:function'"),
    ({"names": ()}, "give the env.name values that choose it"),
])
def test_a_declaration_that_cannot_work_is_refused_naming_what(change, problem):
    declared = {"section": "tiny", "options": GridNavOptions, "factory": "tinyfam.env:make_tiny",
                "names": ("tiny",), **change}
    with pytest.raises(ValueError, match=problem):
        EnvFamily(**declared)


def test_a_family_taking_a_name_or_a_key_already_taken_is_refused():
    with pytest.raises(EnvError, match="takes 'gridnav', which the family 'gridnav' has already"):
        registry._add(dict(families()), EnvFamily("grid2", GridNavOptions, "m:f", names=("gridnav",)), "a test")
    with pytest.raises(EnvError, match="takes 'gym:', which the family 'gym' has already"):
        registry._add(dict(families()), EnvFamily("gym2", GridNavOptions, "m:f", prefix="gym:"), "a test")
    with pytest.raises(EnvError, match="declares 'x', not a ddppo.envs.family.EnvFamily"):
        registry._add({}, "x", "a test")
    with pytest.raises(ValueError, match="would hide the key env.num_envs"):
        env_config({"num_envs": EnvFamily("num_envs", GridNavOptions, "m:f", names=("x",))})
    assert "grid2" not in families() and "gym2" not in families()


def test_the_shipped_configs_still_choose_their_family():
    assert load_config("gridnav").env_options == dataclasses.asdict(GridNavOptions(**load_config(
        "gridnav").env_options))
    assert section_for(load_config("cartpole").env.name) == "gym"


# ------------------------------------------------------------------ a new family as one package (subprocesses)
def ddppo(args: list[str], cwd: Path, plugins: Path) -> subprocess.CompletedProcess:
    env = cli_env(PYTHONPATH=f"{REPO}:{plugins}")
    return subprocess.run([sys.executable, "-m", "ddppo", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)


TRAIN = ["env.name=tiny", "env.tiny.length=3", "env.num_envs=4", "env.num_workers=2", "rollout.num_steps=8",
         "ppo.num_mini_batch=1", "ppo.epochs=1", "policy.hidden_size=16", "policy.rnn_type=none",
         "log.tensorboard=false", "log.interval_s=0.1", "run.torch_threads=1", "dist.device=cpu",
         "run.total_env_steps=64"]


def test_a_family_package_validates_its_keys_and_trains(tmp_path):
    """...in env workers too (each worker finds the family again, by its entry point)."""
    plugins = write_family_package(tmp_path / "plugins")
    res = ddppo(["config", "--explain", "env.tiny.length"], tmp_path, plugins)
    assert res.returncode == 0 and "cells from the start to the end" in res.stdout, res.stderr[-2000:]
    for bad, named in (("env.tiny.length=1", "env.tiny.length=1 must be >= 2"), ("env.tiny.nosuch=1",
                       "env.tiny.nosuch"), ("env.tiny.length=abc", "env.tiny.length")):
        res = ddppo(["config", "cartpole", "env.name=tiny", bad], tmp_path, plugins)
        assert res.returncode == 2 and named in res.stderr, (bad, res.stderr[-2000:])
    res = ddppo(["train", "cartpole", f"run.dir={tmp_path / 'run'}", *TRAIN], tmp_path, plugins)
    assert res.returncode == 0, res.stderr[-3000:]
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["update"] for r in rows] == [1, 2]
    assert "tiny:\n    length: 3\n" in (tmp_path / "run" / "config.yaml").read_text()


def test_a_family_whose_entry_point_fails_is_one_line_naming_it(tmp_path):
    info = tmp_path / "plugins" / "broken-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[ddppo.env_families]\nbroken = nosuchmodule:FAMILY\n")
    res = ddppo(["config", "gridnav"], tmp_path, tmp_path / "plugins")
    assert res.returncode == 2 and res.stderr.strip().splitlines() == [
        "ddppo: environment error: env family entry point broken = 'nosuchmodule:FAMILY' (ddppo.env_families) "
        "failed to load: ModuleNotFoundError: No module named 'nosuchmodule'"], res.stderr[-2000:]
