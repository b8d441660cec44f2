"""Sweep specs in process (fast): expansion, names, config layering, and every refusal before launch."""

from __future__ import annotations

import pytest
import yaml

from ddppo.config import parse_overrides, to_yaml
from ddppo.sweep.launch import check_unchanged
from ddppo.sweep.spec import cli_overrides, expand, format_value, load_spec
from ddppo.errors import SweepError
from sweep_helpers import TINY


def runs_of(spec_file, tmp_path, items=(), **spec):
    return expand(load_spec(spec_file(**spec)), cli_overrides(items), tmp_path / "sweep")


def test_grid_list_seeds_expand_in_order_with_readable_names(spec_file, tmp_path):
    runs = runs_of(spec_file, tmp_path, grid={"ppo.lr": [1e-3, 2.5e-4], "preemption.sync_frac": [0.5, 1.0]},
                   list=[{"name": "gru", "policy.rnn_type": "gru"}, {"policy.rnn_type": "lstm"}], seeds=[3, 5])
    assert len(runs) == 2 * 2 * 2 * 2
    assert [r.index for r in runs] == list(range(16))
    assert runs[0].name == "lr=0.001,sync_frac=0.5,gru,seed=3"
    assert runs[1].name == "lr=0.001,sync_frac=0.5,gru,seed=5"
    assert runs[2].name == "lr=0.001,sync_frac=0.5,rnn_type=lstm,seed=3"
    assert runs[-1].name == "lr=0.00025,sync_frac=1,rnn_type=lstm,seed=5"
    assert len({r.variant for r in runs}) == 8 and len({r.name for r in runs}) == 16
    last = runs[-1]
    assert (last.cfg.ppo.lr, last.cfg.preemption.sync_frac, last.cfg.policy.rnn_type, last.cfg.run.seed) == \
        (2.5e-4, 1.0, "lstm", 5)
    assert last.cfg.run.dir == str(tmp_path / "sweep" / "runs" / last.name)
    assert last.cfg.env.num_envs == TINY["env.num_envs"]  # the fixed overrides apply to every run
    assert last.overrides["run.seed"] == 5 and last.overrides["ppo.lr"] == 2.5e-4


def test_seed_count_and_no_axes(spec_file, tmp_path):
    runs = runs_of(spec_file, tmp_path, seeds=3)
    assert [r.name for r in runs] == ["base,seed=0", "base,seed=1", "base,seed=2"]
    assert [r.cfg.run.seed for r in runs] == [0, 1, 2]
    assert [r.name for r in runs_of(spec_file, tmp_path)] == ["base"]


def test_layers_command_line_over_spec_varied_over_both(spec_file, tmp_path):
    runs = runs_of(spec_file, tmp_path, ["ppo.epochs=3", "ppo.clip=0.1"],
                   overrides={"ppo.clip": 0.3, "ppo.entropy_coef": 0.02}, grid={"ppo.gamma": [0.9]})
    cfg = runs[0].cfg
    assert (cfg.ppo.epochs, cfg.ppo.clip, cfg.ppo.entropy_coef, cfg.ppo.gamma) == (3, 0.1, 0.02, 0.9)


def test_ambiguous_short_names_use_more_of_the_key(spec_file, tmp_path):
    runs = runs_of(spec_file, tmp_path, grid={"env.gridnav.max_episode_steps": [10],
                                              "env.habitat.max_episode_steps": [50]})
    assert runs[0].name == "gridnav.max_episode_steps=10,habitat.max_episode_steps=50"


