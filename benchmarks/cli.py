"""`ddppo bench NAME [its options]`: the benchmarks' own subcommand, registered through the `ddppo.commands` entry
point (pyproject.toml), so the library never imports this package.

The table is built from the bench modules themselves: every module of peers/, speed/ and learning/ that says
`NAME = "..."` and `HELP = "..."` (one block, at the top level) is a benchmark, run as its `main(argv)` with the
options after NAME. The table is read from the modules' source (their two constants, not imported): this module is
imported while the CLI parser is built, for every `ddppo` command, and the benchmarks import torch, gymnasium and
their peers.

Every benchmark prints its table and writes its figures as JSON (default `results/NAME.json` in the working
directory; the dated figures the docs cite live in `benchmarks/results/`).
"""

from __future__ import annotations

import argparse
import ast
import logging
import re
from pathlib import Path
from typing import NamedTuple

GROUPS = ("peers", "speed", "learning")  # the subpackages, in the order `ddppo bench --help` lists them


class Bench(NamedTuple):
    name: str  # `ddppo bench NAME`
    help: str  # one line
    group: str  # what it measures: peers, speed or learning
    module: str  # ddppo.benchmarks.GROUP.MODULE, whose main(argv) runs it


def constants(source: str) -> dict[str, str]:
    """A module's top-level `NAME` and `HELP` string constants, written together in one block (no blank line
    between them). Only that block is parsed: the whole modules would take a tenth of a second at every start."""
    start = re.search(r"^NAME = ", source, re.MULTILINE)
    if start is None:
        return {}
    found = {}
    for node in ast.parse(source[start.start():].split("\n\n", 1)[0]).body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id in ("NAME", "HELP")):
            found[node.targets[0].id] = ast.literal_eval(node.value)
    return found


def table(root: Path = Path(__file__).parent) -> dict[str, Bench]:
    """Every benchmark, name -> Bench, group by group; a name given twice is an error naming both modules."""
    benches: dict[str, Bench] = {}
    for group in GROUPS:
        for path in sorted((root / group).glob("*.py")):
            found = constants(path.read_text(encoding="utf-8"))
            if "NAME" not in found:
                continue  # a helper of its group (side_by_side.py, habitat_baselines_config_v02.py ...)
            bench = Bench(found["NAME"], found.get("HELP", ""), group, f"ddppo.benchmarks.{group}.{path.stem}")
            if bench.name in benches:
                raise ValueError(f"`ddppo bench {bench.name}` is named by both {benches[bench.name].module} and "
                                 f"{bench.module}: rename one NAME")
            benches[bench.name] = bench
    return benches


def add_parser(sub) -> None:
    """Register `bench` on the CLI's subparsers."""
    benches = table()
    bench = sub.add_parser("bench", help="benchmarks that print side-by-side figures and write JSON",
                           description="Benchmarks print a table and write their figures as JSON. "
                                       "`ddppo bench NAME --help` lists NAME's options.",
                           epilog="; ".join(f"{b.name} ({b.group}): {b.help}" for b in benches.values()))
    bench.add_argument("what", choices=list(benches), metavar="NAME", help="which benchmark (see below)")
    bench.add_argument("options", nargs=argparse.REMAINDER, help="its options (`ddppo bench NAME --help`)")


def run(args: argparse.Namespace) -> int:
    import importlib

    logging.basicConfig(level=logging.WARNING)
    return importlib.import_module(table()[args.what].module).main(args.options)
