"""The package as a user installs it: the wheel and sdist build without a warning, the wheel installs into a fresh
venv (beside torch==2.13.0, as the README installs it) with nothing generic at the top level of site-packages, and
from an empty directory, with no clone in sight, it trains the default config by name, resumes, evaluates and runs
a bench, writing nothing inside the installed package."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from testutil import REPO, TINY, as_overrides

TINY_RUN = as_overrides({**TINY, "checkpoint.interval_updates": 1, "log.tensorboard": "false"})


def run(cmd, cwd, env=None, timeout=900):
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    return proc.returncode, proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """(wheel, sdist, build output) from `python -m build` on the repository."""
    out = tmp_path_factory.mktemp("dist")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # its own distutils warning
    rc, text = run([sys.executable, "-m", "build", "--outdir", out, REPO], cwd=out, env=env)
    assert rc == 0, text
    (wheel,), (sdist,) = sorted(out.glob("*.whl")), sorted(out.glob("*.tar.gz"))
    return wheel, sdist, text


@pytest.fixture(scope="module")
def venv(built, tmp_path_factory):
    """A fresh venv with torch==2.13.0 and the wheel; its site-packages."""
    home = tmp_path_factory.mktemp("venv")
    rc, text = run([sys.executable, "-m", "venv", home], cwd=home)
    assert rc == 0, text
    pip = [home / "bin" / "python", "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    for what in (["torch==2.13.0"], [built[0]]):
        rc, text = run([*pip, *what], cwd=home)
        assert rc == 0, text
    site = next((home / "lib").glob("python3*/site-packages"))
    return home, site


def user_env() -> dict[str, str]:
    """The shell of a user outside the clone: no PYTHONPATH, no launcher variables."""
    from ddppo.distributed.launch import without_launch_vars

    env = {k: v for k, v in without_launch_vars().items() if k != "PYTHONPATH"}
    env["OMP_NUM_THREADS"] = "1"
    return env


def package_files(site: Path) -> set[str]:
    return {str(p.relative_to(site)) for p in (site / "ddppo").rglob("*") if "__pycache__" not in p.parts}


def test_the_build_has_no_warning_and_installs_nothing_generic(built):
    wheel, sdist, text = built
    assert not [line for line in text.splitlines() if "warning" in line.lower()], text
    with zipfile.ZipFile(wheel) as z:
        top = sorted({name.split("/")[0] for name in z.namelist()})
        names = set(z.namelist())
    assert top == ["ddppo", f"{wheel.name.split('-py3')[0]}.dist-info"], top
    for shipped in ("ddppo/configs/gridnav.yaml", "ddppo/configs/habitat_lab/pointnav_gen_task.yaml",
                    "ddppo/slurm/train.sbatch", "ddppo/envs/gridnav/env.py", "ddppo/benchmarks/cli.py",
                    "ddppo/benchmarks/common.py", "ddppo/benchmarks/peers/sb3_cartpole.py",
                    "ddppo/benchmarks/speed/throughput.py", "ddppo/benchmarks/learning/seeds.py"):
        assert shipped in names, shipped
    assert not [name for name in names if "gpu_check" in name], "the GPU check is a repository tool (tools/)"


def test_installed_it_trains_by_name_resumes_evaluates_and_benches(venv, tmp_path):
    home, site = venv
    ddppo = home / "bin" / "ddppo"
    before = package_files(site)
    env = user_env()
    rc, text = run([home / "bin" / "python", "-c", "import envs"], cwd=tmp_path, env=env)
    assert rc != 0 and "No module named 'envs'" in text, text
    rc, text = run([ddppo, "config", "--list"], cwd=tmp_path, env=env)
    assert rc == 0 and "gridnav\t" in text and str(site) in text, text

    rc, text = run([ddppo, "train", "gridnav", "run.dir=run", "run.total_env_steps=256", *TINY_RUN], tmp_path, env)
    assert rc == 0, text
    rc, text = run([ddppo, "train", "gridnav", "run.dir=run", "run.total_env_steps=512", *TINY_RUN], tmp_path, env)
    assert rc == 0 and "resum" in text.lower(), text
    steps = [json.loads(line).get("env_steps", 0) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert max(steps) >= 512, steps

    rc, text = run([ddppo, "eval", "run", "eval.num_episodes=4"], tmp_path, env)
    assert rc == 0, text
    assert list((tmp_path / "run" / "eval").glob("*.json")), text

    rc, text = run([ddppo, "bench", "throughput", "--rounds", "1", "--case", "gridnav", "env.num_envs=2",
                    "rollout.num_steps=4", "policy.hidden_size=8", "ppo.num_mini_batch=1", "ppo.epochs=1"],
                   tmp_path, env)
    assert rc == 0, text
    assert json.loads((tmp_path / "results" / "throughput.json").read_text()), text
    assert package_files(site) == before  # nothing written inside the installed package