def test_yaml_exponent_floats_are_floats(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("grid:\n  ppo.lr: [1e-3, 3E-4]\n")
    assert load_spec(path).grid["ppo.lr"] == [1e-3, 3e-4]


@pytest.mark.parametrize("value", [1e-3, 0.25, 3, True, "gym:CartPole-v1", "a b", "1e-3", "true", [2, 2], None])
def test_format_value_round_trips_through_the_override_parser(value):
    assert parse_overrides([f"k={format_value(value)}"])["k"] == value


def test_invalid_values_name_every_bad_run_and_the_key(spec_file, tmp_path):
    with pytest.raises(SweepError) as err:
        runs_of(spec_file, tmp_path, grid={"ppo.lr": [1e-3, -1.0]},
                list=[{"name": "ok", "ppo.num_mini_batch": 2}, {"name": "bad", "ppo.num_mini_batch": 3}])
    msg = str(err.value)
    assert "3 of 4 run(s)" in msg and "nothing was launched" in msg
    assert "run 'lr=0.001,bad': invalid config: ppo.num_mini_batch=3 must divide env.num_envs=4" in msg
    assert "'lr=-1,ok'" in msg and "ppo.lr=-1.0 must be > 0" in msg
    assert "lr=0.001,ok" not in msg
    assert not (tmp_path / "sweep").exists()


def test_unknown_key_and_wrong_type_are_named(spec_file, tmp_path):
    with pytest.raises(SweepError, match=r"every run \(2\): .*ppo\.bogus"):
        runs_of(spec_file, tmp_path, ["ppo.bogus=1"], seeds=2)
    with pytest.raises(SweepError, match=r"run 'num_envs=many'.*env\.num_envs.*Integer"):
        runs_of(spec_file, tmp_path, grid={"env.num_envs": [4, "many"]})


@pytest.mark.parametrize("spec, items, match", [
    ({"grid": {"ppo.lr": [1e-3]}, "list": [{"ppo.lr": 1e-4}]}, (), "varied by both grid and list"),
    ({"grid": {"run.dir": ["x"]}}, (), "run.dir is set by the sweep"),
    ({"overrides": {"run.dir": "x"}}, (), "run.dir is set by the sweep"),
    ({"grid": {"run.seed": [1, 2]}, "seeds": 2}, (), "run.seed is varied and `seeds` is given"),
    ({"grid": {"ppo.lr": [1e-3]}}, ("ppo.lr=1e-4",), "command-line override of ppo.lr"),
    ({"seeds": 2}, ("run.seed=4",), "command-line override of run.seed"),
    ({"grid": {"ppo.lr": 1e-3}}, (), "grid.ppo.lr must be a non-empty list"),
    ({"seeds": 0}, (), "seeds=0 must be a count >= 1"),
    ({"ranks": 0}, (), "ranks=0 must be an integer >= 1"),
    ({"grdi": {}}, (), "unknown key.*grdi"),
    ({"base": "nope.yaml"}, (), "base config 'nope.yaml' not found"),
    ({"list": [{"name": "a", "ppo.lr": 1e-3}, {"name": "a", "ppo.lr": 1e-4}]}, (), "names repeat"),
    ({"grid": {"ppo.lr": [1e-3, 0.001]}}, (), "both named 'lr=0.001'"),
])
def test_spec_problems_are_refused(spec_file, tmp_path, spec, items, match):
    with pytest.raises(SweepError, match=match):
        runs_of(spec_file, tmp_path, items, **spec)


def test_changed_config_of_an_existing_run_is_refused_naming_it(spec_file, tmp_path):
    runs = runs_of(spec_file, tmp_path, grid={"ppo.lr": [1e-3, 1e-4]})
    for run in runs:
        run.run_dir.mkdir(parents=True)
        (run.run_dir / "config.yaml").write_text(to_yaml(run.cfg))
    check_unchanged(runs)  # same spec: fine
    changed = runs_of(spec_file, tmp_path, ["ppo.epochs=2"], grid={"ppo.lr": [1e-3, 1e-4]})
    with pytest.raises(SweepError) as err:
        check_unchanged(changed)
    assert "run 'lr=0.001' already exists" in str(err.value) and "ppo.epochs: 1 -> 2" in str(err.value)
    assert "run 'lr=0.0001' already exists" in str(err.value)
    # a new run added next to existing ones is fine
    check_unchanged(runs_of(spec_file, tmp_path, grid={"ppo.lr": [1e-3, 1e-4, 1e-5]}))


def test_example_spec_expands_to_eight_valid_runs(tmp_path):
    from sweep_helpers import REPO

    spec = load_spec(REPO / "configs" / "sweeps" / "gridnav_syncfrac_lr.yaml")
    runs = expand(spec, {}, tmp_path)
    assert len(runs) == 8 and spec.ranks == 2
    assert {(r.cfg.preemption.sync_frac, r.cfg.ppo.lr) for r in runs} == \
        {(0.5, 2.5e-4), (0.5, 1e-3), (1.0, 2.5e-4), (1.0, 1e-3)}
    assert yaml.safe_load(to_yaml(runs[0].cfg))["env"]["name"] == "gridnav"


def test_launch_commands_use_torchrun_for_several_ranks_and_one_array(spec_file, tmp_path):
    from ddppo.sweep.launch import sbatch_options, train_command

    spec = load_spec(spec_file(seeds=2, ranks=2, slurm=["--time=01:00:00"]))
    run = expand(spec, {}, tmp_path / "sweep")[1]
    one = train_command(run, 1)
    assert one[1:] == ["-m", "ddppo", "train", str(run.run_dir / "config.yaml"), f"run.dir={run.run_dir}"]
    two = train_command(run, 2)
    assert two[1:6] == ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "-m"]
    assert two[6:] == one[2:]
    opts = sbatch_options(spec, tmp_path / "sweep", 5, 2, ["--partition=gpu"])
    assert opts[0] == "--array=0-4%2" and "--ntasks-per-node=2" in opts and "--gres=gpu:2" in opts
    assert opts[-2:] == ["--time=01:00:00", "--partition=gpu"]  # the user's options come last and win
    assert sbatch_options(spec, tmp_path, 3, None, ["--gres=none"])[0] == "--array=0-2"
    assert not any(o.startswith("--gres=gpu") for o in sbatch_options(spec, tmp_path, 3, None, ["--gres=none"]))
