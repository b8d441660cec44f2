"""`ddppo bench`'s table is built from the bench modules (benchmarks/cli.py): every module of peers/, speed/ and
learning/ that says its NAME and HELP is one subcommand, run by its `main(argv)`; helpers say neither."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from ddppo.benchmarks import cli
from testutil import REPO

# the subcommands docs/, .ci/run and the tests call: each keeps its name
NAMES = {"throughput", "memory", "sb3", "rollout", "preempt", "habitat-baselines", "env-fps", "scaling",
         "rollout-parity", "ver-parity", "learner-ab", "habitat-lab-metrics", "mujoco", "preemption-bias",
         "preemption-sim", "sb3-lockstep", "atari-env", "atari", "minigrid", "checkpoint-io", "memory-cores",
         "memory-task", "seeds", "encoders", "precision", "bc-rl", "reward-model", "imitation"}


def test_every_subcommand_comes_from_a_module_of_its_group_with_a_main_taking_argv():
    table = cli.table()
    assert set(table) == NAMES
    for bench in table.values():
        group, stem = bench.module.split(".")[2:]
        assert group == bench.group in cli.GROUPS and bench.help, bench
        tree = ast.parse((REPO / "benchmarks" / group / f"{stem}.py").read_text())
        (main,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "main"]
        assert [a.arg for a in main.args.args] == ["argv"], bench.module


def test_helpers_are_not_subcommands_and_a_name_given_twice_is_refused(tmp_path: Path):
    assert cli.constants('"""doc"""\nimport os\n\nTASKS = 1\n') == {}
    assert cli.constants('import os\n\nNAME = "x"\nHELP = ("one "\n        "line")\n\nX = 2\n') == {
        "NAME": "x", "HELP": "one line"}
    for group in cli.GROUPS:
        (tmp_path / group).mkdir()
    (tmp_path / "speed" / "a.py").write_text('NAME = "same"\nHELP = "a"\n')
    (tmp_path / "learning" / "b.py").write_text('NAME = "same"\nHELP = "b"\n')
    (tmp_path / "peers" / "helper.py").write_text("VALUE = 1\n")
    with pytest.raises(ValueError, match="named by both ddppo.benchmarks.speed.a and ddppo.benchmarks.learning.b"):
        cli.table(tmp_path)
    (tmp_path / "learning" / "b.py").write_text('NAME = "other"\nHELP = "b"\n')
    assert list(cli.table(tmp_path)) == ["same", "other"]


def test_the_gpu_check_is_not_a_benchmark():
    assert not list((REPO / "benchmarks").rglob("gpu_check*")) and not list((REPO / "benchmarks").rglob("*.sh"))
