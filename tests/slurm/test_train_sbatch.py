"""The real slurm/train.sbatch on a real (local, throwaway) SLURM: training, preemption -> requeue -> resume.

Every job runs the gridnav trainer on CPU with a tiny budget. Waits poll `scontrol show job` and are bounded.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path

import pytest

from local_slurm import wait_for

REPO = Path(__file__).resolve().parents[2]
SBATCH = REPO / "slurm" / "train.sbatch"
CONFIG = "configs/gridnav.yaml"
NUM_ENVS, NUM_STEPS = 4, 16
# a small, fast model: an update takes tens of ms, so a run's length is set by the env-step budget alone.
# No periodic checkpoints: the only ones are those written on a signal and at the end.
TINY = (f"env.num_envs={NUM_ENVS}", f"rollout.num_steps={NUM_STEPS}", "ppo.epochs=1", "ppo.num_mini_batch=1",
        "policy.hidden_size=32", "env.gridnav.num_maps=8", "run.torch_threads=1", "checkpoint.interval_updates=100000",
        "dist.device=cpu")
# python for the job steps; DDPPO_PYTHON may carry extra words (the sbatch script splits it)
PYTHON = os.environ.get("DDPPO_TEST_PYTHON", sys.executable)

pytestmark = pytest.mark.slow


def submit(cluster, tmp_path: Path, total_env_steps: int, nodes: int = 1, tasks_per_node: int = 2,
           options: tuple[str, ...] = (), overrides: tuple[str, ...] = ()):
    """Submit train.sbatch on CPU (extra sbatch `options` and `overrides` last); return (job id, run dir,
    job output file)."""
    run_dir, out = tmp_path / "run", tmp_path / "job.out"
    options = (f"--nodes={nodes}", f"--ntasks-per-node={tasks_per_node}", "--cpus-per-task=1", "--gres=none",
               "--time=00:10:00", f"--output={out}", f"--job-name=ddppo-{tmp_path.name[:20]}", *options)
    overrides = (f"run.dir={run_dir}", f"run.total_env_steps={total_env_steps}", *TINY, *overrides)
    job = cluster.sbatch(SBATCH, CONFIG, *overrides, options=options, cwd=REPO,
                         env={"DDPPO_PYTHON": PYTHON})
    return job, run_dir, out


def read_updates(run_dir: Path) -> list[dict]:
    path = run_dir / "metrics.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def check_finished_run(cluster, job: int, run_dir: Path, out: Path, total_env_steps: int, restarts: int):
    """The job COMPLETED after `restarts` requeues; metrics count updates 1..N exactly once; last checkpoint."""
    info = cluster.wait_job(job, timeout=300, log=out)
    why = cluster.describe(job, out)
    assert info["JobState"] == "COMPLETED", why
    assert info["Restarts"] == str(restarts), why
    rows = read_updates(run_dir)
    updates = [r["update"] for r in rows]
    assert updates == list(range(1, len(updates) + 1)), f"updates not exactly 1..N: {updates}\n{why}"
    steps = [r["env_steps"] for r in rows]
    assert all(b > a for a, b in zip(steps, steps[1:])), f"env_steps not increasing: {steps}"
    assert steps[-1] >= total_env_steps, f"stopped at {steps[-1]} env steps < budget {total_env_steps}\n{why}"
    last = run_dir / "checkpoints" / f"ckpt-{updates[-1]}.pt"
    assert last.exists(), f"no final checkpoint {last}: {sorted(p.name for p in last.parent.glob('*'))}\n{why}"
    assert tensorboard_steps(run_dir / "tb", "loss/lr") == steps, "TensorBoard steps differ from metrics.jsonl"
    return rows, out.read_text()


def tensorboard_steps(tb_dir: Path, tag: str) -> list[int]:
    """The steps TensorBoard shows for `tag`, over every event file (one per run of the job), purges applied."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(tb_dir), size_guidance={"scalars": 0})
    acc.Reload()
    return [e.step for e in acc.Scalars(tag)]


def test_train_two_tasks(slurm_cluster, tmp_path):
    """2 ranks on one node train gridnav to the budget and leave metrics and a final checkpoint."""
    total = 4 * NUM_ENVS * NUM_STEPS * 2
    job, run_dir, out = submit(slurm_cluster, tmp_path, total)
    rows, log = check_finished_run(slurm_cluster, job, run_dir, out, total, restarts=0)
    assert (run_dir / "config.yaml").exists()
    assert "master=127.0.0.1:" in log and "on 2 rank(s)" in log, log


PREEMPTIONS = {
    # SIGUSR1 to every task (what --signal=USR1@90 does near the time limit): checkpoint + self-requeue
    "usr1": ["scancel", "--signal=USR1", "{job}"],
    # SIGUSR1 to the batch shell only (--signal=B:USR1@90): train.sbatch forwards it to srun
    "usr1_batch": ["scancel", "--batch", "--signal=USR1", "{job}"],
    # requeue from outside (admin, preemption with GraceTime=0): SIGTERM to the tasks, SLURM requeues
    "requeue": ["scontrol", "requeue", "{job}"],
}


