"""`python -m ddppo.distributed.port JOB_ID`, as slurm/train.sbatch runs it: a port in use is skipped."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from ddppo.distributed import port


def test_the_command_skips_a_port_something_listens_on():
    """The real command train.sbatch runs, against a real listening socket on the job's port."""
    low, _ = port.ephemeral_range()
    for job_id in range(1, 200):  # a job whose port is free now, then hold it
        with socket.socket() as holder:
            job_port = port.job_port(job_id)
            try:
                holder.bind(("", job_port))
            except OSError:
                continue
            holder.listen()
            run = subprocess.run([sys.executable, "-m", "ddppo.distributed.port", str(job_id)], capture_output=True,
                                 text=True, timeout=120)
            assert run.returncode == 0, run.stderr
            chosen = int(run.stdout)
            assert chosen != job_port and port.PORT_BASE <= chosen < low and not port.listening(chosen)
            return
    pytest.fail("no job port free to hold")


def test_the_command_refuses_a_bad_argument():
    run = subprocess.run([sys.executable, "-m", "ddppo.distributed.port", "x"], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 2 and "usage" in run.stderr
