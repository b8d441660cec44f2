"""The per-update watchdog: an update that runs over dist.update_timeout_s ends the process, with every
thread's stack on stderr first.

DistContext bounds every collective, and deadline.py bounds a rank that has decided to leave, but a hang
anywhere else in an update (a GPU stuck in `.item()`, a simulator deadlocked in native code, a driver call
that never returns) would keep the job, and its allocation, forever. deadline.py's bound is a Python thread,
which a native call holding the GIL holds off for as long as it runs; `faulthandler.dump_traceback_later`'s
timer is a C thread that needs no GIL: past the bound it writes "Timeout (H:MM:SS)!" and every Python thread's
stack to stderr, and exits with code 1 (`_exit`, no clean-up: the process is stuck by then). Under
`srun --kill-on-bad-exit` or torchrun the other ranks are then ended too; they name the lost rank.

The training loop arms the watchdog at the start of each update and disarms it at the end; the first update
of a process is given dist.startup_timeout_s where that is longer (first collectives, warm-up).
run_in_process_group disarms it on every way out of training. faulthandler holds one such timer per process:
nothing else in ddppo uses it.
"""

from __future__ import annotations

import faulthandler
import logging

log = logging.getLogger(__name__)

STDERR_FD = 2  # the file descriptor, not sys.stderr: a replaced sys.stderr may have none
_state = {"armed_before": False}


def arm(seconds: float, first_seconds: float = 0.0) -> None:
    """End the process (stacks on stderr, exit 1) unless `disarm`ed within `seconds`; 0 = off.

    The first call of a process waits max(seconds, first_seconds)."""
    if seconds <= 0:
        return
    if not _state["armed_before"]:
        _state["armed_before"] = True
        first = max(seconds, first_seconds)
        log.info("update watchdog: an update running over %g s (dist.update_timeout_s; the first one: %g s) dumps "
                 "every thread's stack to stderr and exits 1", seconds, first)
        seconds = first
    faulthandler.dump_traceback_later(seconds, repeat=False, file=STDERR_FD, exit=True)


def disarm() -> None:
    """Cancel the armed bound (a no-op when none is armed)."""
    faulthandler.cancel_dump_traceback_later()
