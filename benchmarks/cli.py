"""`ddppo bench WHAT`: the benchmarks' own subcommand, registered through the `ddppo.commands` entry point
(pyproject.toml), so the library never imports this package. Imported while the CLI parser is built: argparse only.

Every benchmark prints its table and writes its figures as JSON (default `results/WHAT.json` in the working
directory; the dated figures the docs cite live in `benchmarks/results/`).
"""

from __future__ import annotations

import argparse
import logging

WHAT = {
    "throughput": "raw env vs rollout vs training fps",
    "memory": "rollout storage RSS vs analytic size",
    "sb3": "time/steps to CartPole 475 vs stable-baselines3 (extra `bench`)",
    "rollout": "rollout.mode=fixed vs variable training fps on heterogeneous/homogeneous envs",
    "preempt": "preemption check cost, a blocking read every step vs async reads",
    "habitat-baselines": "throughput, learning and cross-evaluation vs habitat-baselines' DD-PPO (and, on 0.3.x, "
                         "its VER) on the real simulator (where it is importable)",
}


SCRIPTS = {  # benchmarks with options of their own: `ddppo bench NAME [their options]` runs NAME's main(argv)
    "env-fps": ("env_fps", "raw env stepping speed for a few batch sizes"),
    "scaling": ("scaling", "1 vs 2 ranks (torchrun) and preemption with a slow rank, on the real trainer"),
    "rollout-parity": ("rollout_parity", "rollout.mode fixed vs variable: env steps to a gridnav threshold"),
    "ver-parity": ("ver_parity", "fixed vs variable vs VER's rules: env steps and minutes to a threshold"),
    "learner-ab": ("learner_ab", "learner time per update, this checkout vs another one, interleaved"),
    "habitat-lab-metrics": ("habitat_lab_metrics", "a checkpoint through habitat-lab's own Benchmark loop"),
    "mujoco": ("mujoco", "ddppo vs stable-baselines3 (RL Zoo or CleanRL settings) on gymnasium MuJoCo tasks"),
    "preemption-bias": ("preemption_bias", "per-scene success and fps with preemption off, on and on with each "
                                           "correction (issue 44), 2 ranks, scenes of different speeds"),
    "preemption-sim": ("preemption_sim", "8-256 simulated ranks with heavy-tailed scene step times: throughput and "
                                         "the slow scenes' share against sync_frac, with and without the corrections"),
    "sb3-lockstep": ("sb3_lockstep", "ddppo and stable-baselines3 from the same weights and random streams: "
                                     "per-update differences"),
    "atari-env": ("atari_env", "the Atari env's own fps, gymnasium's AtariPreprocessing wrappers vs ale-py's "
                               "AtariVectorEnv (extra `atari`)"),
    "atari": ("atari", "ddppo vs stable-baselines3 PPO on Atari at RL Zoo's settings (the standard preprocessing, "
                       "the Nature CNN): wall-clock steps/s, return and learning curve at equal steps (extras "
                       "`bench`, `atari`)"),
    "minigrid": ("minigrid", "ddppo vs stable-baselines3 PPO on MiniGrid's raw observation (rl-starter-files' "
                             "settings): wall-clock steps/s and return at equal steps (extras `bench`, `minigrid`)"),
    "checkpoint-io": ("checkpoint_io", "checkpoint size and write time of configs, written where you point it"),
    "memory-cores": ("memory_cores", "GRU vs transformer cores (two contexts): acting and learning time of the "
                                     "core alone, at gridnav's sizes"),
    "memory-task": ("memory_task", "success of each policy.rnn_type (gru, lstm, transformer, none) on gridnav_memory, "
                                   "seeds side by side"),
    "seeds": ("seeds", "success of a config's variants (KEY=VALUE overrides) over seeds at one budget, with 95% "
                       "intervals: e.g. fp32 vs bf16 on gridnav_depth"),
    "encoders": ("encoders", "learn-phase time with a library image encoder trained, frozen, and frozen with its "
                             "features kept (extra `vision`)"),
    "precision": ("precision", "an image policy's acting and learning time on the camera gridnav, fp32 vs bf16 vs "
                               "bf16 + torch.compile, for the CNN and library encoders trained and frozen "
                               "(--encoders), and the acting vs learning log-prob gap (run.precision, run.compile)"),
    "bc-rl": ("bc_rl", "gridnav at one env-step budget: BC alone, RL alone, BC -> RL with and without the critic "
                       "warm-up, over seeds (PIRLNav's comparison)"),
    "reward-model": ("reward_model", "training steps/s with no reward model, an MLP reward model scoring every step, "
                                     "and scoring only ended episodes (reward.mode=terminal)"),
    "imitation": ("imitation", "demonstration format vs Minari (seconds, bytes), ddppo record episodes/s, ddppo "
                               "imitate samples/s on 1 and 2 ranks, the clone's success"),
}


