"""The `ddppo export` subcommand. Imported while the CLI parser is built, so it imports nothing heavy."""

from __future__ import annotations

import argparse
import logging
import sys


def add_parser(sub) -> None:
    """Register `export` on the CLI's subparsers."""
    exp = sub.add_parser("export", help="write a run's checkpoint in another trainer's format",
                         description="habitat-baselines: a ckpt.N.pth its PointNavResNetPolicy loads with "
                                     "load_state_dict(strict=True) (runs trained with "
                                     "policy.architecture=habitat_baselines).")
    exp.add_argument("run_dir", metavar="RUN_DIR", help="a run directory written by `ddppo train`")
    exp.add_argument("--format", required=True, choices=["habitat-baselines"], help="target format")
    exp.add_argument("-o", "--out", required=True, metavar="FILE", help="output file, e.g. ckpt.0.pth")
    exp.add_argument("--checkpoint", default="latest", metavar="PATH|latest", help="which checkpoint (default newest)")
    exp.add_argument("--force", action="store_true", help="replace FILE if it exists")


def run(args: argparse.Namespace) -> int:
    from ddppo.interop.export import export_habitat_baselines

    logging.basicConfig(level=logging.WARNING)
    path = export_habitat_baselines(args.run_dir, args.out, args.checkpoint, args.force)
    sys.stdout.write(f"wrote {path} (habitat-baselines format)\n")
    return 0
