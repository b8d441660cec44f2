"""The `ddppo record` and `ddppo imitate` subcommands. Imported while the CLI parser is built: nothing heavy here."""

from __future__ import annotations

import argparse
import sys
from typing import Callable


def add_parsers(sub) -> None:
    """Register `record` and `imitate` on the CLI's subparsers."""
    rec = sub.add_parser("record", help="record demonstrations of the env's expert or a trained policy (every rank "
                                        "its share under torchrun / srun)",
                         description="Writes whole episodes as shards plus a manifest (docs/guides/imitation.md). "
                                     "A killed recording leaves complete shards; --resume continues it.")
    rec.add_argument("config", nargs="?", help="YAML config file, or a shipped training config's name, e.g. gridnav")
    rec.add_argument("overrides", nargs="*", help="dotted key=value overrides, e.g. env.num_envs=16")
    rec.add_argument("--episodes", type=int, required=True, metavar="N", help="episodes to record, over all ranks")
    rec.add_argument("--out", required=True, metavar="DIR", help="the dataset directory")
    rec.add_argument("--policy", default="", metavar="RUN_DIR|CHECKPOINT",
                     help="record this policy's greedy actions (distillation) instead of the env's expert")
    rec.add_argument("--resume", action="store_true", help="continue the recording in DIR up to N episodes")
    rec.add_argument("--shard-episodes", type=int, default=64, metavar="K", help="episodes per shard file")
    imi = sub.add_parser("imitate", help="behaviour-clone the policy on a recorded dataset (imitation.data=DIR; "
                                         "runs unchanged under torchrun and srun)",
                         description="Trains the policy `ddppo train` would build to maximise the log-probability "
                                     "of the expert's actions; its checkpoints are ordinary ddppo checkpoints "
                                     "(ddppo eval, checkpoint.path, ppo.kl_ref.checkpoint).")
    imi.add_argument("config", nargs="?", help="YAML config file, or a shipped training config's name, e.g. gridnav")
    imi.add_argument("overrides", nargs="*", help="dotted key=value overrides, e.g. imitation.data=demos/gridnav")


def _config(args: argparse.Namespace, setup_logging: Callable[[str, int], None]):
    from ddppo.config import load_config
    from ddppo.distributed import read_launch
    from ddppo.errors import ConfigError

    if args.config is None:
        raise ConfigError(f"ddppo {args.command} needs a config: a shipped training config's name or a YAML file, "
                          f"e.g. `ddppo {args.command} gridnav ...`")
    cfg = load_config(args.config, args.overrides)
    setup_logging(cfg.log.level, read_launch().rank)
    return cfg


def run_record(args: argparse.Namespace, setup_logging: Callable[[str, int], None]) -> int:
    from ddppo.imitation.record import RecordRequest, record

    summary, complete = record(_config(args, setup_logging), RecordRequest(args.episodes, args.out, args.policy,
                                                                            args.resume, args.shard_episodes))
    if summary:
        sys.stdout.write(summary + "\n")
    return 0 if complete else 1  # stopped by a signal: `--resume` continues


def run_imitate(args: argparse.Namespace, setup_logging: Callable[[str, int], None]) -> int:
    from ddppo.imitation.imitate import imitate

    return imitate(_config(args, setup_logging))
