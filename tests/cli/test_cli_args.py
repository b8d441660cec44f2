"""The CLI's argument parsing: `key=value` overrides are accepted anywhere on the line."""

import pytest

from ddppo.cli import parse_args


def test_overrides_after_options_are_overrides():
    args = parse_args(["sweep", "spec.yaml", "--dry-run", "run.total_env_steps=100"])
    assert args.spec == "spec.yaml" and args.dry_run and args.overrides == ["run.total_env_steps=100"]


def test_overrides_keep_their_order_around_options():
    args = parse_args(["sweep", "spec.yaml", "ppo.lr=1", "--max-parallel", "2", "ppo.lr=2", "--dry-run"])
    assert args.overrides == ["ppo.lr=1", "ppo.lr=2"] and args.max_parallel == 2


def test_summary_dir_after_options():
    args = parse_args(["sweep", "summary", "--sort", "train/spl", "runs/sweeps/x"])
    assert args.spec == "summary" and args.overrides == ["runs/sweeps/x"] and args.sort == "train/spl"


def test_eval_overrides_after_options():
    args = parse_args(["eval", "runs/x", "--checkpoint", "all", "eval.num_episodes=4"])
    assert args.overrides == ["eval.num_episodes=4"] and args.checkpoint == "all"


def test_unknown_options_still_fail():
    with pytest.raises(SystemExit) as err:
        parse_args(["sweep", "spec.yaml", "--no-such-option"])
    assert err.value.code == 2


def test_stray_words_after_a_bench_fail_in_its_own_parser():
    """`ddppo bench NAME` hands the rest of the line to the bench's own `main(argv)`, whose parser refuses it."""
    from ddppo.benchmarks.speed.storage_memory import main

    with pytest.raises(SystemExit) as err:
        main(["ppo.lr=1"])
    assert err.value.code == 2
