"""What several benchmarks share: their output (a table printed, the figures as JSON), the options of the ones
that measure given configs, and the environment of the runs they start."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ddppo.distributed.launch import without_launch_vars
from ddppo.files import atomic_write


def report(lines: list[str], results: Any, out: str) -> int:
    """Print the table and write the figures as JSON."""
    print("\n".join(lines))  # noqa: T201 - the benchmark's output
    atomic_write(out, json.dumps(results, indent=2))
    print(f"wrote {out}")  # noqa: T201
    return 0


def parser(name: str, description: str) -> argparse.ArgumentParser:
    """`ddppo bench NAME`'s options, with `--out` (default: results/NAME.json in the working directory)."""
    bench = argparse.ArgumentParser(prog=f"ddppo bench {name}", description=description)
    bench.add_argument("--out", default=f"results/{name}.json", help="JSON output path (default: %(default)s in the "
                                                                     "working directory)")
    return bench


def add_case(bench: argparse.ArgumentParser, help_text: str) -> None:
    """`--case CONFIG [OVERRIDE ...]`, repeatable: the configs a benchmark measures."""
    bench.add_argument("--case", action="append", nargs="+", metavar=("CONFIG", "OVERRIDE"), help=help_text)


def cases(args: argparse.Namespace, default: list[tuple[str, list[str]]]) -> list[tuple[str, list[str]]]:
    """The --case options as (config, overrides), or `default` without any."""
    return [(c[0], c[1:]) for c in args.case] if args.case else default


def child_env() -> dict[str, str]:
    """The environment of a run a benchmark starts: no launcher's or SLURM's variables, one OpenMP thread."""
    env = {k: v for k, v in without_launch_vars().items() if not k.startswith("SLURM_")}
    env["OMP_NUM_THREADS"] = "1"
    return env
