"""The shipped configs, installed as `ddppo.configs`: `ddppo train gridnav` finds `gridnav.yaml` here by name.

Data only: this module imports nothing of ddppo, so the trainer and the environments may both ask it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

HOME = Path(__file__).resolve().parent

# What a config file is, told from its top-level keys (one source for `ddppo config --list` and for the line
# `ddppo train` gives when handed something else): kind -> (what it is, how it is used; NAME is its name).
KINDS = {
    "train": ("training config", "ddppo train NAME"),
    "habitat_lab": ("habitat-lab task config", "named in a training config's env.habitat_lab.config, not trained "
                                               "by name"),
    "sweep": ("sweep spec", "ddppo sweep NAME"),
}
SWEEP_KEYS = frozenset({"base", "grid", "list", "seeds"})  # keys only a sweep spec has (ddppo/sweep/spec.py)


def names() -> list[str]:
    """Every shipped config by name (`gridnav`, `habitat_lab/pointnav_gen_task`, `sweeps/gridnav_syncfrac_lr`)."""
    return sorted(str(p.relative_to(HOME).with_suffix("")) for p in HOME.rglob("*.yaml"))


def kind_of(data: Any) -> str:
    """The KINDS key of a config file's parsed YAML: a sweep spec has its own keys (base, grid, ...); a habitat-lab
    task config has 0.2.x's upper-case sections (ENVIRONMENT, SIMULATOR) or 0.3.x's Hydra keys (habitat,
    defaults); anything else is taken for a training config (its keys are checked against the schema)."""
    keys = {k for k in data if isinstance(k, str)} if isinstance(data, dict) else set()
    if keys & SWEEP_KEYS:
        return "sweep"
    if keys & {"habitat", "defaults"} or any(k.isupper() for k in keys):
        return "habitat_lab"
    return "train"


def kind(name: str) -> str:
    """The KINDS key of the shipped config `name`."""
    return kind_of(yaml.safe_load(find(name).read_text(encoding="utf-8")))


def by_kind() -> dict[str, list[str]]:
    """Every shipped config's name under its kind, in KINDS' order."""
    out: dict[str, list[str]] = {k: [] for k in KINDS}
    for name in names():
        out[kind(name)].append(name)
    return out


def naming(task_config: Path) -> list[str]:
    """The shipped training configs whose env.habitat_lab.config is `task_config` or the 0.2.x file of that 0.3.x
    twin (`X_v03.yaml` is loaded for `X.yaml` where habitat-lab 0.3.x is installed)."""
    stem = task_config.stem[:-len("_v03")] if task_config.stem.endswith("_v03") else task_config.stem
    return [n for n in by_kind()["train"] if f"/{stem}.yaml" in find(n).read_text(encoding="utf-8")]


def find(name: str | Path) -> Path | None:
    """The shipped file `name` names, or None: a name (`gridnav`), a name with `.yaml`, or a repository path
    (`configs/gridnav.yaml`, as the docs write it) when the working directory has no such file."""
    text = str(name)
    if text.startswith("configs/"):
        text = text[len("configs/"):]
    candidate = (HOME / text).resolve()
    if candidate.suffix != ".yaml":
        candidate = candidate.with_suffix(".yaml") if not candidate.suffix else candidate
    try:
        candidate.relative_to(HOME)  # nothing outside the shipped folder (`../x`)
    except ValueError:
        return None
    return candidate if candidate.is_file() else None
