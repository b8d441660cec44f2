"""Loading: schema defaults <- YAML file <- CLI dotlist, merged with OmegaConf structured configs (unknown keys
and wrong types fail with the dotted key named), checked, and frozen. Also the config as YAML text and back."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any, Sequence

import yaml
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from ddppo import configs
from ddppo.config.checks import problems
from ddppo.config.schema import Config
from ddppo.errors import ConfigError


def _schema(cls: type = Config) -> DictConfig:
    """The schema of `cls` (the whole Config, or one section) as a writable typed DictConfig, for layers to be
    merged onto.

    `OmegaConf.structured` flags the node of every frozen dataclass (the root and
    each section) read-only. omegaconf 2.4's merge writes through those flags, but
    2.3's lifts only the root's, so merging `run.dir` failed with "Cannot set value
    of read-only config node". Clearing the flag on every node makes the merge
    behave the same on both; the `Config` built from it stays a frozen dataclass.
    """
    schema = OmegaConf.structured(cls)
    _set_writable(schema)
    return schema


def _set_writable(node: DictConfig) -> None:
    OmegaConf.set_readonly(node, False)
    for key in node:
        child = node[key]
        if isinstance(child, DictConfig):
            _set_writable(child)


def _wrap(err: OmegaConfBaseException, source: str) -> ConfigError:
    key = getattr(err, "full_key", None)
    msg = str(err).split("\n")[0].rstrip()
    where = f"{key}: " if key else ""
    end = "" if msg.endswith((".", "?", "!")) else "."  # omegaconf's "Did you mean: 'lr'?" ends a sentence already
    return ConfigError(f"{source}: {where}{msg}{end} Run `ddppo config CONFIG` to see every valid key.")


def _section_problems(layer: Any, schema: Any, prefix: str = "") -> list[str]:
    """Keys of a (plain) layer that give a value where the schema has a section of keys, or keys where it has a
    list."""
    if not isinstance(layer, dict):
        return []
    out = []
    for key, value in layer.items():
        default = getattr(schema, key, None) if isinstance(key, str) else None
        if isinstance(default, list) and isinstance(value, dict):  # `a.list.x=0`: omegaconf's merge raises TypeError
            out.append(f"{prefix}{key} is a list, not a section of keys: give it whole, e.g. {prefix}{key}=[...] "
                       f"(not {prefix}{key}.{next(iter(value), 'x')}=...)")
            continue
        if not dataclasses.is_dataclass(default):
            continue  # a leaf, or an unknown key (the merge names it)
        if isinstance(value, dict):
            out += _section_problems(value, default, f"{prefix}{key}.")
        else:
            out.append(f"{prefix}{key}={value!r} must be a section of keys (e.g. {prefix}{key}."
                       f"{dataclasses.fields(default)[0].name}=...), not a single value")
    return out


def _non_finite(obj: Any, prefix: str = "") -> list[str]:
    """Float fields holding nan or inf (no option means anything with them)."""
    out = []
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value):
            out += _non_finite(value, f"{prefix}{f.name}.")
        elif isinstance(value, float) and not math.isfinite(value):
            out.append(f"{prefix}{f.name}={value} must be a finite number")
    return out


class UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a key given twice in one mapping (PyYAML keeps the last silently, so a
    repeated `ppo:` section would drop the first one's keys)."""

    def construct_mapping(self, node, deep=False):
        first: dict[Any, int] = {}
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node)
            if key in first:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (first at line {first[key]}); give each key once",
                    key_node.start_mark)
            first[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


def yaml_problem(err: yaml.YAMLError) -> str:
    """A YAML parser error on one line: what is wrong and where."""
    problem = getattr(err, "problem", None) or str(err).splitlines()[0]
    mark = getattr(err, "problem_mark", None)
    return f"{problem} (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else problem


def yaml_layer(text: str, what: str) -> DictConfig:
    """YAML text of config sections as an OmegaConf layer (not yet checked against the schema); ConfigError
    naming `what` if it is not YAML or not a mapping. The one way config YAML is parsed: files, stored configs
    (run dirs, checkpoints) and sweep base configs."""
    try:
        data = yaml.load(text, UniqueKeyLoader)
    except yaml.YAMLError as err:
        raise ConfigError(f"{what} is not valid YAML: {yaml_problem(err)}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{what} must hold a mapping of sections (run:, env:, ppo:, ...), "
                          f"not a {type(data).__name__}")
    bad = _non_name_key(data)
    if bad is not None:
        raise ConfigError(f"{what} has the key {bad[1]!r}{f' under {bad[0]}' if bad[0] else ''}: config keys are "
                          f"names (run:, ppo: lr:, ...); write it as one")
    return OmegaConf.create(data)


def _non_name_key(data: Any, path: str = "") -> tuple[str, Any] | None:
    """(where, key) of the first mapping key that is not a string (YAML's `~:`, `1:`, `[a]:`), or None."""
    if isinstance(data, dict):
        for key, value in data.items():
            if not isinstance(key, str):
                return path, key
            found = _non_name_key(value, f"{path}.{key}" if path else key)
            if found is not None:
                return found
    elif isinstance(data, list):
        for i, value in enumerate(data):
            found = _non_name_key(value, f"{path}[{i}]")
            if found is not None:
                return found
    return None


def shipped_config(name: str) -> Path:
    """The path of the shipped config `name` (`gridnav`); ConfigError naming the shipped ones if there is none."""
    found = configs.find(name)
    if found is None:
        raise ConfigError(f"no shipped config named {name!r}; shipped: {', '.join(configs.names())}")
    return found


def config_path(name: str | Path) -> Path:
    """A config file given on the command line: a path to a YAML file, else a shipped config's name (`gridnav`,
    `habitat_lab_pointnav`; `ddppo config --list`), so the installed package needs no clone."""
    path = Path(name)
    if path.is_file():
        return path
    shipped = None if path.is_dir() else configs.find(name)
    if shipped is not None:
        return shipped
    what = "is a directory" if path.is_dir() else "does not exist"
    raise ConfigError(f"config file {str(path)!r} {what} and is not a shipped config's name; pass a YAML file or a "
                      f"training config's name from `ddppo config --list` ({', '.join(configs.by_kind()['train'])})")


def _not_a_training_config(given: str | Path, path: Path, data: Any) -> str | None:
    """One line saying what a file that is not a training config is and how it is used (a habitat-lab task
    config, a sweep spec), or None for a training config."""
    kind = configs.kind_of(data)
    if kind == "train":
        return None
    head = f"config file {str(given)!r} is a {configs.KINDS[kind][0]}, not a training config"
    if kind == "sweep":
        return f"{head}; run it with `ddppo sweep {given}` (`--dry-run` lists its runs)"
    users = configs.naming(path)
    if users:
        return (f"{head}; a training config names it in env.habitat_lab.config, as the shipped {users[0]} does: "
                f"`ddppo train {users[0]}`")
    return (f"{head}; name it in a training config's env.habitat_lab.config (with env.name=habitat_lab), e.g. "
            f"`ddppo train habitat_lab_pointnav env.habitat_lab.config={given}`")


def read_yaml(path: str | Path) -> DictConfig:
    """A YAML config file, or a shipped config's name, as a layer (see `yaml_layer`)."""
    given, path = path, config_path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"config file {str(path)!r} is not a YAML text file (not UTF-8 text); "
                          f"pass a YAML file such as configs/gridnav.yaml") from None
    except OSError as err:
        raise ConfigError(f"config file {str(path)!r} cannot be read: {err.strerror or err}") from None
    layer = yaml_layer(text, f"config file {str(path)!r}")
    problem = _not_a_training_config(given, path, OmegaConf.to_container(layer))
    if problem:
        raise ConfigError(problem)
    return layer


