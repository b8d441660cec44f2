"""A sweep dir on disk, and the status of each of its runs.

    SWEEP_DIR/
      sweep.json          manifest: spec, command-line overrides, every run (name, variant, seed, overrides)
      runs/NAME/          each run's run dir (config.yaml, metrics.jsonl, checkpoints/, tb/) - the unit of resume
      logs/NAME.log       each run's output (appended across resumes and requeues)
      state/NAME.json     how the run was last launched: local (host, pid, exit code) or slurm (array task id)
      slurm/array-*.tsv   the task list of each SLURM array submission (task i = line i+1)

Status of a run: done (its last metrics line reached run.total_env_steps), running (its process is alive,
or its array task is in the SLURM queue), pending (queued or never launched, no metrics yet), stopped
(exited 0 before the budget: a signal or run.time_budget_s; re-running the sweep resumes it), failed (non-zero
exit, or gone from the queue unfinished), unknown (launched on SLURM, but squeue cannot be asked here).
"""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

import psutil

from ddppo.rundir import RunDir
from ddppo.files import read_json

MANIFEST = "sweep.json"
STATUSES = ("done", "running", "pending", "stopped", "failed", "unknown")


def read_metrics(run_dir: Path) -> list[dict]:
    """metrics.jsonl as a list of records (a torn last line from a crash is skipped)."""
    return [r for r in RunDir(run_dir).metrics() if "env_steps" in r]


def is_finished(run_dir: Path, records: list[dict] | None = None) -> bool:
    """The run reached its budget (RunDir.is_finished); `records`: its metrics, when already read."""
    records = read_metrics(run_dir) if records is None else records
    return RunDir(run_dir).is_finished(records[-1] if records else {})


def state_path(sweep_dir: Path, name: str) -> Path:
    return Path(sweep_dir) / "state" / f"{name}.json"


def log_path(sweep_dir: Path, name: str) -> Path:
    return Path(sweep_dir) / "logs" / f"{name}.log"


def read_manifest(sweep_dir: Path) -> dict | None:
    return read_json(Path(sweep_dir) / MANIFEST)


def local_state(pid: int) -> dict:
    """What identifies a local run's process later (pid reuse is told apart by the start time)."""
    try:
        created = psutil.Process(pid).create_time()
    except psutil.Error:
        created = None
    return {"launcher": "local", "host": socket.gethostname(), "pid": pid, "create_time": created,
            "started": time.time(), "rc": None}


def _local_alive(state: dict) -> bool | None:
    if state.get("host") != socket.gethostname():
        return None  # launched on another machine: cannot tell
    try:
        proc = psutil.Process(int(state["pid"]))
        created = state.get("create_time")
        return created is None or abs(proc.create_time() - created) < 1.0
    except (psutil.Error, KeyError, TypeError, ValueError):
        return False


class SlurmQueue:
    """`squeue` answers, asked once per array job: {"123_4": "RUNNING", ...}; None where squeue can't tell."""

    def __init__(self) -> None:
        self._cache: dict[str, dict[str, str] | None] = {}

    def tasks(self, array_job: str) -> dict[str, str] | None:
        if array_job not in self._cache:
            self._cache[array_job] = self._ask(array_job)
        return self._cache[array_job]

    @staticmethod
    def _ask(array_job: str) -> dict[str, str] | None:
        try:
            res = subprocess.run(["squeue", "-h", "-r", "-j", array_job, "-o", "%i %T"], capture_output=True,
                                 text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            return None
        if res.returncode != 0:
            return {} if "Invalid job id" in res.stderr else None
        return dict(line.split()[:2] for line in res.stdout.splitlines() if len(line.split()) >= 2)

    def state(self, job: str) -> str | None:
        """The task's queue state ("" when it left the queue), or None when unknown."""
        tasks = self.tasks(job.split("_")[0])
        return None if tasks is None else tasks.get(job, "")


def is_active(state: dict | None, queue: SlurmQueue) -> bool:
    """The run's last launch is still alive (a local process, or an array task in the queue)."""
    if not state:
        return False
    if state.get("launcher") == "local":
        return bool(_local_alive(state)) and state.get("rc") is None
    if state.get("launcher") == "slurm":
        return bool(queue.state(str(state.get("job", ""))))
    return False


def run_status(sweep_dir: Path, name: str, run_dir: Path, queue: SlurmQueue,
               records: list[dict] | None = None) -> str:
    """One of STATUSES (see the module docstring)."""
    records = read_metrics(run_dir) if records is None else records
    if is_finished(run_dir, records):
        return "done"
    state = read_json(state_path(sweep_dir, name))
    if not state:
        return "stopped" if records else "pending"
    if state.get("launcher") == "local":
        alive = _local_alive(state)
        if alive and state.get("rc") is None:
            return "running"
        if alive is None and state.get("rc") is None:
            return "unknown"
        return "stopped" if state.get("rc") == 0 else "failed"
    queued = queue.state(str(state.get("job", "")))
    if queued is None:
        return "unknown"
    if queued == "":
        return "failed"
    return "pending" if queued == "PENDING" and not records else "running"