def add_parser(sub) -> None:
    """Register `bench` on the CLI's subparsers."""
    bench = sub.add_parser("bench", help="benchmarks that print side-by-side figures and write JSON",
                           description="Benchmarks print a table and write their figures as JSON. "
                                       "`ddppo bench WHAT --help` lists WHAT's options.",
                           epilog="; ".join(f"{k}: {v}" for k, v in
                                            [*WHAT.items(), *((k, v[1]) for k, v in SCRIPTS.items())]))
    bench.add_argument("what", choices=[*WHAT, *SCRIPTS], help="which benchmark (see below)")
    bench.add_argument("options", nargs=argparse.REMAINDER, help="its options (`ddppo bench WHAT --help`)")
    bench.set_defaults(finish_parsing=finish_parsing)


def finish_parsing(args: argparse.Namespace) -> argparse.Namespace:
    """WHAT's own options parsed (at parse time, so a bad option fails like any other: usage, exit 2); the
    benchmarks with options of their own parse theirs when they run."""
    if args.what in SCRIPTS:
        return args
    return options_parser(args.what).parse_args(args.options, argparse.Namespace(**{**vars(args), "options": []}))


def options_parser(what: str) -> argparse.ArgumentParser:
    """The options of the benchmarks in WHAT."""
    bench = argparse.ArgumentParser(prog=f"ddppo bench {what}", description=WHAT[what])
    bench.add_argument("--case", action="append", nargs="+", metavar=("CONFIG", "OVERRIDE"),
                       help="throughput/memory/rollout: a config and overrides to measure (repeatable); "
                            "habitat-baselines: the one config both trainers run")
    bench.add_argument("--rounds", type=int, default=5,
                       help="throughput/rollout: interleaved rounds (medians reported)")
    bench.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3], help="sb3/habitat-baselines: seeds")
    bench.add_argument("--budget", type=int, default=100_000,
                       help="sb3/habitat-baselines: env steps per learning run (habitat-baselines: 0 = no learning)")
    bench.add_argument("--updates", type=int, default=20,
                       help="habitat-baselines: updates per throughput run (--rounds 0 = no throughput)")
    bench.add_argument("--eval-split", default="val",
                       help="habitat-baselines: held-out split, a folder beside the training split's")
    bench.add_argument("--ab", nargs="+", default=[], metavar="OVERRIDE",
                       help="habitat-baselines: throughput also of ddppo with these overrides (a third side, "
                            "interleaved), e.g. rollout.overlap_learning=true")
    bench.add_argument("--jobs", type=int, default=1,
                       help="habitat-baselines: learning runs at once (throughput runs are always one at a time)")
    bench.add_argument("--out", default="", help="JSON output path (default: results/WHAT.json in the working "
                                                 "directory)")
    return bench


def run(args: argparse.Namespace) -> int:
    import importlib

    from ddppo.config.loading import shipped_config

    logging.basicConfig(level=logging.WARNING)
    if args.what in SCRIPTS:
        return importlib.import_module(f"ddppo.benchmarks.{SCRIPTS[args.what][0]}").main(args.options)
    out = args.out or f"results/{args.what}.json"
    cases = [(c[0], c[1:]) for c in args.case] if args.case else None
    gridnav, cartpole = str(shipped_config("gridnav")), str(shipped_config("cartpole"))
    if args.what == "sb3":
        from ddppo.benchmarks import sb3

        return sb3.main(args.seeds, args.budget, cartpole, out)
    if args.what == "rollout":
        from ddppo.benchmarks import rollout_modes

        return rollout_modes.main(gridnav, out, args.rounds, cases)
    if args.what == "habitat-baselines":
        from ddppo.benchmarks import habitat_baselines

        config, overrides = cases[0] if cases else (str(shipped_config("pointnav_habitat_cpu")),
                                                    list(habitat_baselines.SIMPLE_CNN))
        return habitat_baselines.main(config, overrides, args.rounds, args.updates, args.seeds, args.budget,
                                      args.eval_split, out, args.jobs, args.ab)
    if args.what == "preempt":
        from ddppo.benchmarks import preempt_store

        return preempt_store.main(out)
    if args.what == "memory":
        from ddppo.benchmarks import memory

        return memory.main_memory(cases or [(gridnav, []), (gridnav, ["env.num_envs=256", "rollout.num_steps=256"])],
                                  out)
    from ddppo.benchmarks import throughput

    return throughput.main_throughput(cases or [(gridnav, []), (cartpole, [])], out, args.rounds)
