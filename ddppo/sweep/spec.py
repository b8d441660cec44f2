"""Sweep specs: parse the YAML, expand grid x list x seeds into named runs, and build every run's config.

A spec (see configs/sweeps/):

    name: gridnav_syncfrac_lr          # optional; default: the file name without .yaml
    base: ../gridnav.yaml              # base config, relative to this file (or to the working directory)
    overrides:                         # fixed dotted overrides for every run
      run.total_env_steps: 100000
    grid:                              # cartesian product over dotted keys
      preemption.sync_frac: [0.5, 1.0]
      ppo.lr: [2.5e-4, 1.0e-3]
    list:                              # explicit variants (crossed with the grid); `name:` is optional
      - {name: gru, policy.rnn_type: gru}
      - {name: lstm, policy.rnn_type: lstm}
    seeds: 2                           # a count (seeds 0..n-1) or a list ([1, 7]); sets run.seed
    ranks: 2                           # ranks per run: torchrun locally, tasks per array task on SLURM
    max_parallel: 2                    # runs at a time (default: 1 locally, unlimited on SLURM)
    share_gpus: false                  # local: let parallel runs share GPUs when ranks x runs > visible GPUs
    slurm: [--gres=gpu:2, --time=12:00:00]   # extra sbatch options for the array (SLURM launcher)
    sweep_dir: runs/sweeps/NAME        # optional; default runs/sweeps/<name> under the working directory

Config layers of one run, later wins: schema <- base YAML <- spec overrides <- command-line overrides <- the
run's varied values and seed <- run.dir. A key may be varied by one axis only, and never also fixed on the
command line. Run names come from the varied values, e.g. `sync_frac=0.5,lr=0.001,seed=1`.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import yaml
from omegaconf import OmegaConf

from ddppo import configs
from ddppo.config import Config, UniqueKeyLoader, build_config, parse_overrides, read_yaml, yaml_problem
from ddppo.errors import ConfigError, SweepError

SPEC_KEYS = ("name", "base", "overrides", "grid", "list", "seeds", "ranks", "max_parallel", "share_gpus", "slurm",
             "sweep_dir")
MANAGED_KEYS = ("run.dir",)  # set by the sweep for every run


class _Loader(UniqueKeyLoader):
    """YAML 1.2 floats: `1e-3` is a float (PyYAML's YAML 1.1 makes it a string); a key given twice is refused."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
                   |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
                   |\.[0-9_]+(?:[eE][-+]?[0-9]+)?
                   |[-+]?\.(?:inf|Inf|INF)
                   |\.(?:nan|NaN|NAN))$""", re.X),
    list("-+0123456789."),
)


@dataclass(frozen=True)
class SweepSpec:
    """A parsed spec file."""

    path: Path
    name: str
    base: Path | None
    overrides: dict[str, Any]
    grid: dict[str, list]
    variants: list[dict[str, Any]]  # the `list` axis; each may hold "name"
    seeds: list[int] | None
    ranks: int = 1
    max_parallel: int | None = None
    share_gpus: bool = False
    slurm: list[str] = field(default_factory=list)
    sweep_dir: str | None = None


@dataclass(frozen=True)
class Run:
    """One run of a sweep: its name, what it varies, every override, and its validated config."""

    index: int
    name: str
    variant: str  # the name without the seed: runs of one variant differ only in the seed
    seed: int | None
    varied: dict[str, Any]  # the varied values (grid + list), by dotted key
    overrides: dict[str, Any]  # every override relative to the base file (fixed, command line, varied, seed)
    run_dir: Path
    cfg: Config


def flatten(data: dict, prefix: str = "") -> dict[str, Any]:
    """{"ppo": {"lr": 1}} and {"ppo.lr": 1} -> {"ppo.lr": 1}."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, dotted + "."))
        else:
            out[dotted] = value
    return out


def nest(dotted: dict[str, Any], where: str) -> dict:
    """{"ppo.lr": 1} -> {"ppo": {"lr": 1}}; a key that is both a value and a section is an error."""
    out: dict = {}
    for key, value in dotted.items():
        node = out
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise SweepError(f"{where}: {key} is set inside {part}, which is itself given a value")
        if leaf in node:
            raise SweepError(f"{where}: {key} is given twice, or both as a section and a value")
        node[leaf] = value
    return out


