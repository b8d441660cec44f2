"""pyproject.toml lists the installed packages by hand (the repository's envs/, benchmarks/, configs/ and slurm/ are
installed under `ddppo` through package-dir): every package folder must be in that list, or the wheel silently
leaves it out (tests/packaging/test_wheel.py shows the whole install, slowly; this is the fast check)."""

from __future__ import annotations

from pathlib import Path

from testutil import REPO

INSTALLED_AS = {"ddppo": "ddppo", "envs": "ddppo.envs", "benchmarks": "ddppo.benchmarks", "configs": "ddppo.configs",
                "slurm": "ddppo.slurm"}


def listed() -> set[str]:
    try:
        import tomllib
    except ImportError:  # Python < 3.11: the list read by hand
        text = (REPO / "pyproject.toml").read_text()
        block = text.split("packages = [", 1)[1].split("]", 1)[0]
        return {p.strip().strip('"') for p in block.replace("\n", ",").split(",") if p.strip().strip('"')}
    return set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])


def package_folders() -> set[str]:
    found = set()
    for top, name in INSTALLED_AS.items():
        for init in (REPO / top).rglob("__init__.py"):
            rel = init.parent.relative_to(REPO / top).parts
            found.add(".".join([name, *rel]))
    return found


def data_folders() -> set[str]:
    """Folders of shipped YAML without an __init__.py (configs/habitat_lab, configs/sweeps)."""
    return {".".join(["ddppo.configs", *p.relative_to(REPO / "configs").parts])
            for p in (REPO / "configs").rglob("*") if p.is_dir() and "__pycache__" not in p.parts
            and any(p.glob("*.yaml"))}


def missing(listed_names: set[str], folders: set[str]) -> list[str]:
    return sorted(folders - listed_names)


def test_every_package_folder_is_installed():
    assert missing(listed(), package_folders() | data_folders()) == []
    assert not [name for name in listed() if name not in package_folders() | data_folders()]


def test_the_check_can_fail():
    assert missing({"ddppo"}, {"ddppo", "ddppo.new"}) == ["ddppo.new"]
    assert Path(REPO / "envs" / "scenes" / "__init__.py").is_file()  # a folder this check must see
    assert "ddppo.envs.scenes" in package_folders()
