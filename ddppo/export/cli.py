"""The `ddppo export` subcommand. Imported while the CLI parser is built, so it imports nothing heavy."""

from __future__ import annotations

import argparse
import logging
import sys


def add_parser(sub) -> None:
    """Register `export` on the CLI's subparsers."""
    exp = sub.add_parser("export", help="write a run's checkpoint in another trainer's format",
                         description="habitat-baselines: a ckpt.N.pth its PointNavResNetPolicy "
                                     "(policy.architecture=habitat_baselines) or PointNavBaselinePolicy "
                                     "(habitat_baselines_simple) loads with load_state_dict(strict=True): 0.3.x "
                                     "releases unprefixed keys (the policy's), 0.2.x `actor_critic.` keys (its PPO "
                                     "agent's).")
    exp.add_argument("run_dir", metavar="RUN_DIR", help="a run directory written by `ddppo train`")
    exp.add_argument("--format", required=True, choices=["habitat-baselines"], help="target format")
    exp.add_argument("-o", "--out", required=True, metavar="FILE", help="output file, e.g. ckpt.0.pth")
    exp.add_argument("--checkpoint", default="latest", metavar="PATH|latest", help="which checkpoint (default newest)")
    exp.add_argument("--force", action="store_true", help="replace FILE if it exists")
    exp.add_argument("--habitat-version", default="auto", choices=["auto", "0.2", "0.3"],
                     help="the habitat-baselines release to load it: 0.2 (0.2.x, `actor_critic.` keys), 0.3 "
                          "(0.3.x and later), auto (default: the one installed here, else 0.3)")


def run(args: argparse.Namespace) -> int:
    from ddppo.export.habitat_baselines import export_habitat_baselines

    logging.basicConfig(level=logging.WARNING)
    path, layout = export_habitat_baselines(args.run_dir, args.out, args.checkpoint, args.force,
                                            args.habitat_version)
    sys.stdout.write(f"wrote {path} (habitat-baselines format, {layout})\n")
    return 0