def format_value(value: Any) -> str:
    """A value as it is written on the command line (`ppo.lr=0.001`, `policy.resnet_layers=[2, 2]`)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        plain = re.fullmatch(r"[\w.:/+@-]+", value) and isinstance(yaml.load(value, _Loader), str)
        return value if plain else json.dumps(value)
    return json.dumps(value)


def override_list(overrides: dict[str, Any]) -> list[str]:
    return [f"{k}={format_value(v)}" for k, v in overrides.items()]


def _name_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, tuple)):
        return "x".join(_name_value(v) for v in value)
    return str(value)


def _sanitize(name: str) -> str:
    name = re.sub(r"[^A-Za-z0-9._=,+-]", "_", name)
    return name.lstrip(".-") or "run"


def _short_keys(keys: Sequence[str]) -> dict[str, str]:
    """The shortest dotted suffix of each key that is unique among `keys` (ppo.lr -> lr)."""
    short = {}
    for key in keys:
        parts = key.split(".")
        for n in range(1, len(parts) + 1):
            cand = ".".join(parts[-n:])
            if all(k == key or not (k == cand or k.endswith("." + cand)) for k in keys):
                break
        short[key] = cand
    return short


def _read_spec_yaml(path: Path) -> dict:
    if not path.is_file():
        raise SweepError(f"sweep spec {str(path)!r} does not exist; pass a YAML file or a shipped sweep spec's name "
                         f"from `ddppo config --list` ({', '.join(configs.by_kind()['sweep'])})")
    try:
        data = yaml.load(path.read_text(), _Loader)
    except yaml.YAMLError as err:
        raise SweepError(f"sweep spec {str(path)!r} is not valid YAML: {yaml_problem(err)}") from None
    if not isinstance(data, dict):
        raise SweepError(f"sweep spec {str(path)!r} must be a mapping with keys {', '.join(SPEC_KEYS)}")
    kind = configs.kind_of(data)
    sections = {f.name for f in dataclasses.fields(Config)}
    if kind == "habitat_lab" or (kind == "train" and data and set(data) <= sections):
        raise SweepError(f"{str(path)!r} is a {configs.KINDS[kind][0]}, not a sweep spec; a sweep spec names a "
                         f"training config as its base: `ddppo sweep {configs.by_kind()['sweep'][0]}` runs the shipped "
                         f"one (`ddppo config --list`)")
    unknown = [k for k in data if k not in SPEC_KEYS]
    if unknown:
        raise SweepError(f"sweep spec {path}: unknown key(s) {', '.join(map(str, unknown))}; "
                         f"valid keys: {', '.join(SPEC_KEYS)}")
    return data


def _overrides_of(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return flatten(OmegaConf.to_container(parse_overrides(value)))
    if isinstance(value, dict):
        return flatten(value)
    raise SweepError(f"{where} must be a mapping of dotted keys to values (or a list of key=value)")


def _seeds_of(value: Any, where: str) -> list[int] | None:
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 1:
            raise SweepError(f"{where}={value} must be a count >= 1 or a list of seeds")
        return list(range(value))
    if isinstance(value, list) and value and all(isinstance(s, int) and not isinstance(s, bool) for s in value):
        if len(set(value)) != len(value):
            raise SweepError(f"{where}={value} repeats a seed")
        return list(value)
    raise SweepError(f"{where}={value!r} must be a count >= 1 or a non-empty list of integer seeds")


def _positive_int(value: Any, where: str, default: int | None) -> int | None:
    if value is None:
        return default
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise SweepError(f"{where}={value!r} must be an integer >= 1")
    return value


def _resolve_base(value: Any, spec_path: Path) -> Path | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise SweepError(f"sweep spec {spec_path}: base={value!r} must be a path to a YAML config")
    for cand in (spec_path.parent / value, Path(value)):
        if cand.is_file():
            return cand.resolve()
    raise SweepError(f"sweep spec {spec_path}: base config {value!r} not found (relative to {spec_path.parent} "
                     f"or the working directory)")


def load_spec(path: str | Path) -> SweepSpec:
    """Parse and check the structure of a spec file (values are checked when configs are built): a path, or a
    shipped spec's name (`sweeps/gridnav_syncfrac_lr`)."""
    path = Path(path)
    if not path.exists() and configs.find(path) is not None:
        path = configs.find(path)
    data = _read_spec_yaml(path)
    where = f"sweep spec {path}"
    grid = flatten(data.get("grid") or {}) if isinstance(data.get("grid") or {}, dict) else None
    if grid is None:
        raise SweepError(f"{where}: grid must be a mapping of dotted keys to lists of values")
    for key, values in grid.items():
        if not isinstance(values, list) or not values:
            raise SweepError(f"{where}: grid.{key} must be a non-empty list of values, not {values!r}")
    raw_list = data.get("list") or []
    if not isinstance(raw_list, list) or not all(isinstance(v, dict) and v for v in raw_list):
        raise SweepError(f"{where}: list must be a list of mappings (dotted key -> value, optional name)")
    variants = []
    for i, entry in enumerate(raw_list):
        name = entry.get("name")
        if name is not None and not isinstance(name, str):
            raise SweepError(f"{where}: list[{i}].name={name!r} must be a string")
        variants.append({**({"name": name} if name else {}),
                         **flatten({k: v for k, v in entry.items() if k != "name"})})
    slurm = data.get("slurm") or []
    if not isinstance(slurm, list) or not all(isinstance(o, str) for o in slurm):
        raise SweepError(f"{where}: slurm must be a list of sbatch options, e.g. [--time=04:00:00, --gres=gpu:2]")
    name = data.get("name") or path.name.removesuffix(".yaml").removesuffix(".yml")
    if not isinstance(name, str) or _sanitize(name) != name:
        raise SweepError(f"{where}: name={name!r} must use only letters, digits and ._=,+-")
    sweep_dir = data.get("sweep_dir")
    if sweep_dir is not None and not isinstance(sweep_dir, str):
        raise SweepError(f"{where}: sweep_dir={sweep_dir!r} must be a path")
    share_gpus = data.get("share_gpus", False)
    if not isinstance(share_gpus, bool):
        raise SweepError(f"{where}: share_gpus={share_gpus!r} must be true or false")
    spec = SweepSpec(path=path.resolve(), name=name, base=_resolve_base(data.get("base"), path),
                     overrides=_overrides_of(data.get("overrides"), f"{where}: overrides"), grid=grid,
                     variants=variants, seeds=_seeds_of(data.get("seeds"), f"{where}: seeds"),
                     ranks=_positive_int(data.get("ranks"), f"{where}: ranks", 1),
                     max_parallel=_positive_int(data.get("max_parallel"), f"{where}: max_parallel", None),
                     share_gpus=share_gpus, slurm=list(slurm), sweep_dir=sweep_dir)
    _check_axes(spec, where)
    return spec


