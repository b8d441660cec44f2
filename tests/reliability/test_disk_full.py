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
