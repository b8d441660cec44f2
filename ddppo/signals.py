"""SLURM/torchrun signals -> an agreed stop, a checkpoint, and (for SIGUSR1) a requeue.

`install()` runs first thing in the CLI, before torch is imported, so a signal
that arrives during start-up is not lost. Handlers only record the signal; the
trainer reads `pending()` once per update and all ranks agree (one collective)
to stop at the same update, save once, and exit 0.

  SIGUSR1  time-limit warning / preemption notice (`--signal=USR1@90`): stop,
           save, and rank 0 runs `scontrol requeue $SLURM_JOB_ID`.
  SIGTERM  scancel, `scontrol requeue` from outside, preemption: stop and save;
           SLURM requeues the job itself where it was asked to.
  SIGINT   Ctrl-C: stop and save.
Environment workers, their forkserver and the resource tracker ignore all three, also when the
signal is sent to the whole job (see envs/runtime/helper_signals.py).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess

log = logging.getLogger(__name__)

HANDLED = (signal.SIGUSR1, signal.SIGTERM, signal.SIGINT)
_received: list[int] = []


def _handler(signum, frame) -> None:  # noqa: ARG001 - signal handler signature
    _received.append(signum)


def install() -> None:
    for sig in HANDLED:
        signal.signal(sig, _handler)


def pending() -> int:
    """The most important signal received so far (SIGUSR1 > SIGTERM > SIGINT), or 0."""
    for sig in HANDLED:
        if sig in _received:
            return int(sig)
    return 0


def clear() -> None:
    _received.clear()


def requeue_slurm_job() -> bool:
    """`scontrol requeue $SLURM_JOB_ID`; True when SLURM accepted it."""
    job = os.environ.get("SLURM_ARRAY_JOB_ID") and os.environ.get("SLURM_ARRAY_TASK_ID")
    job_id = (f"{os.environ['SLURM_ARRAY_JOB_ID']}_{os.environ['SLURM_ARRAY_TASK_ID']}" if job
              else os.environ.get("SLURM_JOB_ID"))
    if not job_id:
        log.warning("SIGUSR1 received outside a SLURM job: saved and stopped, nothing to requeue")
        return False
    try:
        res = subprocess.run(["scontrol", "requeue", job_id], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as err:
        log.error("scontrol requeue %s failed: %s", job_id, err)
        return False
    if res.returncode != 0:
        log.error("scontrol requeue %s failed (rc=%d): %s", job_id, res.returncode, res.stderr.strip())
        return False
    log.info("requeued SLURM job %s", job_id)
    return True
