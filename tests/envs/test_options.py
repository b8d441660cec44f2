"""The env option sections (each family's envs/<family>/options.py, found by envs/registry.py) use the config's
one validation idiom: each field's choices, range, item check and whether it is required in its metadata
(ddppo/field_metadata.py), shown by `ddppo config --explain` and refused by the config checks and by an environment
built directly; `problems()` only for what one field cannot say; sections frozen, like the rest of the config."""

from __future__ import annotations

import dataclasses
import json

import pytest

from ddppo.cli import main
from ddppo.config import load_config
from ddppo.field_metadata import BOUNDS, CHOICES, rule_problems, section_problems
from ddppo.errors import ConfigError
from ddppo.envs.registry import families

OPTION_SECTIONS = {section: family.options for section, family in families().items()}

# a valid section of each kind: the values an environment needs once it is the one chosen
VALID = {"habitat": {"dataset": "episodes.json.gz"}, "habitat_lab": {"config": "task.yaml"}}

# (section, field, value, the message the config refuses it with): rules that were hand-written in problems()
MOVED_RULES = [
    ("gridnav", "num_maps", 0, "env.gridnav.num_maps=0 must be > 0"),
    ("gridnav", "map_size", 4, "env.gridnav.map_size=4 must be >= 5; walls need room"),
    ("gridnav", "num_headings", 6, "env.gridnav.num_headings=6 must be one of 4, 8; moves go to neighbouring cells"),
    ("gridnav", "fov_degrees", 400.0, "env.gridnav.fov_degrees=400.0 must be in (0, 360]"),
    ("gridnav", "obstacle_density", 0.5, "env.gridnav.obstacle_density=0.5 must be in [0, 0.5)"),
    ("gridnav", "min_geodesic", -1.0, "env.gridnav.min_geodesic=-1.0 must be >= 0"),
    ("gym", "vectorization_mode", "threads", "env.gym.vectorization_mode='threads' must be one of sync, async"),
    ("gym", "max_episode_steps", -1, "env.gym.max_episode_steps=-1 must be >= 0"),
    ("synthetic", "slow_factor", 0.0, "env.synthetic.slow_factor=0.0 must be > 0"),
    ("synthetic", "nan_reward_steps", 0, "env.synthetic.nan_reward_steps=0 must be > 0"),
    ("habitat", "backend", "unity", "env.habitat.backend='unity' must be one of habitat, grid"),
    ("habitat", "hfov", 180.0, "env.habitat.hfov=180.0 must be in (0, 180)"),
    ("habitat", "depth_width", 0, "env.habitat.depth_width=0 must be > 0"),
    ("habitat", "gpu_device_id", -3, "env.habitat.gpu_device_id=-3 must be >= -2; -2 = local GPU, -1 = CPU rendering"),
    ("habitat_lab", "gpu_device_id", -3,
     "env.habitat_lab.gpu_device_id=-3 must be >= -2; -2 = local GPU, -1 = CPU rendering"),
]


@pytest.mark.parametrize("section, key, value, message", MOVED_RULES, ids=[f"{s}.{k}" for s, k, *_ in MOVED_RULES])
def test_each_moved_rule_is_refused_in_one_line_naming_the_key(section, key, value, message):
    with pytest.raises(ConfigError) as err:  # whichever environment is chosen: ranges hold for every section
        load_config(None, [f"env.{section}.{key}={value}"])
    assert message in str(err.value) and "\n" not in str(err.value)
    built = OPTION_SECTIONS[section](**{**VALID.get(section, {}), key: value})  # an env built without the config
    assert section_problems(built) == [message[len(f"env.{section}."):]]


# (section, field, a list value, the message the config refuses it with): one-field rules on each item of a list,
# that problems() held; like ranges, they hold whichever environment is chosen
ITEM_RULES = [
    ("habitat", "scenes", ["gen_000", ""], "env.habitat.scenes=[''] must be scene names, non-empty strings (e.g. "
                                           "[gen_000])"),
    ("habitat_lab", "overrides", ["A.B=1", "NOEQUALS", "~"],
     "env.habitat_lab.overrides=['NOEQUALS', '~'] must be KEY=VALUE strings (e.g. SIMULATOR.TURN_ANGLE=30; with "
     "0.3.x also Hydra's ~KEY, which deletes a key or defaults entry)"),
    ("gym", "episode_metrics", ["success", "return"], "env.gym.episode_metrics=['return'] must be info keys other "
                                                      "than return and length (ddppo counts those itself)"),
]


@pytest.mark.parametrize("section, key, value, message", ITEM_RULES, ids=[f"{s}.{k}" for s, k, *_ in ITEM_RULES])
def test_each_item_rule_is_refused_in_one_line_naming_the_items(section, key, value, message):
    with pytest.raises(ConfigError) as err:
        load_config(None, [f"env.{section}.{key}={json.dumps(value)}"])
    assert message in str(err.value) and "\n" not in str(err.value)
    built = OPTION_SECTIONS[section](**{**VALID.get(section, {}), key: value})
    assert section_problems(built) == [message[len(f"env.{section}."):]] and rule_problems(built) == []


