"""Every command on the get-started page is run by a test: here, in order, with the real CLI and tiny budgets, in
an empty working directory (as a new user would, configs by name); the install and test-suite lines are the ones
CI runs (.ci/run), checked to be the same text. Also: every key such a run writes is on the metrics page."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from docs_helpers import CI_RUN, DOCS, README, code_blocks, commands
from testutil import TINY, as_overrides, cli_env

PAGE = DOCS / "get-started.md"
METRICS_PAGE = DOCS / "reference" / "metrics.md"
TRAIN_TINY = as_overrides({**TINY, "run.total_env_steps": 256})


def page_commands() -> list[str]:
    return [c for block in code_blocks(PAGE.read_text()) for c in commands(block)]


def run(argv: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=cwd, env=cli_env(), capture_output=True, text=True, timeout=timeout,
                          check=False)


def ddppo_argv(command: str) -> list[str]:
    """`ddppo ARGS` as `python -m ddppo ARGS` of this interpreter, tiny budgets appended to train and eval."""
    args = command.split()[1:]
    if args[0] == "train":
        args += TRAIN_TINY + ([f"run.total_env_steps={512 if 'run.total_env_steps' in command else 256}"])
    elif args[0] == "eval":
        args += ["eval.num_episodes=4"]
    return [sys.executable, "-m", "ddppo", *args]


def torchrun_argv(command: str) -> list[str]:
    args = command.split()[1:]
    return [sys.executable, "-m", "torch.distributed.run", *args, *TRAIN_TINY]


def ci_line() -> str:
    return next(line for line in CI_RUN.read_text().splitlines() if line.startswith("python3 -m venv"))


def test_the_test_command_is_the_one_ci_runs_and_the_readme_shows():
    test_commands = [c for c in page_commands() if c.endswith("pytest tests")]
    assert test_commands == [ci_line()]
    readme = [c for block in code_blocks(README.read_text()) for c in commands(block)]
    assert ci_line() in readme
    install = next(c for c in page_commands() if c.startswith("python3 -m venv") and not c.endswith("tests"))
    assert any(c.startswith(install) for c in readme), "README's install line differs from the get-started page's"


def test_the_pages_say_which_torch_build_the_install_line_brings():
    """`pip install torch==2.13.0` from PyPI is the CUDA build on Linux: both pages say so, and give the CPU index
    (issue 46: they used to say that installing torch first avoided the CUDA build)."""
    cpu_lines = [c for c in page_commands() if CPU_INDEX in c]
    assert len(cpu_lines) == 1 and cpu_lines[0].startswith("python3 -m venv"), cpu_lines
    for text in (PAGE.read_text(), README.read_text()):
        flat = " ".join(text.split())
        assert "CUDA build" in flat and CPU_INDEX in flat and "download.pytorch.org/whl/cu" in flat
        assert "pulls a multi-GB CUDA build" not in flat


def check_tensorboard(command: str, cwd: Path) -> None:
    """`tensorboard --logdir runs/` serves what the runs wrote: read it the way TensorBoard does."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    logdir = cwd / command.split("--logdir", 1)[1].split()[0]
    events = sorted(logdir.glob("*/tb/events.*"))
    assert events, f"no TensorBoard events under {logdir}"
    acc = EventAccumulator(str(events[0].parent))
    acc.Reload()
    assert "train/reward" in acc.Tags()["scalars"] and "perf/fps" in acc.Tags()["scalars"]


def check_habitat(command: str, cwd: Path) -> None:
    """`python -m ddppo.envs.habitat.check`: ok where habitat-sim works, else one line naming how to install it."""
    proc = run([sys.executable, *command.split()[1:]], cwd)
    assert proc.returncode in (0, 2), proc.stderr[-2000:]
    if proc.returncode == 2:
        assert "habitat-sim" in proc.stderr + proc.stdout


CPU_INDEX = "--index-url https://download.pytorch.org/whl/cpu"
NOT_RUN_HERE = {  # command prefix -> why this test does not run it, and what does
    "conda activate": "needs a conda environment with habitat-sim (documented in the habitat-sim guide)",
    "pip install -e .": "the install itself: CI and the fresh-venv wheel test install the package",
}


