"""A lost peer under the real slurm/train.sbatch on the local SLURM (issue 43 item 2): one rank of a two-rank job
is killed (SIGKILL, as the OOM killer does); the other names it and exits 1, srun ends the step, and the script
runs the step again in the allocation, which resumes from its newest checkpoint and finishes. Before, the job
ended FAILED."""

from __future__ import annotations

import re
import time

import psutil

from local_slurm import wait_for
from test_train_sbatch import NUM_ENVS, NUM_STEPS, check_finished_run, read_updates, submit
from ddppo.distributed.port import ephemeral_range


def rank_pid(run_dir, rank: int) -> int | None:
    """The pid of the `ddppo train` process that is task `rank` of the step training `run_dir`."""
    for proc in psutil.process_iter(["cmdline"]):
        try:
            cmd = " ".join(proc.info["cmdline"] or [])
            if f"run.dir={run_dir}" in cmd and " train " in cmd and proc.environ().get("SLURM_PROCID") == str(rank):
                return proc.pid
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return None


def test_a_killed_rank_requeues_the_job_which_resumes_and_finishes(slurm_cluster, tmp_path):
    total = 150 * 2 * NUM_ENVS * NUM_STEPS
    job, run_dir, out = submit(slurm_cluster, tmp_path, total, overrides=("checkpoint.interval_updates=5",))

    def checkpointed() -> bool:
        state = slurm_cluster.job(job)["JobState"]
        assert state in ("PENDING", "CONFIGURING", "RUNNING"), slurm_cluster.describe(job, out)
        return any((run_dir / "checkpoints").glob("ckpt-*.pt")) and rank_pid(run_dir, 1) is not None

    wait_for(checkpointed, 240, f"job {job} to write a checkpoint")
    killed_at = len(read_updates(run_dir))
    psutil.Process(rank_pid(run_dir, 1)).kill()
    t_kill = time.monotonic()
    rows, log = check_finished_run(slurm_cluster, job, run_dir, out, total, restarts=0)
    why = slurm_cluster.describe(job, out)
    assert re.search(r"rc=\d+ \(a lost or hung peer, or a rank that died\): retry 1/2 in this allocation", log), why
    assert len(re.findall(r"srun exited rc=", log)) == 2, why  # two steps: the killed one and the retry
    resumed = [int(n) for n in re.findall(r"resumed from .*update (\d+)", log)]
    assert resumed and 5 <= resumed[0] <= killed_at + 5 and resumed[0] % 5 == 0, why
    port = int(re.search(r"master=[^:]+:(\d+)", log).group(1))
    assert port < ephemeral_range()[0], log  # the rendezvous port lies below the ephemeral range
    sacct = slurm_cluster.sacct(job)
    script = "\n".join(line for line in log.splitlines() if line.startswith("[train.sbatch") or "srun: error" in line)
    print(f"\nkilled rank 1 at update ~{killed_at}; finished {time.monotonic() - t_kill:.1f} s later\n{script}\n{sacct}"
          f"last metrics row: {rows[-1]}")
    states = [line.split()[2] for line in sacct.splitlines()[2:] if line.split() and line.split()[0] == str(job)]
    assert states == ["COMPLETED"], sacct  # one run of the job: the retry was a second step in its allocation


def test_a_user_error_is_never_retried(slurm_cluster, tmp_path):
    """A run that fails on a bad value exits 2 at once: the job FAILED, not retried."""
    job, run_dir, out = submit(slurm_cluster, tmp_path, 1000, overrides=("ppo.num_mini_batch=3",))
    info = slurm_cluster.wait_job(job, timeout=180, log=out)
    why = slurm_cluster.describe(job, out)
    assert info["JobState"] == "FAILED" and info["Restarts"] == "0", why
    assert out.read_text().count("srun exited rc=2") == 1 and "retry" not in out.read_text(), why
