"""What the GPU check needs besides torch, brought from the checkout to a machine without network.

The machine a session may be lent (Python 3.10-3.13 with torch, no omegaconf, gymnasium or network) cannot
install ddppo's dependencies. So, here, with network:

    python tools/gpu_check/prepare_deps.py download [--python-version 3.12] [--dest .gpu_check]

puts the wheels of every dependency the checks import (REQUIREMENTS; antlr4-python3-runtime 4.9.3, which PyPI
has only as a source archive, is built into a wheel here) for that Python on Linux x86-64 into DEST/wheels, with
DEST/manifest.json naming them. DEST (.gpu_check/, git-ignored) travels with the checkout (the device tool's
`carry`). There, stdlib only:

    python tools/gpu_check/prepare_deps.py unpack [--dest .gpu_check]

unpacks into DEST/site the wheel of each module that this Python cannot import yet (one it can import is left
alone), refusing one built for another Python in one line. tools/gpu_check/device.sh runs `unpack` and then
the check with DEST/site on PYTHONPATH.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# (the module the checks import, the requirement that provides it); the imports of `ddppo train|eval|export`
# beyond torch and the standard library (tensorboard, matplotlib and imageio are imported only where used)
REQUIREMENTS = [
    ("numpy", "numpy>=1.24"),
    ("omegaconf", "omegaconf==2.3.0"),
    ("antlr4", "antlr4-python3-runtime==4.9.3"),
    ("yaml", "PyYAML>=6"),
    ("gymnasium", "gymnasium>=1.1"),
    ("cloudpickle", "cloudpickle>=1.2"),
    ("farama_notifications", "farama-notifications>=0.0.1"),
    ("typing_extensions", "typing_extensions>=4.3"),
    ("psutil", "psutil>=5.9"),
]
SOURCE_ONLY = {"antlr4"}  # no wheel on PyPI: built here (pure Python)
PLATFORMS = ("manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_28_x86_64")


def download(dest: Path, python_version: str) -> dict:
    wheels = dest / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    tag = "cp" + python_version.replace(".", "")
    found: dict[str, str] = {}
    for module, req in REQUIREMENTS:
        before = set(wheels.glob("*.whl"))
        if module in SOURCE_ONLY:
            cmd = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(wheels), req]
        else:
            cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                   "--python-version", python_version, "--implementation", "cp", "--abi", tag, "--abi", "abi3",
                   "--abi", "none", *[a for p in PLATFORMS for a in ("--platform", p)], "--platform", "any",
                   "-d", str(wheels), req]
        subprocess.run(cmd, check=True)
        new = sorted(set(wheels.glob("*.whl")) - before) or _existing(wheels, req)
        found[module] = new[0].name
    manifest = {"python": python_version, "wheels": found}
    (dest / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def _existing(wheels: Path, req: str) -> list[Path]:
    """The wheel already in `wheels` for `req` (a repeated download adds no file)."""
    name = req.split("=")[0].split(">")[0].split("<")[0].lower().replace("-", "_")
    return sorted(p for p in wheels.glob("*.whl") if p.name.lower().split("-")[0] == name)


def wheel_fits(filename: str, version: tuple[int, int]) -> bool:
    """Whether a wheel's Python tag admits this interpreter (py3, cpXY, or abi3 from cpXY on)."""
    parts = filename[:-len(".whl")].split("-")
    py_tags, abi = parts[-3].split("."), parts[-2]
    here = f"cp{version[0]}{version[1]}"
    if any(t in ("py3", f"py{version[0]}{version[1]}", here) for t in py_tags):
        return True
    if abi == "abi3":
        return any(t.startswith("cp3") and int(t[3:]) <= version[1] for t in py_tags)
    return False


def unpack(dest: Path) -> list[str]:
    manifest_path = dest / "manifest.json"
    if not manifest_path.is_file():
        raise SystemExit(f"prepare_deps: {manifest_path} is missing: run `python tools/gpu_check/prepare_deps.py "
                         f"download` where there is network, and bring {dest} along")
    manifest = json.loads(manifest_path.read_text())
    site = dest / "site"
    site.mkdir(parents=True, exist_ok=True)
    unpacked = []
    for module, wheel in manifest["wheels"].items():
        if importlib.util.find_spec(module) is not None or (site / module).exists() or (site / f"{module}.py").exists():
            continue
        if not wheel_fits(wheel, sys.version_info[:2]):
            raise SystemExit(f"prepare_deps: {module} is not installed here and {wheel} is for another Python "
                             f"than this {sys.version_info[0]}.{sys.version_info[1]}: run `download --python-version "
                             f"{sys.version_info[0]}.{sys.version_info[1]}` where there is network")
        with zipfile.ZipFile(dest / "wheels" / wheel) as archive:
            archive.extractall(site)
        unpacked.append(module)
    return unpacked


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("action", choices=("download", "unpack"))
    ap.add_argument("--dest", default=str(REPO / ".gpu_check"), help="the folder (default: .gpu_check)")
    ap.add_argument("--python-version", default="3.12", help="download: the GPU machine's Python (default 3.12)")
    args = ap.parse_args(argv)
    dest = Path(args.dest)
    if args.action == "download":
        manifest = download(dest, args.python_version)
        size = sum(p.stat().st_size for p in (dest / "wheels").glob("*.whl")) / 2 ** 20
        print(f"prepare_deps: {len(manifest['wheels'])} wheels for Python {args.python_version} in "  # noqa: T201
              f"{dest / 'wheels'} ({size:.1f} MiB)")
    else:
        done = unpack(dest)
        unpacked = ", ".join(done) or "nothing (each importable, or unpacked before)"
        print(f"prepare_deps: unpacked {unpacked} into {dest / 'site'}")  # noqa: T201
    return 0


if __name__ == "__main__":
    sys.exit(main())
