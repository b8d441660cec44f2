"""The run dir's disk fills up while a checkpoint is written (a real tmpfs, a real `ddppo train`):
the previous checkpoint stays valid and loadable, no partial or temp file is left, the error names the
checkpoint and the cause, the run exits non-zero when its final checkpoint could not be written, and a
later resume (with space again) continues from the previous checkpoint and finishes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rel_util import EMPTY_CONFIG, synthetic_overrides, tmpfs

PER_UPDATE = 4 * 8


def _fill(mount: Path, leave_bytes: int) -> Path:
    """A filler file that leaves about `leave_bytes` free on `mount`."""
    st = os.statvfs(mount)
    free = st.f_bavail * st.f_frsize
    filler = mount / "filler.bin"
    with open(filler, "wb") as f:
        f.write(b"\0" * max(0, free - leave_bytes))
    return filler


@pytest.mark.timeout(240)
def test_disk_full_during_checkpoint_keeps_the_previous_one_and_says_so(tmp_path: Path, cli):
    from ddppo import checkpoint as ckpt

    with tmpfs("16m", tmp_path) as mount:
        run = mount / "run"
        # hidden 128: a checkpoint of ~1.5 MB, far more than the free space left below
        args = ["train", str(EMPTY_CONFIG), *synthetic_overrides(run, **{"policy.hidden_size": 128,
                                                                         "checkpoint.interval_updates": 2})]
        res = cli(*args, f"run.total_env_steps={2 * PER_UPDATE}", timeout=150)
        assert res.returncode == 0, res
        good = run / "checkpoints" / "ckpt-2.pt"
        good_bytes = good.read_bytes()
        assert len(good_bytes) > 1_000_000

        # 256 KB left: room for metrics lines and config.yaml, not for a checkpoint (at updates 4 and 6)
        filler = _fill(mount, 256 * 1024)
        res = cli(*args, f"run.total_env_steps={6 * PER_UPDATE}", timeout=150)
        assert res.returncode == 1, res
        assert "Traceback" not in res.stderr, res
        errors = [ln for ln in res.stderr.splitlines() if " ERROR " in ln]
        assert len(errors) == 3, res  # the checkpoint at update 4, at update 6, and the final word
        for update, line in zip((4, 6), errors):
            assert f"could not write checkpoint for update {update}" in line and "No space left on device" in line
            assert "the previous checkpoints are intact" in line, line
        assert "the final checkpoint (update 6) was not written" in errors[2] and "ckpt-2.pt" in errors[2], res
        assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["ckpt-2.pt"]  # no partial/temp files
        assert good.read_bytes() == good_bytes
        assert ckpt.load(good)["counters"]["update"] == 2

        # space again: the next run resumes from ckpt-2 and finishes
        filler.unlink()
        res = cli(*args, f"run.total_env_steps={6 * PER_UPDATE}", timeout=150)
        assert res.returncode == 0, res
        assert "resumed from" in res.stderr and "ckpt-2.pt at update 2" in res.stderr, res
        assert ckpt.load(run / "checkpoints" / "ckpt-6.pt")["counters"]["update"] == 6


@pytest.mark.timeout(240)
def test_disk_full_during_metrics_append_loses_nothing_and_catches_up(tmp_path: Path):
    """The disk fills completely while training appends metrics.jsonl: one ERROR line (no traceback), no torn
    line, nothing written before lost; once there is space again the missing updates are appended (no gap), a
    SIGTERM stops the run with a checkpoint, and a resume continues the file without a repeat."""
    import json
    import signal
    import subprocess
    import sys
    import time

    from rel_util import REPO, dist_harness, run_cli

    with tmpfs("16m", tmp_path) as mount:
        run = mount / "run"
        args = [str(EMPTY_CONFIG), *synthetic_overrides(run, **{"env.synthetic.step_sleep_s": 0.01,
                                                                 "checkpoint.interval_updates": 10_000})]
        err_path = tmp_path / "stderr.txt"
        with open(err_path, "w") as err:
            proc = subprocess.Popen([sys.executable, "-m", "ddppo", "train", *args, "run.total_env_steps=100000000"],
                                    cwd=REPO, env=dist_harness.subprocess_env(), stderr=err)
        metrics = run / "metrics.jsonl"

        def updates() -> list[int]:
            return [json.loads(ln)["update"] for ln in metrics.read_text().splitlines()]  # raises on a torn line

        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and not (metrics.exists() and len(updates()) >= 3):
                time.sleep(0.1)
            before = metrics.read_bytes()
            filler = mount / "filler.bin"
            with open(filler, "wb") as f, pytest.raises(OSError):
                while True:
                    f.write(b"\0" * 65536)
                    f.flush()
            while time.monotonic() < deadline and "cannot append update" not in err_path.read_text():
                time.sleep(0.1)
            time.sleep(0.5)  # a few more updates with a full disk
            full = updates()
            filler.unlink()
            n_full = len(full)
            while time.monotonic() < deadline and len(updates()) < n_full + 5:
                time.sleep(0.1)
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(60) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
        stderr = err_path.read_text()
        assert "Traceback" not in stderr, stderr
        errors = [ln for ln in stderr.splitlines() if "cannot append update" in ln]
        assert len(errors) == 1 and "No space left on device" in errors[0], stderr
        assert "nothing written before is lost" in errors[0] and "is writable again" in stderr, stderr
        final = updates()
        assert metrics.read_bytes().startswith(before)
        assert final == list(range(1, len(final) + 1)), final  # no gap, no repeat

        res = run_cli("train", *args, f"run.total_env_steps={(len(final) + 2) * PER_UPDATE}")
        assert res.returncode == 0, res.stderr[-2000:]
        assert updates() == list(range(1, len(final) + 3))
