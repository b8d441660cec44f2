"""The W&B sink's run id lives in the run directory like its other files (ddppo/rundir/ names it and writes it
atomically): kept for a resume, never left half-written, and an empty one starts a new W&B run instead of asking
W&B for the run "". A stand-in `wandb` module records what the sink asks of it (no wandb, no process)."""

from __future__ import annotations

import errno
import os
import sys
import types

import pytest

from ddppo.rundir import RunDir
from ddppo.train.wandb_sink import WandbSink


@pytest.fixture
def wandb_inits(monkeypatch) -> list[dict]:
    """The keyword arguments of every wandb.init call the sink makes."""
    calls: list[dict] = []
    stub = types.ModuleType("wandb")
    stub.init = lambda **kw: calls.append(kw) or types.SimpleNamespace(log=lambda *a, **k: None,
                                                                          finish=lambda: None)
    monkeypatch.setitem(sys.modules, "wandb", stub)
    return calls


def test_a_new_run_keeps_its_id_and_a_resume_continues_it(tmp_path, tiny_config, wandb_inits):
    cfg = tiny_config(tmp_path / "run")
    WandbSink(cfg).close()
    run_id = RunDir(tmp_path / "run").wandb_run_id()
    assert run_id and wandb_inits[0]["id"] == run_id and wandb_inits[0]["dir"] == str(tmp_path / "run")
    WandbSink(cfg).close()
    assert wandb_inits[1]["id"] == run_id and RunDir(tmp_path / "run").wandb_run_id() == run_id


def test_the_run_id_is_written_whole_or_not_at_all(tmp_path, tiny_config, wandb_inits, monkeypatch):
    """The write goes through atomic_write: a failed rename (a full disk) leaves no wandb_run_id and no temp
    file, so the next start makes a new id rather than reading a torn one."""
    def full_disk(src, dst):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "replace", full_disk)
    with pytest.raises(OSError, match="No space left"):
        WandbSink(tiny_config(tmp_path / "run"))
    assert list((tmp_path / "run").iterdir()) == [] and wandb_inits == []


def test_an_empty_run_id_file_starts_a_new_wandb_run(tmp_path, tiny_config, wandb_inits):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "wandb_run_id").write_text("\n")
    WandbSink(tiny_config(tmp_path / "run")).close()
    assert wandb_inits[0]["id"] and wandb_inits[0]["id"] == RunDir(tmp_path / "run").wandb_run_id()
