"""The `ddppo sweep` subcommand. Imported while the CLI parser is built, so it imports nothing heavy."""

from __future__ import annotations

import argparse
import logging
import sys

USAGE = """\
ddppo sweep SPEC [key=value ...] [--launcher local|slurm] [--dry-run] [--max-parallel N] [--share-gpus]
            [--sweep-dir DIR]
ddppo sweep summary SWEEP_DIR [--sort METRIC] [--ascending] [--metrics M1,M2,...] [--no-plots]

Runs every run of a sweep spec (configs/sweeps/*.yaml: base config, fixed overrides, grid / list / seeds),
each in SWEEP_DIR/runs/NAME with its resolved config.yaml, after validating all of them. key=value overrides
apply to every run. Re-running skips finished runs and resumes interrupted ones; a changed config of an
existing run is refused. --launcher local runs N at a time (torchrun for ranks > 1), each on its own GPU(s) of
the visible ones (CUDA_VISIBLE_DEVICES, else nvidia-smi), logs in SWEEP_DIR/logs/;
--launcher slurm submits one job array (slurm/sweep_array.sbatch -> slurm/train.sbatch, requeue and resume).
`summary` prints a Markdown table (mean ± std over seeds, status) and writes CSV and learning-curve PNGs to
SWEEP_DIR/summary/.

examples:
  ddppo sweep configs/sweeps/gridnav_syncfrac_lr.yaml --dry-run
  ddppo sweep configs/sweeps/gridnav_syncfrac_lr.yaml run.total_env_steps=20000 --max-parallel 2
  ddppo sweep configs/sweeps/gridnav_syncfrac_lr.yaml --launcher slurm --max-parallel 4 \\
      --sbatch-arg=--time=04:00:00 --sbatch-arg=--partition=gpu
  ddppo sweep summary runs/sweeps/gridnav_syncfrac_lr --sort train/success
"""


def add_parser(sub) -> None:
    """Register `sweep` on the CLI's subparsers."""
    p = sub.add_parser("sweep", help="run a config-driven sweep (grid / list x seeds), or `sweep summary DIR`",
                       description=USAGE, usage="%(prog)s SPEC [key=value ...] [options] | summary SWEEP_DIR",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("spec", help="sweep spec YAML (configs/sweeps/...), or the word `summary`")
    p.add_argument("overrides", nargs="*", help="key=value overrides for every run; after `summary`: SWEEP_DIR")
    run = p.add_argument_group("running a sweep")
    run.add_argument("--launcher", choices=("local", "slurm"), default="local",
                     help="local: run here, N at a time; slurm: submit one job array (default: local)")
    run.add_argument("--dry-run", action="store_true", help="list the runs, their overrides and what would "
                     "happen to each (new / resume / skip); launch and write nothing")
    run.add_argument("--max-parallel", type=int, metavar="N", help="runs at a time (default: the spec's "
                     "max_parallel, else 1 locally and unlimited on SLURM)")
    run.add_argument("--share-gpus", action="store_true", help="local: let parallel runs share GPUs when runs x "
                     "ranks exceed the visible GPUs (refused otherwise; spec key share_gpus)")
    run.add_argument("--sweep-dir", metavar="DIR", help="where the runs go (default: the spec's sweep_dir, "
                     "else runs/sweeps/<name>)")
    run.add_argument("--sbatch-arg", action="append", default=[], metavar="OPT",
                     help="extra sbatch option for the array, repeatable: --sbatch-arg=--time=04:00:00")
    summ = p.add_argument_group("summary")
    summ.add_argument("--metrics", default="train/reward,train/success,train/spl",
                      help="comma-separated metrics of metrics.jsonl (default: %(default)s)")
    summ.add_argument("--sort", metavar="METRIC", help="sort variants by this metric's mean (default: the first)")
    summ.add_argument("--ascending", action="store_true", help="sort ascending (default: best = largest first)")
    summ.add_argument("--no-plots", action="store_true", help="skip the PNGs")


def _out(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def run(args: argparse.Namespace) -> int:
    """Handler of `ddppo sweep`; errors the user can fix raise ConfigError (exit 2 in ddppo.cli)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        datefmt="%H:%M:%S", stream=sys.stderr)
    from ddppo.errors import SweepError

    if args.max_parallel is not None and args.max_parallel < 1:
        raise SweepError(f"--max-parallel={args.max_parallel} must be >= 1")
    if args.spec == "summary":
        if len(args.overrides) != 1:
            raise SweepError("usage: ddppo sweep summary SWEEP_DIR [--sort METRIC] [--metrics M1,M2]")
        from ddppo.sweep.summary import summarize

        metrics = [m.strip() for m in args.metrics.split(",") if m.strip()]
        text, files = summarize(args.overrides[0], metrics, args.sort, args.ascending, not args.no_plots)
        _out(text)
        logging.getLogger("ddppo.sweep").info("wrote %s", ", ".join(str(f) for f in files))
        return 0
    from ddppo.sweep.launch import sweep

    return sweep(args.spec, args.overrides, launcher=args.launcher, dry_run=args.dry_run,
                 max_parallel=args.max_parallel, sweep_dir=args.sweep_dir, sbatch_args=args.sbatch_arg, out=_out,
                 share_gpus=args.share_gpus)
