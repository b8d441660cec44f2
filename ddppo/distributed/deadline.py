"""The last-resort bound: a rank that has decided to leave is gone within dist.timeout_s + EXIT_MARGIN_S,
whatever a native call does.

Every wait of a collective is bounded by the group's timeout (gloo's own, NCCL's blocking wait), but some native
calls have no bound of their own: NCCL's communicator split when the training group is made (mark_started),
NCCL's abort inside a timed-out `wait()`, `destroy_process_group` in `close()` after an error. A hung one would
keep the rank, and with it the job's allocation, forever. So:

- a rank that decides to exit (a lost peer named by the guard, any error leaving the trainer, or the end of the
  run) arms an exit deadline of dist.timeout_s + EXIT_MARGIN_S;
- each blocking native call of DistContext is armed for its group's timeout + EXIT_MARGIN_S while it runs.

One daemon thread watches the deadlines; past one it writes one line to stderr (directly to file descriptor 2:
the hung thread may hold a logging lock) and ends the process with `os._exit(code)`: 1 for a lost peer or an
error, 2 for a user error (as the CLI), the run's own code after a finished run. Only a rank arms anything:
run_in_process_group enables the deadlines for the run and `disable`s them once the group is closed (nothing
native is left to bound), so a library user's or a test's process is never ended afterwards."""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
import time
from typing import Iterator

# what a rank that has decided to leave is given beyond dist.timeout_s: a blocking wait raises by the group's
# timeout, NCCL's abort and the survivors' check-in (at most 11 s, context.py) follow, then logging and close
EXIT_MARGIN_S = 20.0

_lock = threading.Condition()
_armed: dict[int, tuple[float, int, str]] = {}  # token -> (monotonic deadline, exit code, line)
_tokens = itertools.count()
_state = {"enabled": False, "thread": None, "exit": None}


def enable() -> None:
    """This process is a rank: from now on armed deadlines end it."""
    _state["enabled"] = True


def disable() -> None:
    """The run is over and its group closed: forget every deadline; nothing is armed from now on."""
    with _lock:
        _state["enabled"] = False
        _state["exit"] = None
        _armed.clear()
        _lock.notify_all()


def arm(seconds: float, code: int, line: str) -> int | None:
    """End the process with `code` and `line` unless `disarm`ed within `seconds`; None where not enabled."""
    if not _state["enabled"]:
        return None
    with _lock:
        token = next(_tokens)
        _armed[token] = (time.monotonic() + seconds, code, line)
        if _state["thread"] is None:
            _state["thread"] = threading.Thread(target=_watch, name="ddppo-exit-deadline", daemon=True)
            _state["thread"].start()
        _lock.notify_all()
    return token


def disarm(token: int | None) -> None:
    if token is not None:
        with _lock:
            _armed.pop(token, None)


@contextlib.contextmanager
def bounded(seconds: float, code: int, line: str) -> Iterator[None]:
    """`arm` for the duration of the block (a native call that must return within `seconds`)."""
    token = arm(seconds, code, line)
    try:
        yield
    finally:
        disarm(token)


def arm_exit(rank: int, timeout_s: float, code: int, why: str) -> None:
    """This rank has decided to leave (with `code`, because of `why`): gone within timeout_s + EXIT_MARGIN_S.
    Armed once; a later decision does not move the deadline."""
    if _state["exit"] is not None:
        return
    bound = timeout_s + EXIT_MARGIN_S
    why = why.splitlines()[0][:300] if why else "exiting"
    _state["exit"] = arm(bound, code, f"rank {rank}: still running {bound:g} s (dist.timeout_s + {EXIT_MARGIN_S:g} "
                                      f"s) after deciding to exit ({why}): a native call hangs (NCCL abort, process "
                                      f"group destruction); exiting with code {code}")


def exit_code(err: BaseException) -> int:
    """The code the CLI ends a rank with for `err` (2 for a user error, 130 for Ctrl-C, else 1)."""
    from ddppo.errors import EXIT_USER_ERROR, user_error_label

    if user_error_label(err) is not None:
        return EXIT_USER_ERROR
    if isinstance(err, KeyboardInterrupt):
        return 130
    if isinstance(err, SystemExit):
        return err.code if isinstance(err.code, int) else 1
    return 1


def _watch() -> None:
    with _lock:
        while True:
            now = time.monotonic()
            due = [entry for entry in _armed.values() if entry[0] <= now]
            if due:
                _leave(*min(due)[1:])
            _lock.wait(timeout=min((e[0] for e in _armed.values()), default=now + 3600.0) - now)


def _leave(code: int, line: str) -> None:
    try:
        os.write(2, f"ddppo: {line}\n".encode(errors="replace"))
    finally:
        os._exit(code)
