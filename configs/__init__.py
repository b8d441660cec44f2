"""The shipped configs, installed as `ddppo.configs`: `ddppo train gridnav` finds `gridnav.yaml` here by name.

Data only: this module imports nothing of ddppo, so the trainer and the environments may both ask it.
"""

from __future__ import annotations

from pathlib import Path

HOME = Path(__file__).resolve().parent


def names() -> list[str]:
    """Every shipped config by name (`gridnav`, `habitat_lab/pointnav_gen_task`, `sweeps/gridnav_syncfrac_lr`)."""
    return sorted(str(p.relative_to(HOME).with_suffix("")) for p in HOME.rglob("*.yaml"))


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
