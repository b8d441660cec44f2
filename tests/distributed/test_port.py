"""The rendezvous port of a SLURM job lies below Linux's ephemeral range, and a port in use is skipped
(issue 43 item 7: `20000 + jobid % 20000` fell inside 32768-60999 for about 36% of job ids)."""

from __future__ import annotations

import pytest

from ddppo.distributed import port
from ddppo.distributed.launch import read_launch

DEFAULT = (32768, 60999)


def slurm_env(job_id: int) -> dict[str, str]:
    return {"SLURM_PROCID": "0", "SLURM_STEP_NUM_TASKS": "2", "SLURM_JOB_ID": str(job_id),
            "SLURM_JOB_NODELIST": "node1"}


@pytest.mark.parametrize("job_id", [0, 1, 12767, 12768, 15000, 20000, 39999, 123456789])
def test_a_jobs_default_port_is_below_the_ephemeral_range(job_id):
    launched = read_launch(slurm_env(job_id))
    low, _ = port.ephemeral_range()
    assert port.PORT_BASE <= launched.master_port < low
    assert launched.master_port == port.job_port(job_id)  # one rule, in launch.py and train.sbatch alike


def test_no_job_id_maps_into_the_range_and_the_window_is_used_evenly():
    ports = [port.job_port(j, DEFAULT) for j in range(100000)]
    assert min(ports) == 20000 and max(ports) == 32767


def test_the_range_is_read_from_the_kernel_and_a_low_range_moves_the_window_above_it(tmp_path):
    f = tmp_path / "range"
    f.write_text("1024\t50000\n")
    assert port.ephemeral_range(f) == (1024, 50000)
    assert all(50000 < port.job_port(j, (1024, 50000)) <= 65535 for j in range(0, 40000, 7))
    assert all(not 1024 <= port.job_port(j, (1024, 64000)) <= 64000 for j in range(0, 40000, 7))
    f.write_text("garbage")
    assert port.ephemeral_range(f) == DEFAULT
    assert port.ephemeral_range(tmp_path / "missing") == DEFAULT


def test_a_port_in_use_is_skipped_for_the_next_one_of_the_window():
    busy = {20005, 20006}
    assert port.free_job_port(5, DEFAULT, in_use=busy.__contains__) == 20007
    assert port.free_job_port(12767, DEFAULT, in_use={32767}.__contains__) == 20000  # wraps within the window
    assert port.free_job_port(5, DEFAULT, retries=2, in_use=busy.__contains__) == 20005  # gave up: its own port