# (env.name, section, required field, the message once that environment is chosen): values problems() required
REQUIRED_OPTIONS = [
    ("habitat_pointnav", "habitat", "dataset", "env.habitat.dataset='' must name a PointNav .json.gz file or a folder "
                                               "with content/*.json.gz (make one with `python -m "
                                               "ddppo.envs.scenes.episode_gen`)"),
    ("habitat_lab", "habitat_lab", "config", "env.habitat_lab.config='' must name a habitat-lab task config file "
                                             "(e.g. configs/habitat_lab/pointnav_gen_task.yaml)"),
    ("habitat_lab", "habitat_lab", "success_measure", "env.habitat_lab.success_measure='' must name a measure "
                                                      "(e.g. success)"),
]


@pytest.mark.parametrize("name, section, key, message", REQUIRED_OPTIONS, ids=[f"{s}.{k}" for _, s, k, _ in
                                                                              REQUIRED_OPTIONS])
def test_a_required_option_is_refused_once_its_environment_is_chosen(name, section, key, message):
    empty = f"env.{section}.{key}=''"
    with pytest.raises(ConfigError) as err:
        load_config(None, [f"env.name={name}", empty])
    assert message in str(err.value)
    load_config(None, [empty])  # not while another environment is chosen
    built = OPTION_SECTIONS[section](**{**VALID.get(section, {}), key: ""})
    assert section_problems(built) == [message[len(f"env.{section}."):]] and rule_problems(built) == []


def violating(f: dataclasses.Field):
    """A value outside the field's declared choices or range."""
    choices, bounds = f.metadata.get(CHOICES), f.metadata.get(BOUNDS) or {}
    if choices:
        return max(choices) + 1 if all(isinstance(c, int) for c in choices) else "not-a-choice"
    if "gt" in bounds or "ge" in bounds:
        return bounds["gt"] if "gt" in bounds else bounds["ge"] - 1
    return bounds["lt"] if "lt" in bounds else bounds["le"] + 1


DECLARED = [(name, f) for name, cls in OPTION_SECTIONS.items() for f in dataclasses.fields(cls)
            if f.metadata.get(CHOICES) or f.metadata.get(BOUNDS)]


@pytest.mark.parametrize("section, field", DECLARED, ids=[f"{s}.{f.name}" for s, f in DECLARED])
def test_each_declared_rule_is_stated_once(section, field):
    """problems() never states a field's choices or range again: each out-of-range value is refused once."""
    options = OPTION_SECTIONS[section](**{**VALID.get(section, {}), field.name: violating(field)})
    found = section_problems(options)
    assert len(found) == 1 and found[0].startswith(f"{field.name}="), found
    assert rule_problems(options) == []


def test_every_section_declares_its_ranges():
    """Each section declares choices or ranges (the rules problems() used to hand-code)."""
    assert {name for name, _ in DECLARED} == set(OPTION_SECTIONS)
    assert all(section_problems(cls(**VALID.get(name, {}))) == [] for name, cls in OPTION_SECTIONS.items())


def test_rules_across_fields_stay_in_problems():
    bad = OPTION_SECTIONS["habitat"](dataset="x", min_depth=5.0, max_depth=2.0)
    assert rule_problems(bad) == ["min_depth=5.0, max_depth=2.0: need 0 <= min_depth < max_depth"]
    with pytest.raises(ConfigError, match="env.habitat.dataset=''"):  # needed once the environment is chosen
        load_config(None, ["env.name=habitat_pointnav"])
    load_config(None, [])  # ... and not while another one is


def test_explain_shows_an_env_sections_choices_and_ranges(capsys):
    assert main(["config", "--explain", "env.gym"]) == 0
    out = capsys.readouterr().out
    assert "env.gym.vectorization_mode: str = 'sync'\n" in out and "    one of: sync, async\n" in out
    assert main(["config", "--explain", "env.habitat.hfov"]) == 0
    assert "    range: > 0 and < 180\n" in capsys.readouterr().out
    assert main(["config", "--explain", "env.habitat_lab.success_measure"]) == 0
    assert "    required once env.name=habitat_lab: must name a measure (e.g. success)\n" in capsys.readouterr().out


@pytest.mark.parametrize("section", sorted(OPTION_SECTIONS))
def test_env_sections_are_frozen(section):
    cls = OPTION_SECTIONS[section]
    assert cls.__dataclass_params__.frozen
    field = dataclasses.fields(cls)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(cls(), field, None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(getattr(load_config(None, []).env, section), field, None)
