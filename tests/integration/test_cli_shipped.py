"""The shipped configs by name through the real `python -m ddppo`: `config --list` groups them by what they are,
the errors that name shipped configs agree with it, and whatever is not a training config is named as what it is
(with how it is used) when handed to `train` or `sweep`; `train` with nothing to train says what to pass; a
suggested key ends its sentence once."""

from __future__ import annotations

from test_cli import assert_one_user_error

HEADINGS = {"# training configs": "train", "# habitat-lab task configs": "habitat_lab", "# sweep specs": "sweep"}


def listed(stdout: str) -> dict[str, list[str]]:
    """`config --list`'s output as kind -> names (`# <kind>s: <how>` lines head each group)."""
    groups: dict[str, list[str]] = {}
    current = None
    for line in stdout.splitlines():
        if line.startswith("#"):
            current = HEADINGS[line.split(":")[0]]
            groups[current] = []
        else:
            name, path = line.split("\t")
            assert path.endswith(f"{name}.yaml"), line
            groups[current].append(name)
    return groups


def test_list_groups_by_kind_and_every_group_does_what_its_heading_says(tmp_path, cli, cli_many):
    res = cli("config", "--list", cwd=tmp_path)
    assert res.returncode == 0, res
    groups = listed(res.stdout)
    assert set(groups) == set(HEADINGS.values()), res
    assert "gridnav" in groups["train"] and "habitat_lab/pointnav_gen_task" in groups["habitat_lab"]
    assert groups["sweep"] == ["sweeps/gridnav_syncfrac_lr"]
    others = groups["habitat_lab"] + groups["sweep"]
    results = cli_many([["config", name] for name in groups["train"]] + [["train", name] for name in others]
                       + [["train", "no_such_config"], ["sweep", "gridnav", "--dry-run"]], cwd=tmp_path)
    for name, r in zip(groups["train"], results):  # every training config loads by name
        assert r.returncode == 0 and "run:" in r.stdout, (name, r)
    for name, r in zip(others, results[len(groups["train"]):]):  # the rest: one line, what it is and how to use it
        if name.startswith("sweeps/"):
            assert_one_user_error(r, f"'{name}' is a sweep spec, not a training config", f"`ddppo sweep {name}`")
        else:
            assert_one_user_error(r, f"'{name}' is a habitat-lab task config, not a training config",
                                  "env.habitat_lab.config", "`ddppo train habitat_lab_")
            assert "Key 'ENVIRONMENT'" not in r.stderr and "not in 'Config'" not in r.stderr
    missing, wrong_sweep = results[-2:]
    assert_one_user_error(missing, "'no_such_config' does not exist", "ddppo config --list")
    assert f"({', '.join(groups['train'])})" in missing.stderr, missing  # the same names as --list's group
    assert_one_user_error(wrong_sweep, "is a training config, not a sweep spec", "`ddppo sweep sweeps/")
    assert not list(tmp_path.iterdir())  # nothing written


def test_a_shipped_task_config_given_by_path_is_named_too(cli):
    res = cli("train", "configs/habitat_lab/objectnav_gen_task_v03.yaml")
    assert_one_user_error(res, "is a habitat-lab task config", "`ddppo train habitat_lab_objectnav`")


def test_train_without_a_config_says_what_to_pass(tmp_path, cli):
    res = cli("train", cwd=tmp_path)
    assert_one_user_error(res, "ddppo train needs a config", "gridnav", "ddppo config --list", "YAML file",
                          "ddppo train gridnav ppo.lr=1e-4")
    assert "required" not in res.stderr, res


def test_a_suggested_key_ends_its_sentence_once(cli):
    res = cli("config", "gridnav", "ppo.lrr=1")
    if omegaconf_suggests_keys():
        assert_one_user_error(res, "ppo.lrr", "Did you mean: 'lr'? Run `ddppo config")
    else:  # omegaconf 2.3 names the key without a suggestion: the sentence still ends once
        assert_one_user_error(res, "ppo.lrr", "Key 'lrr' not in 'PPOConfig'. Run `ddppo config")
    assert "?." not in res.stderr and ".." not in res.stderr, res


def omegaconf_suggests_keys() -> bool:
    """omegaconf 2.4 adds "Did you mean: ...?" to an unknown key's error; 2.3 (also supported) does not."""
    from omegaconf import OmegaConf
    from omegaconf.errors import ConfigKeyError

    try:
        OmegaConf.merge(OmegaConf.create({"lr": 1}, flags={"struct": True}), {"lrr": 1})
    except ConfigKeyError as err:
        return "Did you mean" in str(err)
    return False
