"""A process that claims a run dir as `ddppo train` does (RunDir.claim_writer), for the claim tests
(tests/reliability/test_rundir_claim.py): far lighter than a trainer, so a test can run many.

    python claim_proc.py DIR [STALE_AFTER_S]

Refused: the DirectoryBusy message as `ddppo: ...` on stderr, exit 2. Claimed: prints `claimed`, then answers each
line on stdin: `heartbeat` (a checkpoint's refresh: prints `ok`, or `lost: <message>` and exits 2), `release`
(releases, exits 0). At the end of stdin it holds the claim until it is killed.
"""

from __future__ import annotations

import logging
import sys
import time

from ddppo.rundir import RunDir
from ddppo.errors import DirectoryBusy

logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
try:
    claim = RunDir(sys.argv[1]).claim_writer(float(sys.argv[2]) if len(sys.argv) > 2 else 3600.0)
except DirectoryBusy as err:
    sys.stderr.write(f"ddppo: {err}\n")
    sys.exit(2)
print("claimed", flush=True)
for line in sys.stdin:
    if line.strip() == "heartbeat":
        try:
            claim.heartbeat()
            print("ok", flush=True)
        except DirectoryBusy as err:
            print(f"lost: {err}", flush=True)
            sys.exit(2)
    elif line.strip() == "release":
        claim.release()
        sys.exit(0)
while True:
    time.sleep(60)
