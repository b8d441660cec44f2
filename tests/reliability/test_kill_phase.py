"""kill -9 of one rank in a known phase (tests/distributed/test_faults.py kills at an arbitrary moment):
mid-rollout (the survivor then fails in the end-of-rollout sync) and mid-update (in the gradient
all-reduce). Either way the survivor exits non-zero within dist.timeout_s, naming the lost rank and
the collective that failed.

Each run is made to spend nearly all its time in the phase under test, and the kill lands ~0.4 s after
an update's metrics row appears (when both ranks have just left the lockstep stats collective and
started the next update), well inside that phase's 2-3 s.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from rel_util import dist_harness, synthetic_overrides

TIMEOUT_S = 20
PHASES = {
    # rollout: 32 steps x 0.08 s of env sleep; update: 1 epoch x 1 minibatch of a small policy
    "mid-rollout": ({"rollout.num_steps": 32, "env.synthetic.step_sleep_s": 0.08, "ppo.epochs": 1,
                     "ppo.num_mini_batch": 1}, "end-of-rollout sync failed"),
    # rollout: 4 fast steps; update: 40 epochs x 4 minibatches of a 256-wide GRU policy
    "mid-update": ({"rollout.num_steps": 4, "ppo.epochs": 40, "ppo.num_mini_batch": 4,
                    "policy.hidden_size": 256}, "gradient all-reduce failed"),
}


@pytest.mark.timeout(300)
@pytest.mark.parametrize("phase", list(PHASES))
def test_kill_9_of_one_rank_in_a_known_phase(tmp_path: Path, phase: str):
    extra, failed_in = PHASES[phase]
    overrides = synthetic_overrides(tmp_path / "run", **extra, **{
        "run.total_env_steps": 10**8, "dist.timeout_s": TIMEOUT_S, "checkpoint.interval_updates": 1000})
    overrides = [o for o in overrides if not o.startswith("run.dir=")]
    with dist_harness.start_ranks(2, tmp_path / "run", overrides, tmp_path) as job:
        rows = job.wait_for_updates(2, timeout_s=150)  # past update 1: the training timeout applies
        seen = len(rows)
        deadline = time.monotonic() + 60
        while len(job.metrics()) == seen and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.4)
        job.procs[1].send_signal(signal.SIGKILL)
        killed = time.monotonic()
        try:
            # detection + the survivors' check-in probe; 6 x dist.timeout_s only catches a hang
            code = job.procs[0].wait(timeout=6 * TIMEOUT_S)
        except Exception:
            code = None
        took = time.monotonic() - killed
        log = job.log_text()
    assert code is not None, f"the survivor still runs {took:.0f} s after the kill (a hang)\n{log}"
    assert code != 0, log
    assert "peer rank(s) [1] lost" in log, log
    assert failed_in in log, f"expected the survivor to fail in: {failed_in!r}\n{log}"
