"""Shared test helpers: a tiny training config, and running the real `python -m ddppo` CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy.testing  # noqa: F401  (numpy < 2.1 runs `lscpu` when this is first imported: before the guard)
import pytest

import testutil
from testutil import REPO, TINY, as_overrides, cli_env  # noqa: F401  (re-exported to the tests)
from testutil import marks_for  # the markers that follow from where a test lives (MARKS)

GRIDNAV_YAML = REPO / "configs" / "gridnav.yaml"

STEPS_PER_UPDATE = TINY["env.num_envs"] * TINY["rollout.num_steps"]


def tiny_overrides(run_dir: str | Path, **extra) -> list[str]:
    """`key=value` overrides for a tiny gridnav run in `run_dir`; `extra` uses `__` for dots
    (`ppo__lr=1e-3`) or pass dotted keys through `**{"ppo.lr": 1e-3}`."""
    values = {"run.dir": str(run_dir), **TINY}
    for key, value in extra.items():
        values[key.replace("__", ".")] = value
    return as_overrides(values)


@dataclass
class CliResult:
    returncode: int
    stdout: str
    stderr: str

    def __str__(self) -> str:  # shown by failing asserts
        return f"rc={self.returncode}\n--- stdout\n{self.stdout[-3000:]}\n--- stderr\n{self.stderr[-3000:]}"


def cli_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "ddppo", *args]


def run_cli(*args: str, cwd: str | Path = REPO, timeout: float = 300) -> CliResult:
    """Run `python -m ddppo ARGS...` as a user would; returns exit code and output."""
    proc = subprocess.run(cli_command(*args), cwd=cwd, env=cli_env(), capture_output=True, text=True,
                          timeout=timeout, check=False)
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


def run_cli_many(arg_lists: list[list[str]], cwd: str | Path = REPO, timeout: float = 300,
                 parallel: int = 3) -> list[CliResult]:
    """Run several CLI invocations, `parallel` at a time (each is mostly interpreter start-up)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(parallel) as pool:
        return list(pool.map(lambda args: run_cli(*args, cwd=cwd, timeout=timeout), arg_lists))


def pytest_collection_modifyitems(config, items):
    tests = Path(__file__).resolve().parent
    for item in items:
        where = Path(item.path).resolve().relative_to(tests).as_posix() + "::" + item.name
        for mark in sorted(marks_for(where, getattr(item, "fixturenames", ()))):
            item.add_marker(getattr(pytest.mark, mark))


@pytest.fixture(autouse=True)
def _fast_tier_starts_no_process(request, monkeypatch):
    """The fast tier stays fast and in one process: a test outside `multiprocess` that starts a process fails,
    saying where to mark it."""
    if request.node.get_closest_marker("multiprocess"):
        return

    def refuse(*args, **kwargs):
        raise AssertionError(f"{request.node.nodeid} starts a process but is not marked multiprocess: add it to "
                             f"MARKS (or its fixture to SPAWNING_FIXTURES) in tests/testutil.py")

    import multiprocessing.process

    monkeypatch.setattr(subprocess.Popen, "__init__", refuse)
    monkeypatch.setattr(multiprocessing.process.BaseProcess, "start", refuse)


# Modules that test helpers stand in with placeholders (tests/interop/hb_real.py, tests/habitat_lab/hl_testutil.py)
# while they import habitat-lab / habitat-baselines where the real ones are missing.
STOOD_IN = ("habitat_sim", "magnum", "corrade", "torchvision")


def stand_ins_left() -> list[str]:
    """The STOOD_IN names whose sys.modules entry is not a real module (placeholders have no __file__)."""
    return [name for name in STOOD_IN if name in sys.modules and getattr(sys.modules[name], "__file__", None) is None]


