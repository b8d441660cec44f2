"""The one benchmark home.

`ddppo bench throughput|memory|sb3|rollout|preempt|habitat-baselines` run `throughput.py`, `memory.py`, `sb3.py`,
`rollout_modes.py`, `preempt_store.py` and `habitat_baselines.py` (importable: this package is installed with ddppo
as `ddppo.benchmarks`); `scaling.py`, `env_fps.py`, `rollout_parity.py`, `ver_parity.py`, `learner_ab.py` and
`gpu_ranks.py` are scripts run from a checkout (`python benchmarks/scaling.py`), `gpu_check.sh` the GPU check. Figures go to
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
