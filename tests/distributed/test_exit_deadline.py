"""The last-resort bound (ddppo/distributed/deadline.py), with real rank processes (hang_probe.py): a rank whose
native call never returns (destroy_process_group after an error, a collective's wait, the training group's
creation) still ends, with exit code 1 and one line naming what hung, within dist.timeout_s + EXIT_MARGIN_S
(the test waits that long plus start-up slack; without the bound the rank sleeps for an hour)."""

from __future__ import annotations

import subprocess

import pytest
from dist_harness import PY, REPO, free_port, subprocess_env

from ddppo.distributed.deadline import EXIT_MARGIN_S

PROBE = REPO / "tests" / "distributed" / "hang_probe.py"
TIMEOUT_S = 3
SLACK_S = 90  # start-up of two torch processes on a loaded machine, the rendezvous


def run_ranks(mode: str) -> tuple[list[int], list[str]]:
    port = free_port()
    procs = [subprocess.Popen([PY, str(PROBE), mode, str(TIMEOUT_S)], cwd=REPO, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, start_new_session=True,
                              env=subprocess_env(RANK=str(r), WORLD_SIZE="2", LOCAL_RANK=str(r),
                                                 LOCAL_WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                                                 MASTER_PORT=str(port)))
             for r in range(2)]
    logs = []
    try:
        for p in procs:
            try:
                logs.append(p.communicate(timeout=TIMEOUT_S + EXIT_MARGIN_S + SLACK_S)[0])
            except subprocess.TimeoutExpired:
                p.kill()
                logs.append(p.communicate()[0])
                raise AssertionError(f"{mode}: a rank did not exit within the bound\n" + "\n".join(logs)[-4000:])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return [p.returncode for p in procs], logs


@pytest.mark.timeout(300)
@pytest.mark.parametrize("mode, named", [
    ("destroy", "after deciding to exit (RuntimeError: an error other than a lost peer): a native call hangs"),
    ("wait", "a collective did not return within"),
    ("split", "creation of the training group did not return within"),
])
def test_a_rank_stuck_in_a_native_call_exits_with_code_1_within_the_bound(mode, named):
    codes, logs = run_ranks(mode)
    assert codes == [1, 1], "\n".join(logs)[-4000:]
    assert named in logs[1] and "exiting with code 1" in logs[1], logs[1][-3000:]
