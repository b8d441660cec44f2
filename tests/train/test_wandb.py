"""Weights & Biases logging, offline (no network): the run files hold TensorBoard's tags at its steps, the
resolved config, tags and group; a resume continues the same W&B run; off, wandb is never imported."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from testutil import REPO, cli_env
from wandb_records import records

pytestmark = pytest.mark.multiprocess
ARGS = ["run.total_env_steps=128", "env.num_envs=2", "rollout.num_steps=32", "ppo.num_mini_batch=1",
        "policy.hidden_size=16", "log.tensorboard=false", "checkpoint.interval_updates=1", "run.torch_threads=1"]
WANDB = ["log.wandb.enabled=true", "log.wandb.mode=offline", "log.wandb.group=g1", "log.wandb.tags=[smoke,grid]",
         "log.wandb.project=interop"]


def train(run: Path, *extra: str, prelude: str = "") -> subprocess.CompletedProcess:
    code = (f"import sys\n{prelude}\nfrom ddppo.cli import main\nrc = main(sys.argv[1:])\n"
            f"print('wandb imported:', 'wandb' in sys.modules and sys.modules['wandb'] is not None)\nsys.exit(rc)")
    env = {**cli_env(), "WANDB_MODE": "offline", "WANDB_SILENT": "true"}
    return subprocess.run([sys.executable, "-c", code, "train", str(REPO / "configs" / "gridnav.yaml"),
                           f"run.dir={run}", *ARGS, *extra], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300)


def history(run_file: Path) -> tuple[list, dict]:
    steps, info = [], {}
    for rec in records(run_file):
        kind = rec.WhichOneof("record_type")
        if kind == "history":
            items = {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in rec.history.item}
            steps.append((rec.history.step.num, {k: v for k, v in items.items() if not k.startswith("_")}))
        elif kind == "run":
            info = {"id": rec.run.run_id, "project": rec.run.project, "group": rec.run.run_group,
                    "tags": list(rec.run.tags),
                    "config": {u.key: json.loads(u.value_json) for u in rec.run.config.update}}
    return steps, info


def test_offline_run_files_resume_and_tags(tmp_path):
    pytest.importorskip("wandb", reason="wandb is not installed (it is in the dev extra)")
    run = tmp_path / "run"
    proc = train(run, *WANDB)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "wandb imported: True" in proc.stdout
    run_id = (run / "wandb_run_id").read_text().strip()
    proc = train(run, *WANDB, "run.total_env_steps=256")  # resume: the same W&B run goes on
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (run / "wandb_run_id").read_text().strip() == run_id
    files = sorted((run / "wandb").glob("offline-run-*"))
    assert len(files) == 2 and all(f.name.endswith(f"-{run_id}") for f in files)
    first, info = history(files[0] / f"run-{run_id}.wandb")
    second, info2 = history(files[1] / f"run-{run_id}.wandb")
    assert info["group"] == "g1" and info["tags"] == ["smoke", "grid"] and info["project"] == "interop"
    assert info["config"]["policy"]["hidden_size"] == 16 and info["config"]["log"]["wandb"]["mode"] == "offline"
    assert info2["id"] == info["id"] == run_id
    # the same steps and tags as TensorBoard (metrics.jsonl holds the same scalars)
    logged = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    expected = [(r["env_steps"], {k: v for k, v in r.items() if "/" in k and v is not None and math.isfinite(v)})
                for r in logged]
    got = first + second
    assert [s for s, _ in got] == [s for s, _ in expected] == [64, 128, 192, 256]
    for (_, mine), (_, want) in zip(got, expected):
        assert set(mine) == set(want)
        assert all(mine[k] == pytest.approx(want[k], rel=1e-6, abs=1e-9) for k in want)


def test_off_imports_nothing_and_missing_wandb_is_one_line(tmp_path):
    proc = train(tmp_path / "off", "run.total_env_steps=64")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "wandb imported: False" in proc.stdout
    assert not (tmp_path / "off" / "wandb").exists() and not (tmp_path / "off" / "wandb_run_id").exists()
    proc = train(tmp_path / "missing", *WANDB, prelude="sys.modules['wandb'] = None  # as if not installed")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1:] == [
        "ddppo: config error: log.wandb.enabled=true needs the wandb package: pip install 'ddppo[wandb]' (or pip "
        "install wandb), or set log.wandb.enabled=false"]
