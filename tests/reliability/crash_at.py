"""`python crash_at.py POINT ARGS...`: the real `ddppo ARGS` CLI in this process, which SIGKILLs itself at one point
of a run-directory write (the first time the process reaches it). Only the standard library's file calls are
intercepted (os.replace, os.write), so the points hold whichever module does the writing:

  checkpoint-half-written   a checkpoint's temp file is half written (cut to half its size), then the kill
  checkpoint-before-rename  the temp file is whole, the kill comes before the rename to ckpt-<U>.pt
  checkpoint-after-rename   ckpt-<U>.pt is in place; the kill comes before pruning and anything after
  metrics-torn-line         half of a metrics.jsonl row is appended, then the kill
  config-first-write        config.yaml's temp file is written, the kill comes before its rename
  config-kept-before-new    a changed config: the previous one is kept as config.<time>.yaml, the kill comes
                            before the new config.yaml replaces the old one
"""

from __future__ import annotations

import os
import re
import signal
import sys
from pathlib import Path

POINTS = ("checkpoint-half-written", "checkpoint-before-rename", "checkpoint-after-rename", "metrics-torn-line",
          "config-first-write", "config-kept-before-new")
CHECKPOINT = re.compile(r"^ckpt-\d+\.pt$")
_replace, _write = os.replace, os.write


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _make(point: str):
    def replace(src, dst, *args, **kwargs):
        name, folder = Path(dst).name, Path(dst).parent
        if CHECKPOINT.match(name) and point.startswith("checkpoint-"):
            if point == "checkpoint-half-written":
                os.truncate(src, os.path.getsize(src) // 2)
            if point == "checkpoint-after-rename":
                _replace(src, dst, *args, **kwargs)
            _die()
        if name == "config.yaml" and (point == "config-first-write" or (
                point == "config-kept-before-new" and any(folder.glob("config.2*.yaml")))):
            _die()
        return _replace(src, dst, *args, **kwargs)

    def write(fd, data):
        if point == "metrics-torn-line" and bytes(data[:10]) == b'{"update":':
            _write(fd, bytes(data[:len(data) // 2]))
            _die()
        return _write(fd, data)

    return replace, write


if __name__ == "__main__":
    if sys.argv[1] not in POINTS:
        raise SystemExit(f"unknown point {sys.argv[1]!r}: one of {', '.join(POINTS)}")
    os.replace, os.write = _make(sys.argv[1])
    from ddppo.cli import main

    sys.exit(main(sys.argv[2:]))
