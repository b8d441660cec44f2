"""The one benchmark home, installed as `ddppo.benchmarks`; every benchmark runs one way: `ddppo bench WHAT`
(`cli.py` registers the subcommand through the `ddppo.commands` entry point; the library never imports this
package). Benchmarks print figures and never assert; `ddppo bench` writes them as JSON to `results/WHAT.json` in
the working directory unless `--out` says otherwise, and the dated figures the docs cite are in `results/` here.
The GPU check (`gpu_check.py`, with `gpu_ranks.py` and `phase_check.py`) runs through `gpu_check.sh`.
"""

from __future__ import annotations

import json
from typing import Any

from ddppo.files import atomic_write


def report(lines: list[str], results: Any, out: str) -> int:
    """Print the table and write the figures as JSON."""
    print("\n".join(lines))  # noqa: T201 - the benchmark's output
    atomic_write(out, json.dumps(results, indent=2))
    print(f"wrote {out}")  # noqa: T201
    return 0
