"""`ddppo train|config|eval|plot|sweep|bench|export|rundir|record|imitate`: a thin entry point (the sweep, export
and imitation parsers are added from their packages' cli modules; bench lives outside the library, in `benchmarks/`,
and registers itself through the `ddppo.commands` entry point).

Signal handlers are installed before anything heavy is imported, so a SLURM
signal during start-up is not lost. User errors (the kinds of ddppo/errors.py: config, environment,
checkpoint, launcher) print one line and exit 2, without a traceback.
"""

from __future__ import annotations

from ddppo import signals, user_code

signals.install()

import argparse  # noqa: E402
import logging  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402

from ddppo.export import cli as export_cli  # noqa: E402  (light: argparse only)
from ddppo.imitation import cli as imitation_cli  # noqa: E402  (light: argparse only)
from ddppo.sweep import cli as sweep_cli  # noqa: E402  (light: argparse only)

log = logging.getLogger("ddppo")


def _setup_logging(level: str, rank: int) -> None:
    logging.basicConfig(
        level=getattr(logging, level) if rank == 0 else logging.WARNING,
        format=f"%(asctime)s [rank {rank}] %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
        stream=sys.stderr,
        force=True,
    )


def _add_config_args(p: argparse.ArgumentParser) -> None:
    # optional to argparse, so that its absence is answered with what to pass (cmd_train), not "required: config"
    p.add_argument("config", nargs="?",
                   help="YAML config file, or a shipped training config's name (ddppo config --list), e.g. gridnav")
    p.add_argument("overrides", nargs="*", help="dotted key=value overrides, e.g. ppo.lr=1e-4 env.num_envs=32")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ddppo", description="Decentralised distributed PPO.")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_config_args(sub.add_parser("train", help="train (runs unchanged under torchrun and srun)"))
    cfg = sub.add_parser("config", help="print the fully resolved config, explain its keys, list shipped configs")
    cfg.add_argument("config", nargs="?", help="YAML config file or shipped config name, e.g. gridnav")
    cfg.add_argument("overrides", nargs="*", help="dotted key=value overrides, e.g. ppo.lr=1e-4 env.num_envs=32")
    cfg.add_argument("--explain", action="append", default=[], metavar="KEY",
                     help="what KEY (or every key of a section, e.g. ppo) means, its type and default (and its "
                          "value, with a config); repeatable")
    cfg.add_argument("--help-keys", action="store_true", help="list every key with its one-line help")
    cfg.add_argument("--list", action="store_true",
                     help="list the shipped configs by kind: training configs (ddppo train NAME), habitat-lab task "
                          "configs (named by a training config), sweep specs (ddppo sweep NAME)")
    cfg.add_argument("--markdown", action="store_true",
                     help="print the configuration reference page (docs/reference/config.md): every key by section")
    sweep_cli.add_parser(sub)
    ev = sub.add_parser("eval", help="evaluate checkpoints: metrics with 95%% CIs to JSON and TensorBoard, videos",
                        description="Evaluate checkpoints on held-out episodes (see ddppo/eval/command.py). "
                                    "Actions are greedy unless eval.deterministic=false.")
    ev.add_argument("target", metavar="RUN_DIR_OR_CONFIG", help="a run directory, or a YAML config (its run.dir)")
    ev.add_argument("overrides", nargs="*", help="dotted key=value overrides, e.g. eval.num_episodes=500")
    ev.add_argument("--checkpoint", default="latest", metavar="PATH|latest|all",
                    help="one checkpoint file, the newest (default), or all in order")
    ev.add_argument("--watch", action="store_true", help="also wait for new checkpoints until training finishes")
    ev.add_argument("--video", type=int, default=0, metavar="N", help="record N episodes per checkpoint (MP4/GIF)")
    ev.add_argument("--out", default="", metavar="DIR", help="output directory (default RUN_DIR/eval)")
    ev.add_argument("--force", action="store_true", help="evaluate again checkpoints that already have results")
    ev.add_argument("--poll", type=float, default=30.0, metavar="S", help="--watch: seconds between looks")
    plot = sub.add_parser("plot", help="runs' learning curves (return, success, losses, fps) as one PNG; several "
                                       "runs: their mean and 95%% interval",
                          description="Plot RUN_DIRs' metrics.jsonl against env steps (ddppo/sweep/curves.py). "
                                      "Several runs are taken as seeds of one configuration: the line is their mean, "
                                      "the band its 95%% interval (Student's t), each run a thin grey line.")
    plot.add_argument("runs", nargs="+", metavar="RUN_DIR", help="run directories (their run.dir)")
    plot.add_argument("--out", default="curves.png", metavar="PNG", help="the picture to write (default curves.png)")
    plot.add_argument("--metric", action="append", default=[], metavar="TAG",
                      help="a metrics.jsonl tag to draw, repeatable (default: train/reward, train/success, "
                           "loss/policy, loss/value, loss/entropy, perf/fps: those the runs logged)")
    export_cli.add_parser(sub)
    imitation_cli.add_parsers(sub)
    rundir = sub.add_parser("rundir", help="the run directory's claim: free one whose holder is gone")
    release = rundir.add_subparsers(dest="rundir_command", required=True).add_parser(
        "release", help="free DIR (a run dir, eval output or sweep dir) claimed by a process that is gone, e.g. on "
                        "a node that was lost; refused while that process runs on this host")
    release.add_argument("dir", metavar="DIR", help="the directory named in the `in use by` message")
    for command in plugin_commands().values():
        command.add_parser(sub)
    return parser


