"""The placement section: roles on rank ranges, checked as text when the config loads and against the world size
at start-up, each problem one ConfigError naming the key and the fix; `ddppo config` prints it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from ddppo.cli import main
from ddppo.config import Config, from_yaml_text, load_config
from ddppo.distributed import Launch, Placement, run_in_process_group
from ddppo.distributed.placement import TRAIN, parse_ranks, resolve
from ddppo.errors import ConfigError

GRIDNAV = str(Path(__file__).resolve().parents[2] / "configs" / "gridnav.yaml")


def specs(cfg: Config) -> dict:
    return dataclasses.asdict(cfg.placement)


def test_the_default_is_colocated_train_on_every_rank():
    assert specs(Config()) == {TRAIN: "all"}
    placed = resolve(specs(Config()), 4)
    assert placed == Placement.colocated(4)
    assert placed.roles == {TRAIN: (0, 1, 2, 3)} and placed.role_of(3) == TRAIN and placed.spans_world(TRAIN)
    assert resolve({TRAIN: "0-1"}, 2) == Placement.colocated(2)  # every rank named by hand: the same placement


@pytest.mark.parametrize("text,ranks", [("all", None), ("", ()), ("3", (3,)), ("0-3,6", (0, 1, 2, 3, 6)),
                                        (" 4-5 , 0 ", (0, 4, 5))])
def test_rank_text(text, ranks):
    assert parse_ranks(text) == ranks


@pytest.mark.parametrize("text,needle", [("3-1", "runs backwards (write 1-3)"), ("0,0-1", "names a rank twice"),
                                         ("a", "'a' is not a rank"), ("1-", "'1-' is not a rank"),
                                         ("-1", "'-1' is not a rank")])
def test_bad_text_is_refused_when_the_config_loads(text, needle):
    with pytest.raises(ConfigError) as err:
        load_config(None, [f"placement.train={text}"])
    assert f"placement.train={text!r}" in str(err.value) and needle in str(err.value)
    assert "'0-3,6'" in str(err.value)  # the fix: what to write


def test_ranks_past_the_world_are_refused_at_start_up():
    with pytest.raises(ConfigError, match=r"placement.train='0-3' names rank\(s\) 2-3, past the job's 2 rank\(s\) "
                                          r"\(0-1\): start more ranks or name fewer"):
        resolve({TRAIN: "0-3"}, 2)


def test_a_rank_with_two_roles_is_refused():
    with pytest.raises(ConfigError, match=r"placement.reward='1-2' and placement.train='0-1' both take rank\(s\) 1: "
                                          r"a rank has one role"):
        resolve({TRAIN: "0-1", "reward": "1-2"}, 3)


def test_a_rank_without_a_role_is_refused_naming_the_default():
    with pytest.raises(ConfigError, match=r"rank\(s\) 1,3 of 4 take no role in placement.train='0,2': give every "
                                          r"rank a role \(the colocated default: placement.train=all\)"):
        resolve({TRAIN: "0,2"}, 4)


def test_later_roles_fit_the_same_shape():
    """A role on ranks of its own (a served reward model, issue 63; actors and learners, issue 64) is one more key."""
    placed = resolve({TRAIN: "1-3", "reward": "0"}, 4)
    assert placed.roles == {TRAIN: (1, 2, 3), "reward": (0,)}
    train = placed.group(TRAIN, 2)
    assert (train.name, train.ranks, train.rank, train.size, train.is_main) == (TRAIN, (1, 2, 3), 1, 3, False)
    assert placed.group("reward", 2).rank == -1 and placed.group(TRAIN, 1).is_main
    with pytest.raises(KeyError, match="no rank takes the role 'learner'"):
        placed.ranks("learner")


def test_every_rank_leaves_with_the_config_error_before_the_rendezvous():
    """Checked against the launcher's world size before any rank joins (nothing listens on the port)."""
    cfg = load_config(None, ["placement.train=0"])
    launch = Launch(0, 2, 0, 2, "127.0.0.1", 1, "torchrun")
    with pytest.raises(ConfigError, match=r"rank\(s\) 1 of 2 take no role"):
        run_in_process_group(cfg, launch, lambda ctx: 0)


def test_ddppo_config_prints_the_placement(capsys):
    assert main(["config", GRIDNAV]) == 0
    out = capsys.readouterr().out
    assert "placement:\n  train: all\n" in out  # the YAML, which reads back as the config
    assert from_yaml_text(out, "stdout") == load_config(GRIDNAV, [])
    assert "# placement (colocated: every rank collects and learns; the launcher sets the world size):\n" \
           "#   train: every rank\n" in out
    assert main(["config", GRIDNAV, "placement.train=0-1,3"]) == 0
    assert "#   train: ranks 0-1,3\n" in capsys.readouterr().out


def test_the_context_names_its_groups():
    from testutil import gloo_context

    ctx = gloo_context()
    try:
        group = ctx.group()
        assert (group.name, group.ranks, group.rank, group.size) == (TRAIN, (0,), 0, 1)
        assert ctx.role == TRAIN and ctx.placement == Placement.colocated(1)
        with pytest.raises(KeyError, match="no rank takes the role 'reward'"):
            ctx.group("reward")
    finally:
        ctx.close()
