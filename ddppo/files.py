"""General file I/O that every layer uses, knowing nothing of what the files hold: a whole file written atomically
(`atomic_write`, `write_json`: a temp file beside it + rename, so a reader sees the old file or the new one), JSON
read forgivingly (`read_json`; `read_jsonl` and `last_jsonl` skip the torn last line a crash can leave) and a file's
sha256 (`file_sha256`). Which files a run directory holds, and who may write them: ddppo/rundir/."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any


def file_sha256(path: str | Path) -> str:
    """The file's sha256 (hex), read in 1 MiB blocks: how a run recognises a weights file or a shard it was given."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def atomic_write(path: str | Path, data: str | bytes, fsync: bool = False, exclusive: bool = False) -> Path:
    """Write `data` to `path` so that a reader sees the old file or the new one, never half of one: a temp file
    beside it, then a rename. With `fsync` the data reaches the disk before the rename. If writing fails (disk
    full) the temp file is removed and `path` is untouched. With `exclusive`, FileExistsError if `path` exists,
    also when another process creates it meanwhile (a link, which never replaces, instead of the rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb" if isinstance(data, bytes) else "w") as f:
            f.write(data)
            if fsync:
                f.flush()
                os.fsync(f.fileno())
        if exclusive:
            os.link(tmp, path)
            tmp.unlink()
        else:
            os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def write_json(path: str | Path, data: Any, allow_nan: bool = True) -> Path:
    """`data` as indented JSON, atomically."""
    return atomic_write(path, json.dumps(data, indent=1, allow_nan=allow_nan) + "\n")


def read_json(path: str | Path) -> Any:
    """The JSON in `path`, or None when it is missing or not JSON."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


def read_jsonl(path: str | Path) -> list[dict]:
    """The JSON objects of a JSON-lines file, in order; a line that is not a whole JSON object (the torn last
    line of a crash) is skipped. A missing file reads as no records."""
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    out = []
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            out.append(record)
    return out


def last_jsonl(path: str | Path, tail_bytes: int = 65536) -> dict | None:
    """The last whole JSON object of a JSON-lines file, reading only its end (for files that grow long)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - tail_bytes))
            lines = f.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a torn last line, or the cut first one
        if isinstance(record, dict):
            return record
    return None