@pytest.mark.parametrize("how", list(PREEMPTIONS))
def test_preempt_requeue_resume(slurm_cluster, tmp_path, how):
    """Mid-run signal -> checkpoint -> requeue -> SLURM_RESTART_COUNT=1 -> resume -> finish, no update lost."""
    total = 120 * NUM_ENVS * NUM_STEPS * 2  # several seconds of training: the signal lands mid-run
    job, run_dir, out = submit(slurm_cluster, tmp_path, total)

    def training() -> bool:
        state = slurm_cluster.job(job)["JobState"]
        assert state in ("PENDING", "CONFIGURING", "RUNNING"), f"job ended early: {state}\n" + \
            slurm_cluster.describe(job, out)
        return len(read_updates(run_dir)) >= 2

    wait_for(training, 180, f"job {job} to log 2 updates")
    slurm_cluster.run(*(a.format(job=job) for a in PREEMPTIONS[how]))
    t_signal = time.monotonic()
    wait_for(lambda: slurm_cluster.job(job)["Restarts"] == "1", 60, f"job {job} to be requeued")
    rows, log = check_finished_run(slurm_cluster, job, run_dir, out, total, restarts=1)
    why = slurm_cluster.describe(job, out)
    assert re.search(r"restart=1\b", log), why  # the batch script saw SLURM_RESTART_COUNT=1
    stopped = {int(n) for n in re.findall(r"stopping at update (\d+)", log)}
    resumed = {int(n) for n in re.findall(r"resumed from .*update (\d+)", log)}
    assert len(stopped) == 1, f"ranks did not stop at one agreed update: {stopped}\n{why}"
    assert resumed == stopped, f"stopped at {stopped}, resumed from {resumed}\n{why}"
    assert 2 <= stopped.pop() < rows[-1]["update"], why
    print(f"{how}: requeued and finished {time.monotonic() - t_signal:.1f} s after the signal")


def test_batch_shell_sigterm_reaches_ranks_alive(slurm_cluster, tmp_path):
    """SIGTERM to the batch shell only (`--signal=B:TERM`, `scancel --batch`): the ranks checkpoint and exit 0.

    Guards the script against passing SIGTERM to srun, which would SIGKILL the ranks before they can save.
    """
    total = 120 * NUM_ENVS * NUM_STEPS * 2
    job, run_dir, out = submit(slurm_cluster, tmp_path, total)
    wait_for(lambda: len(read_updates(run_dir)) >= 2, 180, f"job {job} to log 2 updates")
    slurm_cluster.run("scancel", "--batch", "--signal=TERM", str(job))
    info = slurm_cluster.wait_job(job, timeout=120, log=out)
    why = slurm_cluster.describe(job, out)
    assert info["JobState"] == "COMPLETED" and info["ExitCode"] == "0:0", why
    stopped = {int(n) for n in re.findall(r"stopping at update (\d+)", out.read_text())}
    assert len(stopped) == 1, why
    n = stopped.pop()
    assert [r["update"] for r in read_updates(run_dir)] == list(range(1, n + 1)), why
    assert (run_dir / "checkpoints" / f"ckpt-{n}.pt").exists(), why


def test_two_nodes_one_task_each(slurm_cluster, tmp_path):
    """Two simulated nodes (two slurmd), one rank each, rendezvous on the first node's NodeAddr and train."""
    total = 4 * NUM_ENVS * NUM_STEPS * 2
    job, run_dir, out = submit(slurm_cluster, tmp_path, total, nodes=2, tasks_per_node=1)
    rows, log = check_finished_run(slurm_cluster, job, run_dir, out, total, restarts=0)
    info = slurm_cluster.job(job)
    assert info["NumNodes"] == "2" and info["NodeList"] == "n[1-2]", info
    assert "ntasks=2" in log and "master=127.0.0.1:" in log and "on 2 rank(s)" in log, log


# SLURM signals every process of the job step (env workers, their forkserver, the resource tracker too)
TO_EVERY_PROCESS = {
    "scancel": (["scancel", "{job}"], (), "CANCELLED"),  # SIGTERM, then SIGKILL after KillWait
    "scancel_usr1": (["scancel", "--signal=USR1", "{job}"], (), "COMPLETED"),  # save, requeue, resume, finish
    # SIGTERM at the time limit; --signal=CONT@5 replaces the script's USR1 warning (harmless SIGCONT)
    "time_limit": (None, ("--time=00:01:00", "--signal=CONT@5"), "TIMEOUT"),
}


@pytest.mark.parametrize("how", list(TO_EVERY_PROCESS))
def test_signals_to_every_process_with_env_workers(slurm_cluster, tmp_path, how):
    """With env.num_workers=2 the ranks save the update they stopped at, without a traceback or an env error.

    Before the helpers were sheltered (ddppo.envs.runtime.helper_signals), SIGTERM killed the workers' forkserver
    (`env worker 0 died during 'state_dict'`, no checkpoint) and SIGUSR1 the resource tracker (a KeyError traceback)."""
    command, options, final = TO_EVERY_PROCESS[how]
    total = (40 if how == "scancel_usr1" else 100000) * NUM_ENVS * NUM_STEPS
    job, run_dir, out = submit(slurm_cluster, tmp_path, total, tasks_per_node=1, options=options,
                               overrides=("env.num_workers=2",))
    wait_for(lambda: len(read_updates(run_dir)) >= 2, 180, f"job {job} to log 2 updates")
    if command:
        slurm_cluster.run(*(a.format(job=job) for a in command))
    if final == "COMPLETED":
        check_finished_run(slurm_cluster, job, run_dir, out, total, restarts=1)
    else:
        info = slurm_cluster.wait_job(job, timeout=240, log=out)
        assert info["JobState"] == final, slurm_cluster.describe(job, out)
    log, why = out.read_text(), slurm_cluster.describe(job, out)
    stopped = [int(n) for n in re.findall(r"stopping at update (\d+)", log)]
    assert stopped and f"ckpt-{stopped[0]}.pt" in {p.name for p in (run_dir / "checkpoints").glob("*.pt")}, why
    assert not [w for w in ("Traceback", "KeyError", "environment error", "died") if w in log], why