def _check_axes(spec: SweepSpec, where: str) -> None:
    list_keys = {k for v in spec.variants for k in v if k != "name"}
    both = sorted(set(spec.grid) & list_keys)
    if both:
        raise SweepError(f"{where}: {', '.join(both)} is varied by both grid and list; vary it in one of them")
    varied = set(spec.grid) | list_keys
    for key in sorted((varied | set(spec.overrides)) & set(MANAGED_KEYS)):
        raise SweepError(f"{where}: {key} is set by the sweep (each run gets SWEEP_DIR/runs/NAME); remove it")
    if spec.seeds is not None and "run.seed" in varied:
        raise SweepError(f"{where}: run.seed is varied and `seeds` is given; use one of them")
    names = [v["name"] for v in spec.variants if "name" in v]
    if len(set(names)) != len(names):
        raise SweepError(f"{where}: list variant names repeat: {names}")


def _variants(spec: SweepSpec) -> list[tuple[str, dict[str, Any]]]:
    """(variant name, varied values) for grid x list, in spec order."""
    list_keys = list(dict.fromkeys(k for v in spec.variants for k in v if k != "name"))
    short = _short_keys(list(spec.grid) + list_keys)
    out = []
    grid_points = [dict(zip(spec.grid, combo)) for combo in itertools.product(*spec.grid.values())]
    for point in grid_points:
        for entry in spec.variants or [{}]:
            values = {k: v for k, v in entry.items() if k != "name"}
            parts = [f"{short[k]}={_name_value(v)}" for k, v in point.items()]
            if "name" in entry:
                parts.append(entry["name"])
            else:
                parts += [f"{short[k]}={_name_value(v)}" for k, v in values.items()]
            out.append((_sanitize(",".join(parts)) if parts else "base", {**point, **values}))
    return out