@pytest.mark.timeout(900)
def test_every_get_started_command_runs(tmp_path):
    cwd = tmp_path / "user"
    cwd.mkdir()
    ran = []
    for command in page_commands():
        if command.startswith("python3 -m venv"):
            # the test-suite line is CI's own line; the install line is its start (CI installs the [dev] extra); the
            # CPU line is the install line with PyTorch's CPU index (not reachable from CI: checked as text)
            command = command.replace(f" {CPU_INDEX}", "")
            assert command == ci_line() or (command.endswith("-e .") and ci_line().startswith(command[:-1])), command
            continue
        if any(command.startswith(prefix) for prefix in NOT_RUN_HERE):
            continue
        if command.startswith("ddppo "):
            proc = run(ddppo_argv(command), cwd)
        elif command.startswith("torchrun "):
            proc = run(torchrun_argv(command), cwd, timeout=600)
        elif command.startswith("tensorboard "):
            check_tensorboard(command, cwd)
            ran.append(command)
            continue
        elif command.startswith("python -m ddppo.envs.habitat.check"):
            check_habitat(command, cwd)
            ran.append(command)
            continue
        else:
            pytest.fail(f"get-started command with no runner in this test: {command!r} (add one)")
        assert proc.returncode == 0, f"{command}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
        ran.append(command)
    assert any(c.startswith("ddppo train gridnav run.total_env_steps") for c in ran), ran  # the resume
    metrics = [json.loads(line) for line in (cwd / "runs" / "gridnav" / "metrics.jsonl").read_text().splitlines()]
    updates = [m["update"] for m in metrics]
    assert updates == list(range(1, len(updates) + 1)) and metrics[-1]["env_steps"] >= 512, updates  # resumed
    assert (cwd / "runs" / "gridnav-2ranks" / "metrics.jsonl").is_file()
    assert sorted((cwd / "runs" / "gridnav" / "eval").glob("ckpt-*.json"))
    check_metrics_page(cwd / "runs" / "gridnav")


def unnamed_metrics(keys: list[str], page: str) -> list[str]:
    """Keys of metrics.jsonl the metrics page does not name: literally in backticks, or as the page writes a
    family (`loss/epoch<k>/...`, `train/scene/<scene>/...`, a phase `perf/X_s` with `(+ _min, _max)`)."""
    named = set(re.findall(r"`([^`]+)`", page))
    missing = []
    for key in keys:
        general = re.sub(r"^train/scene/[^/]+/", "train/scene/<scene>/", re.sub(r"/epoch\d+/", "/epoch<k>/", key))
        base = re.sub(r"_(min|max)$", "", key)
        if general in named or (base != key and base in named and f"{base}` (+ `_min`, `_max`)" in page):
            continue
        missing.append(key)
    return missing


def check_metrics_page(run_dir: Path) -> None:
    keys = sorted({k for line in (run_dir / "metrics.jsonl").read_text().splitlines() for k in json.loads(line)})
    assert len(keys) > 50
    assert unnamed_metrics(keys, METRICS_PAGE.read_text()) == []


def test_the_metrics_check_can_fail():
    page = "`perf/env_step_s` (+ `_min`, `_max`) `loss/epoch<k>/approx_kl` `train/reward` `train/scene/<scene>/spl`"
    keys = ["perf/env_step_s_max", "loss/epoch3/approx_kl", "train/reward", "train/new", "perf/storage_s_min",
            "train/scene/rooms2/spl", "train/scene/rooms2/new"]
    assert unnamed_metrics(keys, page) == ["train/new", "perf/storage_s_min", "train/scene/rooms2/new"]


def test_the_page_has_the_commands_this_test_expects():
    """A new user's path: install, train by name, override, explain, two ranks, eval, TensorBoard, resume."""
    cmds = page_commands()
    for needed in ("ddppo train gridnav", "ddppo eval runs/gridnav", "tensorboard --logdir runs/",
                   "torchrun --standalone --nproc_per_node=2 -m ddppo train gridnav"):
        assert any(c.startswith(needed) for c in cmds), needed