def parse_overrides(overrides: Sequence[str]) -> DictConfig:
    """`["ppo.lr=1e-4", ...]` -> a DictConfig; a malformed item is a ConfigError."""
    for item in overrides:
        if "=" not in item or item.startswith("="):
            raise ConfigError(f"override {item!r} is not of the form key=value (e.g. ppo.lr=1e-4)")
    for item in overrides:  # one at a time first, so a value that is not YAML is named
        try:
            OmegaConf.from_dotlist([item])
        except yaml.YAMLError as err:
            raise ConfigError(f"override {item!r}: the value is not valid YAML ({yaml_problem(err)}); quote it, "
                              f"e.g. 'key=\"...\"'") from None
        except OmegaConfBaseException:
            pass  # reported below, with all of them
    try:
        return OmegaConf.from_dotlist(list(overrides))
    except OmegaConfBaseException as err:
        raise _wrap(err, "overrides") from None


def _on_off_keys() -> list[tuple[str, str]]:
    """(section, key) of the on | off | auto fields (normalize.obs, ...)."""
    from ddppo.config.schema import fields_of

    return [tuple(k.rsplit(".", 1)) for k, f in fields_of()
            if {"on", "off"} <= set(f.metadata.get("choices") or ()) and k.count(".") == 1]


def _words_for_bools(layer: DictConfig) -> DictConfig:
    """YAML reads an unquoted on / off (and true / false) as a bool: on an on | off | auto field it means the word."""
    for section, key in _on_off_keys():
        node = layer.get(section) if isinstance(layer, DictConfig) else None
        if isinstance(node, DictConfig) and isinstance(node.get(key), bool):
            node[key] = "on" if node[key] else "off"
    return layer


