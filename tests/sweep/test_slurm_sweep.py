"""`ddppo sweep --launcher slurm` on the real local SLURM of tests/slurm: one job array through
slurm/sweep_array.sbatch -> slurm/train.sbatch, with one task preempted (SIGUSR1 -> requeue -> resume)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from ddppo.sweep.launch import sweep
from ddppo.sweep.summary import summarize
from local_slurm import wait_for
from sweep_helpers import REPO, read_updates

pytestmark = pytest.mark.slow

RANKS = 1  # tasks per array task (2-task jobs are covered by tests/slurm; here the array is the point)
STEPS_PER_UPDATE = RANKS * 4 * 32
UPDATES = 60  # long enough for a signal to land mid-run (an update takes ~0.1-0.3 s here)
PYTHON = os.environ.get("DDPPO_TEST_PYTHON", sys.executable)


def array_tasks(cluster, job: str) -> dict[str, dict[str, str]]:
    """`scontrol show job ARRAY` -> {task id: record} for every task of the array."""
    out = cluster.run("scontrol", "show", "job", "--oneliner", job, check=False)
    records = [dict(re.findall(r"(\w+)=(\S*)", line)) for line in out.splitlines() if line.strip()]
    return {r["ArrayTaskId"]: r for r in records if "ArrayTaskId" in r}


def test_slurm_array_sweep_with_requeue(slurm_cluster, spec_file, tmp_path, monkeypatch):
    sweep_dir = tmp_path / "sweep"
    spec = spec_file(seeds=2, ranks=RANKS, max_parallel=2,
                     slurm=["--gres=none", "--cpus-per-task=1", "--time=00:10:00"],
                     overrides={"run.total_env_steps": UPDATES * STEPS_PER_UPDATE,
                                "checkpoint.interval_updates": 100000})
    env = {**slurm_cluster.env, "PYTHONPATH": str(REPO), "DDPPO_PYTHON": PYTHON}
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        env.pop(var, None)
    res = subprocess.run([sys.executable, "-m", "ddppo", "sweep", str(spec), "--launcher", "slurm",
                          "--sweep-dir", str(sweep_dir)], env=env, cwd=tmp_path, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    job = re.search(r"submitted job array (\d+) with 2 task", res.stdout).group(1)
    runs = {0: sweep_dir / "runs" / "base,seed=0", 1: sweep_dir / "runs" / "base,seed=1"}
    logs = {i: sweep_dir / "logs" / f"{run.name}.log" for i, run in runs.items()}

    def why() -> str:
        return "\n".join(f"--- {p}\n{p.read_text()[-3000:] if p.exists() else '(none)'}" for p in logs.values()) + \
            "\n" + slurm_cluster.describe(int(job))

    # task 0: SIGUSR1 mid-run -> checkpoint -> scontrol requeue of that task -> resume in the same run dir
    def training() -> bool:
        log = logs[0].read_text() if logs[0].exists() else ""
        assert "srun exited" not in log, f"task 0 ended early\n{why()}"
        return len(read_updates(runs[0])) >= 2

    try:
        wait_for(training, 180, "task 0 to log 2 updates")
    except TimeoutError as e:
        raise AssertionError(f"{e}\n{why()}") from None
    slurm_cluster.run("scancel", "--signal=USR1", f"{job}_0")
    try:
        wait_for(lambda: not slurm_cluster.run("squeue", "-h", "-r", "-j", job, check=False).strip(), 300,
                 f"array {job} to leave the queue", interval=1.0)
    except TimeoutError as e:
        raise AssertionError(f"{e}\n{why()}") from None

    tasks = array_tasks(slurm_cluster, job)
    assert [tasks[t]["JobState"] for t in ("0", "1")] == ["COMPLETED", "COMPLETED"], why()
    assert (tasks["0"]["Restarts"], tasks["1"]["Restarts"]) == ("1", "0"), why()
    assert tasks["0"]["NumTasks"] == str(RANKS), why()
    for i, run_dir in runs.items():
        updates = [u["update"] for u in read_updates(run_dir)]
        assert updates == list(range(1, UPDATES + 1)), f"run {i}: {updates}\n{why()}"
        assert (run_dir / "checkpoints" / f"ckpt-{UPDATES}.pt").exists(), why()
    log0 = logs[0].read_text()
    assert "restart=1" in log0 and "resumed from" in log0, why()
    assert f"array task {job}_1" in logs[1].read_text(), why()

    # the summary sees both runs done; re-running the sweep submits nothing
    monkeypatch.setenv("SLURM_CONF", slurm_cluster.env["SLURM_CONF"])
    text, _ = summarize(sweep_dir, plots=False)
    assert "| base | 2 | 2 done |" in text, text
    out: list[str] = []
    assert sweep(spec, (), launcher="slurm", sweep_dir=sweep_dir, out=out.append) == 0
    assert "".join(out).count("skip (done)") == 2 and "nothing to launch" in "".join(out), out