def expand(spec: SweepSpec, cli_overrides: dict[str, Any], sweep_dir: Path) -> list[Run]:
    """Every run of the sweep with its config built and checked; all problems are raised at once."""
    clash = sorted(set(cli_overrides) & (set(spec.grid) | {k for v in spec.variants for k in v}))
    if spec.seeds is not None and "run.seed" in cli_overrides:
        clash.append("run.seed")
    if clash or set(cli_overrides) & set(MANAGED_KEYS):
        bad = clash or sorted(set(cli_overrides) & set(MANAGED_KEYS))
        raise SweepError(f"command-line override of {', '.join(bad)}: it is set by the sweep spec for each run")
    base_layers = []
    if spec.base is not None:
        base_layers.append((str(spec.base), _read_base(spec.base)))
    fixed = {**spec.overrides, **cli_overrides}
    if spec.overrides:
        base_layers.append((f"sweep spec {spec.path.name}: overrides",
                            OmegaConf.create(nest(spec.overrides, "sweep spec overrides"))))
    if cli_overrides:
        base_layers.append(("command-line overrides", OmegaConf.create(nest(cli_overrides, "overrides"))))
    runs: list[Run] = []
    errors: list[str] = []
    seen: dict[str, int] = {}
    for variant, varied in _variants(spec):
        for seed in spec.seeds if spec.seeds is not None else [None]:
            name = variant if seed is None else f"{variant},seed={seed}"
            if name in seen:
                raise SweepError(f"runs {seen[name]} and {len(runs)} are both named {name!r}: two variants have "
                                 f"the same values; remove the duplicate from the spec")
            seen[name] = len(runs)
            own = {**varied, **({"run.seed": seed} if seed is not None else {})}
            run_dir = sweep_dir / "runs" / name
            try:
                layer = OmegaConf.create(nest({**own, "run.dir": str(run_dir)}, f"run {name}"))
                cfg = build_config(*base_layers, ("varied values", layer))
            except ConfigError as err:
                errors.append((name, str(err)))
                continue
            runs.append(Run(index=len(runs), name=name, variant=variant, seed=seed, varied=varied,
                            overrides={**fixed, **own}, run_dir=run_dir, cfg=cfg))
    if errors:
        raise SweepError(f"{len(errors)} of {len(seen)} run(s) of sweep {spec.name!r} have an invalid config; "
                         "nothing was launched: " + "; ".join(_group(errors, len(seen))))
    return runs


def _group(errors: list[tuple[str, str]], total: int) -> list[str]:
    """One line per distinct message, naming its runs (all of them, or the first three and a count)."""
    by_msg: dict[str, list[str]] = {}
    for name, msg in errors:
        by_msg.setdefault(msg, []).append(name)
    lines = []
    for msg, names in by_msg.items():
        if len(names) == total > 1:
            who = f"every run ({total})"
        elif len(names) > 3:
            who = "runs " + ", ".join(map(repr, names[:3])) + f" and {len(names) - 3} more"
        else:
            who = ("run " if len(names) == 1 else "runs ") + ", ".join(map(repr, names))
        lines.append(f"{who}: {msg}")
    return lines


def _read_base(path: Path):
    try:
        return read_yaml(path)
    except ConfigError as err:
        raise SweepError(f"base config: {err}") from None


def cli_overrides(items: Sequence[str]) -> dict[str, Any]:
    """Command-line `key=value` items -> dotted dict of typed values (ConfigError when malformed)."""
    if not items:
        return {}
    return flatten(OmegaConf.to_container(parse_overrides(items)))
