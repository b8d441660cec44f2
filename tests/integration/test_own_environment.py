"""Your own gymnasium environment, from the working directory, through the real `ddppo` console script: the
custom-environment guide's example (docs/examples/corridor.py, copied into an empty folder the commands run
in) trains with env workers, under torchrun with two ranks, in a sweep, evaluates, and reports its info key
`success` as an episode metric. The console script (not `python -m ddppo`, which puts the working directory on
sys.path by itself) is what failed with "No module named 'corridor'" before ddppo.user_code.workdir_first."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from testutil import REPO, cli_env

EXAMPLE = REPO / "docs" / "examples" / "corridor.py"
SMALL = ["env.num_envs=4", "rollout.num_steps=16", "ppo.num_mini_batch=1", "ppo.epochs=2", "policy.hidden_size=32",
         "policy.rnn_type=none", "log.tensorboard=false", "log.interval_s=0.1", "run.torch_threads=1",
         "dist.device=cpu", "env.gym.episode_metrics=[success]"]


def console_script() -> str:
    script = Path(sys.executable).parent / "ddppo"
    if not script.is_file():
        pytest.skip(f"no `ddppo` console script beside {sys.executable} (pip install -e . makes it)")
    return str(script)


def run(args: list[str], cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    env = cli_env()
    env.pop("PYTHONPATH", None)  # the installed package, as a user has it: nothing but the working directory
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    shutil.copy(EXAMPLE, tmp_path / "corridor.py")
    return tmp_path


def metrics(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_train_with_env_workers_then_eval(workdir):
    ddppo = console_script()
    res = run([ddppo, "train", "cartpole", "run.dir=run", "env.name=gym:corridor:Corridor-v0", "env.num_workers=2",
               "run.total_env_steps=192", *SMALL], workdir)
    assert res.returncode == 0, res.stderr[-3000:]
    rows = metrics(workdir / "run")
    assert [r["update"] for r in rows] == [1, 2, 3] and any("train/success" in r for r in rows)
    res = run([ddppo, "eval", "run", "eval.num_episodes=4"], workdir)
    assert res.returncode == 0, res.stderr[-3000:]
    result = json.loads((workdir / "run" / "eval" / "ckpt-3.json").read_text())
    assert result["num_episodes"] == 4 and result["metrics"]["success"]["count"] == 4


def test_two_torchrun_ranks_and_a_sweep_with_box_actions(workdir):
    ddppo = console_script()
    res = run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", ddppo, "train",
               "cartpole", "run.dir=ranks", "env.name=gym:corridor:CorridorContinuous-v0",
               "run.total_env_steps=256", *SMALL], workdir)
    assert res.returncode == 0, res.stderr[-3000:]
    assert [r["update"] for r in metrics(workdir / "ranks")] == [1, 2]
    fixed = "".join(f"  {item.replace('=', ': ', 1)}\n" for item in SMALL + [
        "env.name=gym:corridor:CorridorContinuous-v0", "run.total_env_steps=64"])
    (workdir / "sweep.yaml").write_text(f"name: corridor\nsweep_dir: sweeps/corridor\noverrides:\n{fixed}"
                                        "grid:\n  ppo.lr: [0.001, 0.0003]\n")
    res = run([ddppo, "sweep", "sweep.yaml"], workdir, timeout=400)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    runs = sorted((workdir / "sweeps" / "corridor" / "runs").iterdir())
    assert len(runs) == 2 and all(metrics(r)[-1]["update"] == 1 for r in runs)


def test_a_missing_module_is_one_line_naming_the_working_directory(workdir):
    res = run([console_script(), "train", "cartpole", "run.dir=run", "env.name=gym:nosuchmod:Corridor-v0",
               *SMALL], workdir)
    assert res.returncode == 2, res.stderr[-3000:]
    line = [ln for ln in res.stderr.splitlines() if ln.startswith("ddppo:")]
    assert len(line) == 1 and "'nosuchmod'" in line[0] and str(workdir) in line[0], res.stderr[-2000:]
    assert "Traceback" not in res.stderr
