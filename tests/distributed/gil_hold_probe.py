"""A process stuck in a native call that holds the GIL: `re`'s backtracking on `(a+)+$` against "a" * 40 + "b"
(about 2**40 steps: hours; _sre never releases the GIL). Armed first: a Python-thread deadline (deadline.py,
exit 7) due at 1 s, and, unless MODE is `none`, the per-update watchdog (ddppo.watchdog) due at WATCHDOG_S.

Usage: python gil_hold_probe.py MODE WATCHDOG_S    (MODE: watchdog | none)"""

from __future__ import annotations

import re
import sys
import time


def stuck_in_native_code() -> None:
    re.match(r"(a+)+$", "a" * 40 + "b")


def main() -> None:
    from ddppo.distributed import deadline

    mode, bound = sys.argv[1], float(sys.argv[2])
    deadline.enable()
    deadline.arm(1.0, 7, "the Python-thread deadline fired")
    if mode == "watchdog":
        from ddppo import watchdog

        watchdog.arm(bound)
    time.sleep(0.2)  # the deadline's thread is up and waiting
    sys.stderr.write(f"holding the GIL from {time.time():.3f}\n")
    sys.stderr.flush()
    stuck_in_native_code()


if __name__ == "__main__":
    main()
