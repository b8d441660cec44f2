"""A signal sent to the whole process group, as SLURM (scancel, preemption, time limit), `timeout` and
`kill -TERM -PGID` send it: every process of the job gets it, the env workers, their forkserver and
multiprocessing's resource tracker too. Each case ends with exit 0, the checkpoint of the update the rank
stopped at, no traceback and no error line: in-process and with workers, in fixed and variable rollouts.

Before ddppo.envs.runtime.helper_signals, SIGTERM/SIGINT killed the forkserver (every worker then read as dead,
exit code 255: `environment error: env worker 0 died during 'state_dict'`, no checkpoint) and SIGUSR1 killed the
resource tracker (a KeyError traceback from its replacement).
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from rel_util import REPO, dist_harness

PY = dist_harness.PY
GRIDNAV = ["env.num_envs=4", "rollout.num_steps=16", "ppo.epochs=1", "ppo.num_mini_batch=1", "policy.hidden_size=32",
           "env.gridnav.num_maps=8", "run.torch_threads=1", "checkpoint.interval_updates=100000",
           "log.tensorboard=false", "run.total_env_steps=100000000"]
# (signal, env.num_workers, rollout.mode): variable rollouts need workers
CASES = [(sig, *how) for sig, how in itertools.product(("SIGTERM", "SIGINT", "SIGUSR1"),
                                                        ((0, "fixed"), (2, "fixed"), (2, "variable")))]


def signal_group_mid_run(run_dir: Path, sig: str, workers: int, mode: str) -> tuple[int, str]:
    """Start `ddppo train` as its own process group, wait for 2 updates, signal the group; (exit code, log)."""
    log = run_dir.with_suffix(".log")
    cmd = [PY, "-m", "ddppo", "train", "configs/gridnav.yaml", f"run.dir={run_dir}", f"env.num_workers={workers}",
           f"rollout.mode={mode}", *GRIDNAV]
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=REPO, env=dist_harness.subprocess_env(), stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while len(dist_harness.read_metrics(run_dir)) < 2 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        if proc.poll() is None:
            os.killpg(proc.pid, getattr(signal, sig))
        rc = proc.wait(timeout=90)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return rc, log.read_text(errors="replace")


@pytest.mark.timeout(600)
def test_signal_to_the_whole_group_saves_and_exits_0(tmp_path: Path):
    def one(case):
        sig, workers, mode = case
        return signal_group_mid_run(tmp_path / f"{sig}-{workers}-{mode}", sig, workers, mode)

    with ThreadPoolExecutor(3) as pool:
        results = list(pool.map(one, CASES))
    failures = []
    for (sig, workers, mode), (rc, text) in zip(CASES, results):
        run_dir = tmp_path / f"{sig}-{workers}-{mode}"
        rows = dist_harness.read_metrics(run_dir)
        saved = [p.name for p in dist_harness.checkpoints(run_dir)]
        problems = [f"exit code {rc}"] if rc != 0 else []
        if not rows or saved != [f"ckpt-{rows[-1]['update']}.pt"]:
            problems.append(f"checkpoints {saved} after {len(rows)} updates")
        problems += [f"{w!r} in the log" for w in ("Traceback", "ddppo:", "died", "KeyError") if w in text]
        if "checkpoint saved" not in text:
            problems.append("no 'checkpoint saved'")
        if problems:
            failures.append(f"[{sig} workers={workers} {mode}] {'; '.join(problems)}\n{text[-2500:]}")
    assert not failures, "\n\n".join(failures)
