"""Globals a crafted checkpoint names; calling any of them leaves a marker file (which tests assert is absent)."""

from __future__ import annotations

import os
from pathlib import Path


def leave_marker(path: str) -> str:
    Path(path).write_text("ran")
    return path


class Payload:
    """Pickles as a call of `fn(*args)`: unpickling it with plain pickle runs the call."""

    def __init__(self, fn, *args):
        self.fn, self.args = fn, args

    def __reduce__(self):
        return self.fn, self.args


SYSTEM = os.system
