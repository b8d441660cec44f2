"""General file I/O (ddppo/files.py): the atomic write, and the JSON-lines readers that skip a torn line."""

import json

import pytest

from ddppo import files
from ddppo.files import atomic_write, last_jsonl, read_jsonl


@pytest.mark.parametrize("tail", ['{"update": 4, "env', "\x00\x00garbage", '["not", "an", "object"]'])
def test_every_reader_skips_a_torn_or_foreign_line(tmp_path, tail):
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps({"update": u, "env_steps": 10 * u}) + "\n" for u in (1, 2, 3)) + tail)
    assert [r["update"] for r in read_jsonl(path)] == [1, 2, 3]
    assert last_jsonl(path)["update"] == 3
    assert read_jsonl(tmp_path / "missing.jsonl") == [] and last_jsonl(tmp_path / "missing.jsonl") is None


def test_atomic_write_leaves_the_old_file_when_writing_fails(tmp_path, monkeypatch):
    path = tmp_path / "sub" / "x.json"
    atomic_write(path, "old")

    def fail(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(files.os, "replace", fail)
    with pytest.raises(OSError):
        atomic_write(path, "new")
    monkeypatch.undo()
    assert path.read_text() == "old" and sorted(p.name for p in path.parent.iterdir()) == ["x.json"]
