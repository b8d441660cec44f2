"""A key given twice in a YAML config or sweep spec is refused, naming the key and both lines (PyYAML kept the
last silently: a second `ppo:` section dropped the first one's keys)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddppo.config import load_config, yaml_layer
from ddppo.errors import ConfigError

TWICE_SECTION = "ppo:\n  lr: 0.001\nenv:\n  num_envs: 4\nppo:\n  epochs: 2\n"
TWICE_NESTED = "ppo:\n  lr: 0.001\n  epochs: 2\n  lr: 0.01\n"


@pytest.mark.parametrize("text, key, first, line", [(TWICE_SECTION, "ppo", 1, 5), (TWICE_NESTED, "lr", 2, 4)])
def test_duplicate_key_named_with_its_lines(text: str, key: str, first: int, line: int):
    with pytest.raises(ConfigError) as err:
        yaml_layer(text, "config file 'x.yaml'")
    msg = str(err.value)
    assert "\n" not in msg
    assert f"duplicate key '{key}' (first at line {first})" in msg and f"(line {line}," in msg, msg
    assert msg.startswith("config file 'x.yaml' is not valid YAML")


def test_same_key_in_different_mappings_and_merge_keys_are_fine():
    layer = yaml_layer("ppo:\n  lr: 0.001\neval:\n  base: &b {seed_offset: 1}\n", "x")
    assert layer.ppo.lr == 0.001
    assert yaml_layer("a: &a {x: 1}\nb:\n  <<: *a\n  y: 2\n", "x").b.y == 2


def test_cli_and_sweep_refuse_it_in_one_line(tmp_path: Path, cli):
    cfg = tmp_path / "twice.yaml"
    cfg.write_text(TWICE_SECTION)
    with pytest.raises(ConfigError):
        load_config(cfg, [])
    res = cli("config", str(cfg))
    assert res.returncode == 2 and "Traceback" not in res.stderr, res
    assert res.stderr.strip().count("\n") == 0 and "duplicate key 'ppo'" in res.stderr, res
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"base: {cfg}\nseeds: 1\nseeds: 2\n")
    res = cli("sweep", str(spec), "--dry-run", "--sweep-dir", str(tmp_path / "sw"))
    assert res.returncode == 2 and "duplicate key 'seeds' (first at line 2)" in res.stderr, res
    assert res.stderr.strip().count("\n") == 0 and not (tmp_path / "sw").exists(), res


@pytest.mark.parametrize("text, key, where", [("ppo:\n  ~: 3\n", "None", "ppo"), ("true: 1\n", "True", ""),
                                              ("env:\n  gym:\n    1: x\n", "1", "env.gym")])
def test_a_key_that_is_not_a_name_is_one_line(text: str, key: str, where: str):
    """YAML allows null, number and list keys; a config's keys are names (omegaconf raised its own traceback)."""
    with pytest.raises(ConfigError) as err:
        yaml_layer(text, "config file 'x.yaml'")
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith(f"config file 'x.yaml' has the key {key}"), msg
    assert (f" under {where}:" in msg) if where else " under " not in msg