@pytest.fixture(autouse=True)
def _no_stand_in_outlives_its_import(request):
    """A placeholder left in sys.modules is what every later `import habitat_sim` returns: habitat-sim looks
    installed to the tests of its absence (whose skipifs were read at collection). Fails where one is left."""
    if stand_ins_left():
        pytest.fail(f"placeholder modules {stand_ins_left()} are in sys.modules before {request.node.nodeid}: a test "
                    f"module's import-time helper (collection) or an earlier test left them; remove them after use")
    yield
    if stand_ins_left():
        pytest.fail(f"{request.node.nodeid} left placeholder modules {stand_ins_left()} in sys.modules")


# Helpers are handed out as fixtures (tests/slurm has its own conftest, so `import conftest` is ambiguous).
@pytest.fixture
def cli():
    """`cli("config", "configs/gridnav.yaml", "ppo.lr=1")` -> CliResult (runs the real `python -m ddppo`)."""
    return run_cli


@pytest.fixture
def cli_many():
    """`cli_many([[args...], ...])` -> [CliResult, ...], run concurrently."""
    return run_cli_many


@pytest.fixture
def tiny():
    """`tiny(run_dir, **{"ppo.lr": 1e-3})` -> overrides for a few-second gridnav run."""
    return tiny_overrides


@pytest.fixture
def tiny_config():
    """`tiny_config(**{"ppo.lr": 1e-3})` -> a validated Config of the tiny gridnav run (run.dir unused)."""
    from ddppo.config import load_config

    def make(run_dir: str | Path = "unused-run-dir", **extra):
        return load_config(GRIDNAV_YAML, tiny_overrides(run_dir, **extra))

    return make


@pytest.fixture(scope="session", autouse=True)
def _warm_torch():
    """Pay torch's one-off lazy initialisation once, not inside whichever test happens to run first."""
    import torch

    torch.set_num_threads(1)  # tiny tensors; extra threads only contend with concurrent jobs on 2 cores
    gru = torch.nn.GRU(4, 4)
    gru(torch.zeros(1, 1, 4))[0].sum().backward()
    torch.optim.Adam(gru.parameters()).step()  # the first optimiser step imports a lot
    torch.distributions.Categorical(logits=torch.randn(2, 3)).sample()


# ---------------------------------------------------------------- local SLURM (tests/slurm, tests/sweep)
# One session-wide throwaway cluster shared by every test that asks for `slurm_cluster`. The tests skip with
# the reason when SLURM cannot be had here (not root, no apt, daemons fail to start), unless
# DDPPO_REQUIRE_SLURM=1 (CI), where that is a failure.
sys.path.insert(0, str(Path(__file__).resolve().parent / "slurm"))
import time  # noqa: E402

from local_slurm import ClusterUnavailable, LocalSlurm, install_packages  # noqa: E402


def unavailable(reason: str):
    testutil.unavailable("DDPPO_REQUIRE_SLURM", "no local SLURM", reason)


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory):
    """A running two-node cluster (nodes n1, n2: 2 CPUs each, NodeAddr 127.0.0.1); always torn down."""
    if not sys.platform.startswith("linux"):
        unavailable(f"needs Linux, this is {sys.platform}")
    if os.geteuid() != 0:
        unavailable("the daemons (slurmd runs jobs as their owner) need root")
    t0 = time.monotonic()
    try:
        install_packages()
    except ClusterUnavailable as e:
        unavailable(str(e))
    t_install = time.monotonic() - t0
    cluster = LocalSlurm(tmp_path_factory.mktemp("slurm"))
    try:
        cluster.start()
    except ClusterUnavailable as e:
        cluster.stop()
        unavailable(str(e))
    except BaseException:
        cluster.stop()
        raise
    print(f"\nlocal SLURM up: install {t_install:.1f} s, start {time.monotonic() - t0 - t_install:.1f} s, "
          f"SLURM_CONF={cluster.conf}")
    try:
        yield cluster
    finally:
        t1 = time.monotonic()
        cluster.stop()
        print(f"\nlocal SLURM down in {time.monotonic() - t1:.1f} s")