def build_config(*layers: tuple[str, DictConfig]) -> Config:
    """Merge named layers onto the schema, convert to a frozen Config and check it."""
    merged = _schema()
    for source, layer in layers:
        layer = _words_for_bools(layer)
        wrong = _section_problems(OmegaConf.to_container(layer), Config())
        if wrong:
            raise ConfigError(f"{source}: " + "; ".join(wrong))
        try:
            merged = OmegaConf.merge(merged, layer)
        except OmegaConfBaseException as err:
            raise _wrap(err, source) from None
    try:
        cfg: Config = OmegaConf.to_object(merged)
    except OmegaConfBaseException as err:
        raise _wrap(err, "config") from None
    found = _non_finite(cfg) + problems(cfg)
    if found:
        many = f" ({len(found)} problems)" if len(found) > 1 else ""
        raise ConfigError(f"invalid config{many}: " + "; ".join(found))
    return cfg


def load_config(path: str | Path | None, overrides: Sequence[str] = ()) -> Config:
    """Schema <- YAML file (optional) <- dotlist overrides; validated and frozen."""
    layers = []
    if path is not None:
        layers.append((str(path), read_yaml(path)))
    if overrides:
        layers.append(("overrides", parse_overrides(overrides)))
    return build_config(*layers)


def to_yaml(cfg: Config) -> str:
    """The fully resolved config as YAML text (what run.dir/config.yaml holds)."""
    return OmegaConf.to_yaml(OmegaConf.structured(cfg))


# Stored configs written before a key existed meant what the trainer did then, not the key's `auto` default:
# (section, key) -> the value that reproduces the old behaviour (checkpoints without normalisation statistics
# or a critic of its own keep loading into the model they were trained with).
LEGACY_VALUES = {("normalize", "obs"): "off", ("normalize", "reward"): "off", ("policy", "critic"): "shared"}


def from_yaml_text(text: str, source: str) -> Config:
    """Parse a resolved config written by `to_yaml` (checkpoints, run dirs)."""
    layer = yaml_layer(text, f"{source}: stored config")
    if "run" in layer:  # a whole resolved config (not a fragment): keys it lacks predate their field
        for (section, key), value in LEGACY_VALUES.items():
            if section not in layer or key not in layer[section]:
                OmegaConf.update(layer, f"{section}.{key}", value, force_add=True)
    return build_config((source, layer))


def diff_keys(a: Config, b: Config) -> list[str]:
    """Dotted keys whose values differ between two configs."""
    out: list[str] = []

    def walk(x: Any, y: Any, prefix: str) -> None:
        if dataclasses.is_dataclass(x) and dataclasses.is_dataclass(y):
            for f in dataclasses.fields(x):
                walk(getattr(x, f.name), getattr(y, f.name), f"{prefix}{f.name}.")
        elif x != y and not (isinstance(x, float) and isinstance(y, float) and math.isclose(x, y)):
            out.append(prefix[:-1])

    walk(a, b, "")
    return out
