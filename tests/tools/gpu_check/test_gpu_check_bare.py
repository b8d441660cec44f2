"""The GPU check from a bare checkout (issue 43 item 8): the shim that maps ddppo.envs / ddppo.benchmarks /
ddppo.configs / ddppo.slurm to the checkout's folders as the installed package does, and the wheels unpacked only
for what the machine's Python lacks. (`bash tools/gpu_check/device.sh essential|rest --dry-run` with a
Python 3.12 venv holding only torch runs the whole thing; see docs/guides/gpus-and-nccl.md.)"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from gpu_check import prepare_deps, run

from testutil import REPO

SHIM = REPO / "tools" / "gpu_check" / "checkout_shim"


def test_the_shim_maps_what_pyproject_maps():
    text = (REPO / "pyproject.toml").read_text()
    table = text.split("[tool.setuptools.package-dir]", 1)[1].split("\n[", 1)[0]
    mapped = dict(re.findall(r'^"([\w.]+)" = "(\w+)"', table, re.M))
    shim = (SHIM / "sitecustomize.py").read_text()
    assert mapped and eval(re.search(r"^_MAPPED = (\{.*\})", shim, re.M).group(1)) == mapped


BARE = """
import sys
sys.path.append({site!r})  # torch, numpy, omegaconf ... but not the .pth files that map ddppo's folders
sys.path.insert(0, {repo!r})
try:
    import ddppo.envs.registry
except ModuleNotFoundError as err:
    print("bare:", err)
sys.path.insert(0, {shim!r})
import sitecustomize  # what Python's site does at start-up with the shim on PYTHONPATH
import ddppo.envs.registry, ddppo.benchmarks.cli, ddppo.configs, ddppo.slurm
print("shim:", ddppo.envs.registry.__file__, ddppo.benchmarks.cli.__file__)
"""


@pytest.mark.multiprocess
def test_a_bare_checkout_imports_the_mapped_packages_through_the_shim():
    code = BARE.format(site=sysconfig.get_paths()["purelib"], repo=str(REPO), shim=str(SHIM))
    r = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, timeout=120, cwd="/")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "bare: No module named 'ddppo.envs'" in r.stdout, r.stdout
    assert f"shim: {REPO / 'envs' / 'registry.py'} {REPO / 'benchmarks' / 'cli.py'}" in r.stdout


def wheel(folder: Path, name: str, module: str) -> str:
    with zipfile.ZipFile(folder / name, "w") as z:
        z.writestr(f"{module}/__init__.py", "VALUE = 1\n")
    return name


def test_unpack_brings_only_what_this_python_lacks_and_refuses_another_pythons_wheel(tmp_path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    here = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    manifest = {"python": "x", "wheels": {
        "json": wheel(wheels, "json-1.0-py3-none-any.whl", "json"),  # importable here: left alone
        "zz_pure_mod": wheel(wheels, "zz_pure_mod-1.0-py3-none-any.whl", "zz_pure_mod"),
        "zz_native_mod": wheel(wheels, f"zz_native_mod-1.0-{here}-{here}-manylinux_2_17_x86_64.whl", "zz_native_mod"),
        "zz_abi3_mod": wheel(wheels, "zz_abi3_mod-1.0-cp36-abi3-manylinux_2_17_x86_64.whl", "zz_abi3_mod")}}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    assert prepare_deps.unpack(tmp_path) == ["zz_pure_mod", "zz_native_mod", "zz_abi3_mod"]
    assert (tmp_path / "site" / "zz_native_mod" / "__init__.py").is_file() and not (tmp_path / "site" / "json").exists()
    assert prepare_deps.unpack(tmp_path) == []  # a second command finds them unpacked
    manifest["wheels"] = {"zz_other_mod": wheel(wheels, "zz_other_mod-1.0-cp39-cp39-linux_x86_64.whl", "zz_other_mod")}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(SystemExit, match="zz_other_mod is not installed here and .* is for another Python"):
        prepare_deps.unpack(tmp_path)
    with pytest.raises(SystemExit, match="run `python tools/gpu_check/prepare_deps.py download`"):
        prepare_deps.unpack(tmp_path / "nothing")


def test_each_part_fits_one_command_and_the_essential_checks_come_first():
    essential = [c.name for c in run.part_plan("essential")]
    assert essential == ["blocking_wait_timeout", "blocking_wait_torchrun", "nccl_1rank", "overlap_learning",
                         "two_ranks_one_gpu", "resume_gpu", "eval_export"]
    for part in ("essential", "rest", "models"):
        assert sum(c.budget_s for c in run.part_plan(part)) <= run.PART_BUDGET_S <= 300 - 30
    assert (run.part_plan("essential") + run.part_plan("rest") + run.part_plan("models")
            == run.PLAN)
