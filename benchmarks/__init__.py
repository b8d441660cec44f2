"""The one benchmark home.

`ddppo bench throughput|memory|sb3|rollout` run `throughput.py`, `memory.py`, `sb3.py` and
`rollout_modes.py` (importable: this package is installed with ddppo); `scaling.py`, `env_fps.py` and
`rollout_parity.py` are scripts run from a checkout (`python benchmarks/scaling.py`). Figures go to
`results/` as JSON; benchmarks print figures and never assert.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ddppo.rundir import atomic_write

HOME = Path(__file__).resolve().parent
RESULTS = HOME / "results"  # default output folder of `ddppo bench`
CONFIGS = HOME.parent / "configs"  # the repository's configs (the default benchmark cases)


def report(lines: list[str], results: Any, out: str) -> int:
    """Print the table and write the figures as JSON."""
    print("\n".join(lines))  # noqa: T201 - the benchmark's output
    atomic_write(out, json.dumps(results, indent=2))
    print(f"wrote {out}")  # noqa: T201
    return 0