def plugin_commands() -> dict:
    """The subcommands registered outside the library (`ddppo.commands` entry points: `bench`), name -> module."""
    from ddppo.entry_points import entry_points_of

    return {ep.name: ep.load() for ep in entry_points_of("ddppo.commands")}


def cmd_config(args: argparse.Namespace) -> int:
    from ddppo.config import explain, help_keys, load_config, to_yaml
    from ddppo.config.describe import markdown
    from ddppo.errors import ConfigError

    if args.help_keys or args.markdown:
        sys.stdout.write(help_keys() if args.help_keys else markdown())
        return 0
    if args.list:
        sys.stdout.write(_shipped_list())
        return 0
    if args.config is None and not args.explain:
        raise ConfigError("ddppo config needs a YAML config file or a shipped config's name (or --explain KEY, "
                          "--help-keys, --list, --markdown)")
    cfg = load_config(args.config, args.overrides) if args.config is not None else None
    if args.explain:
        sys.stdout.write("".join(explain(key, cfg) for key in args.explain))
    else:
        import dataclasses

        from ddppo.config.sizes import size_lines
        from ddppo.distributed.placement import placement_lines

        sys.stdout.write(to_yaml(cfg) + size_lines(cfg) + placement_lines(dataclasses.asdict(cfg.placement)))
    return 0


def _shipped_list() -> str:
    """`ddppo config --list`: the shipped configs grouped by kind, a `# kind: how it is used` line over each
    group, then `name<TAB>file` lines."""
    from ddppo import configs

    out = []
    for kind, names in configs.by_kind().items():
        what, how = configs.KINDS[kind]
        out.append(f"# {what}s: {how}\n")
        out += [f"{name}\t{configs.find(name)}\n" for name in names]
    return "".join(out)


def cmd_train(args: argparse.Namespace) -> int:
    from ddppo import configs
    from ddppo.api.training import train
    from ddppo.config import load_config
    from ddppo.errors import ConfigError
    from ddppo.distributed import read_launch

    if args.config is None:
        raise ConfigError(f"ddppo train needs a config: a shipped training config's name "
                          f"({', '.join(configs.by_kind()['train'])}: `ddppo config --list`) or a YAML file, "
                          f"then any key=value overrides, e.g. `ddppo train gridnav ppo.lr=1e-4`")
    launch = read_launch()
    cfg = load_config(args.config, args.overrides)
    _setup_logging(cfg.log.level, launch.rank)
    return train(cfg)


def cmd_rundir(args: argparse.Namespace) -> int:
    from ddppo.rundir.claim import release_dir

    sys.stdout.write(release_dir(args.dir) + "\n")
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ddppo.sweep.curves import PLOT_METRICS, plot_runs

    out = Path(args.out)
    drawn = plot_runs(args.runs, out, args.metric or PLOT_METRICS)
    sys.stdout.write(f"wrote {out} ({', '.join(drawn)})\n")
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from ddppo.eval.command import EvalRequest, main as eval_main

    return eval_main(EvalRequest(args.target, args.overrides, args.checkpoint, args.watch, args.video, args.out,
                                 args.force, args.poll), _setup_logging)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Parse the command line; `key=value` overrides may come anywhere, also after options
    (`ddppo sweep SPEC --dry-run run.total_env_steps=100`): argparse stops filling a `nargs="*"` positional at
    the first option, so what it leaves over is appended to the overrides, in order."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    unknown = [e for e in extra if e.startswith("-")]
    if extra and (unknown or not hasattr(args, "overrides")):
        parser.error(f"unrecognized arguments: {' '.join(unknown or extra)}")
    if extra:
        args.overrides = [*args.overrides, *extra]
    return args


def main(argv: list[str] | None = None) -> int:
    """The CLI. Run as a program (argv None), `train` leaves with os._exit once everything is closed:
    interpreter shutdown (garbage collection of torch state) can take seconds, and SLURM's KillWait after a
    SIGTERM is short."""
    user_code.workdir_first()  # `ddppo ...` finds the user's modules beside them, as `python -m ddppo ...` does
    args = parse_args(argv)
    from ddppo.envs.base import EnvError, env_failure
    from ddppo.errors import EXIT_USER_ERROR, user_error_kinds, user_error_label

    handlers = {"train": cmd_train, "config": cmd_config, "sweep": sweep_cli.run, "eval": cmd_eval,
                "export": export_cli.run, "rundir": cmd_rundir, "plot": cmd_plot,
                "record": lambda a: imitation_cli.run_record(a, _setup_logging),
                "imitate": lambda a: imitation_cli.run_imitate(a, _setup_logging),
                **{name: cmd.run for name, cmd in plugin_commands().items()}}
    try:
        try:
            rc = handlers[args.command](args)
        except Exception as exc:  # an environment's own exception is reported like a worker's
            failure = env_failure(exc)
            if failure is None:
                raise
            raise failure from None
    except tuple(cls for cls, _ in user_error_kinds()) as err:
        kind = user_error_label(err)
        first, details = str(err), ""
        if isinstance(err, EnvError):
            first, _, details = first.partition("\n")
        if details:  # an env's traceback: shown with log.level=DEBUG
            log.debug("%s", details)
            first += " (traceback: log.level=DEBUG)"
        # one line, whatever the message quotes (a key or value with a newline or carriage return in it)
        first = "".join(c if c.isprintable() else repr(c)[1:-1] for c in first)
        sys.stderr.write(f"ddppo: {kind}: {first}\n")
        rc = EXIT_USER_ERROR
    if argv is None and args.command == "train":
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(rc)
    return rc
