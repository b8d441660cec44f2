"""Config schema and validation (ddppo/config.py), through the CLI's own `main()` in-process.

tests/integration/test_cli.py runs the same kinds of error through a real `python -m ddppo`
process; here they are fast, so every case is covered.
"""

import dataclasses
import math
from pathlib import Path

import pytest

from ddppo import config as C
from ddppo.config import loading
from ddppo.cli import main

REPO = Path(__file__).resolve().parents[2]
GRIDNAV = str(REPO / "configs" / "gridnav.yaml")


def run_main(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def assert_user_error(rc, out, err, *needles):
    assert rc == 2, err
    assert "Traceback" not in err and "Traceback" not in out
    assert err.startswith("ddppo: config error: ") and err.count("ddppo:") == 1, err
    for needle in needles:
        assert needle in err, f"{needle!r} not in {err!r}"


# (overrides or YAML text, strings the one message must contain)
OVERRIDE_ERRORS = [
    (["ppo.foo=1"], ["ppo.foo"]),                                       # unknown key
    (["env.gridnav.no_such=3"], ["env.gridnav.no_such"]),               # unknown nested key
    (["nosection.x=1"], ["nosection"]),                                 # unknown section
    (["ppo.lr=abc"], ["ppo.lr", "abc"]),                                # wrong type
    (["ppo.epochs=2.5"], ["ppo.epochs", "2.5"]),                        # float for int
    (["ppo.clip_value_loss=maybe"], ["ppo.clip_value_loss", "maybe"]),  # not a bool
    (["ppo.clip=-0.1"], ["ppo.clip=-0.1"]),                             # out of range
    (["preemption.sync_frac=1.5"], ["preemption.sync_frac=1.5"]),
    (["ppo.gamma=1.01"], ["ppo.gamma=1.01"]),
    (["env.num_envs=0"], ["env.num_envs=0"]),
    (["ppo.lr=nan"], ["ppo.lr=nan"]),                                   # non-finite
    (["ppo.value_coef=inf"], ["ppo.value_coef=inf"]),
    (["ppo.num_mini_batch=3"], ["ppo.num_mini_batch=3", "env.num_envs=32"]),  # inconsistent combination
    (["env.num_envs=6", "ppo.num_mini_batch=4"], ["ppo.num_mini_batch=4", "env.num_envs=6"]),
    (["env.name=nowhere"], ["env.name", "nowhere", "gridnav"]),         # unknown env, the fix lists names
    (["env.gridnav.map_size=3"], ["env.gridnav.map_size=3"]),           # env option range
    (["log.level=loud"], ["log.level", "loud"]),                        # not one of the choices
    (["ppo=3"], ["ppo=3"]),                                             # a value for a whole section
    (["ppo.lr"], ["ppo.lr", "key=value"]),                              # malformed override
    (["rollout.mode=lazy"], ["rollout.mode", "lazy", "fixed, variable"]),
    (["rollout.mode=variable"], ["rollout.mode=variable", "env.num_workers > 0"]),  # needs async workers
    (["rollout.mode=variable", "env.num_workers=4", "ppo.advantage=grpo"], ["rollout.mode=variable", "grpo"]),
    (["rollout.mode=variable", "env.num_workers=4", "ppo.kl_ref.checkpoint=x.pt"], ["ppo.kl_ref.checkpoint"]),
    (["rollout.max_env_steps_factor=0.5"], ["rollout.max_env_steps_factor=0.5", ">= 1"]),
    (["ppo.kl_ref.tolerance=1"], ["ppo.kl_ref.tolerance=1.0 must be > 1"]),  # ranges hold with or without a
    (["ppo.kl_ref.beta=-0.5", "ppo.kl_ref.checkpoint=x.pt"], ["ppo.kl_ref.beta=-0.5 must be >= 0"]),  # checkpoint
]


@pytest.mark.parametrize("overrides,needles", OVERRIDE_ERRORS, ids=lambda x: " ".join(x) if x and "=" in x[0]
                         else None)
def test_override_errors_exit_2_naming_key_and_value(capsys, overrides, needles):
    assert_user_error(*run_main(capsys, "config", GRIDNAV, *overrides), *needles)


# (YAML text, strings the message must contain, whether it must name the file)
YAML_ERRORS = [
    ("ppo:\n  foo: 1\n", ["ppo.foo"], True),
    ("ppo:\n  lr: fast\n", ["ppo.lr", "fast"], True),
    ("ppo: 5\n", ["ppo=5"], True),
    ("run: [1, 2\nppo: {\n", ["not valid YAML", "line"], True),   # syntax error
    ("- a\n- b\n", ["mapping"], True),                             # YAML, but not a mapping
    # range and cross-field checks run on the merged config: they name key and value
    ("ppo:\n  clip: 0\n", ["ppo.clip=0"], False),
    ("env:\n  num_envs: 8\nppo:\n  num_mini_batch: 3\n", ["ppo.num_mini_batch=3", "env.num_envs=8"], False),
    ("env:\n  name: gridnavv\n", ["env.name", "gridnavv"], False),
]


@pytest.mark.parametrize("text,needles,names_file", YAML_ERRORS)
def test_yaml_file_errors_exit_2(capsys, tmp_path, text, needles, names_file):
    path = tmp_path / "exp.yaml"
    path.write_text(text)
    assert_user_error(*run_main(capsys, "config", str(path)), *needles, *([str(path)] if names_file else []))


def test_missing_file(capsys, tmp_path):
    missing = str(tmp_path / "nope.yaml")
    assert_user_error(*run_main(capsys, "config", missing), missing, "does not exist")


def test_directory_instead_of_file(capsys, tmp_path):
    assert_user_error(*run_main(capsys, "config", str(tmp_path)), str(tmp_path))


def test_binary_file(capsys, tmp_path):
    path = tmp_path / "weights.yaml"
    path.write_bytes(bytes(range(256)) * 4)
    assert_user_error(*run_main(capsys, "config", str(path)), str(path), "not a YAML")


def test_every_problem_reported_at_once(capsys):
    rc, out, err = run_main(capsys, "config", GRIDNAV, "ppo.clip=0", "ppo.gamma=2.0", "ppo.num_mini_batch=5")
    assert_user_error(rc, out, err, "ppo.clip=0", "ppo.gamma=2.0", "ppo.num_mini_batch=5")
    assert out == ""
    assert "(3 problems): " in err and "\\n" not in err, err  # one readable line, not escaped newlines


def test_a_key_into_a_list_is_refused_by_name(capsys):
    """`a.list.x=0` made omegaconf's merge raise a bare TypeError (a traceback; found by the CLI fuzz test)."""
    rc, out, err = run_main(capsys, "config", GRIDNAV, "env.habitat_lab.overrides.x=0")
    assert_user_error(rc, out, err, "env.habitat_lab.overrides is a list", "env.habitat_lab.overrides=[...]")


def test_train_with_bad_config_writes_nothing(capsys, tmp_path):
    run_dir = tmp_path / "run"
    for bad in (["ppo.foo=1"], ["ppo.lr=abc"], ["ppo.num_mini_batch=3"], ["env.name=nowhere"]):
        assert_user_error(*run_main(capsys, "train", GRIDNAV, f"run.dir={run_dir}", *bad), bad[0].split("=")[0])
        assert not run_dir.exists()
    assert_user_error(*run_main(capsys, "train", str(tmp_path / "nope.yaml"), f"run.dir={run_dir}"))
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------------------ valid configs
def test_config_prints_resolved_yaml_that_round_trips(capsys):
    rc, out, err = run_main(capsys, "config", GRIDNAV, "ppo.lr=0.001", "env.gridnav.map_size=9")
    assert rc == 0, err
    cfg = C.from_yaml_text(out, "stdout")
    assert cfg == C.load_config(GRIDNAV, ["ppo.lr=0.001", "env.gridnav.map_size=9"])
    assert cfg.ppo.lr == 0.001 and cfg.env.gridnav.map_size == 9
    assert "num_mini_batch" in out and "keep_last" in out  # every key, not just the file's


def test_merge_order_schema_yaml_cli(tmp_path):
    path = tmp_path / "exp.yaml"
    path.write_text("ppo:\n  lr: 0.01\n  epochs: 7\nenv:\n  num_envs: 8\n")
    cfg = C.load_config(path, ["ppo.lr=0.02"])
    assert cfg.ppo.lr == 0.02                                   # CLI beats YAML
    assert cfg.ppo.epochs == 7                                  # YAML beats schema
    assert cfg.ppo.clip == C.PPOConfig().clip                   # schema default
    assert cfg.env.num_envs == 8
    assert C.load_config(None).ppo.lr == C.PPOConfig().lr


def test_required_keys_exist_with_these_names():
    cfg = C.load_config(GRIDNAV)
    for key in ("run.dir", "run.seed", "run.total_env_steps", "env.name", "env.num_envs", "rollout.num_steps",
                "preemption.sync_frac", "preemption.min_rollout_fraction", "ppo.lr", "ppo.clip", "ppo.epochs",
                "ppo.num_mini_batch", "checkpoint.interval_updates", "checkpoint.keep_last"):
        C.get_key(cfg, key)
    for key in C.SHAPE_KEYS:
        C.get_key(cfg, key)


def test_config_is_frozen():
    cfg = C.load_config(GRIDNAV)
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.ppo.lr = 1.0  # type: ignore[misc]
    assert cfg.steps_per_rank_update == cfg.env.num_envs * cfg.rollout.num_steps


def test_schema_merges_into_every_section_on_any_omegaconf():
    # OmegaConf.structured() flags every frozen dataclass node read-only; omegaconf 2.3's merge
    # lifts that only on the root, so a nested key (run.dir) could not be set there. The schema
    # that layers merge onto must therefore have no read-only node, whatever omegaconf is installed.
    from omegaconf import DictConfig, OmegaConf

    def read_only(node, prefix=""):
        found = [prefix or "<root>"] if OmegaConf.is_readonly(node) else []
        for key in node:
            if isinstance(node[key], DictConfig):
                found += read_only(node[key], f"{prefix}{key}.")
        return found

    assert read_only(loading._schema()) == []
    overrides = ["run.dir=elsewhere", "dist.timeout_s=9", "env.gridnav.map_size=9", "ppo.kl_ref.beta=0.5",
                 "policy.resnet_layers=[3,4,6,3]", "env.synthetic.slow_ranks=[1]", "eval.video_fps=4"]
    cfg = C.load_config(GRIDNAV, overrides)
    assert (cfg.run.dir, cfg.dist.timeout_s, cfg.env.gridnav.map_size, cfg.ppo.kl_ref.beta) == ("elsewhere", 9, 9, 0.5)
    assert list(cfg.policy.resnet_layers) == [3, 4, 6, 3] and list(cfg.env.synthetic.slow_ranks) == [1]
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.run.dir = "x"  # type: ignore[misc]


def _sections(cls):
    yield cls
    for f in dataclasses.fields(cls):
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        if dataclasses.is_dataclass(default):
            yield from _sections(type(default))


def test_every_field_has_a_one_line_doc():
    """Field help lives in the field metadata (shown by `ddppo config --explain`), one line each."""
    for cls in _sections(C.Config):
        if cls is not C.Config:
            assert (cls.__doc__ or "").strip(), f"{cls.__name__} has no docstring"
    keys = list(C.fields_of())
    assert len(keys) > 80
    for key, f in keys:
        help_ = f.metadata.get("help", "")
        assert help_.strip() and "\n" not in help_, f"{key} has no one-line help (field metadata)"


def test_shape_keys_come_from_the_metadata():
    assert set(C.SHAPE_KEYS) == {
        "env.name", "policy.architecture", "policy.hidden_size", "policy.mlp_layers", "policy.rnn_type",
        "policy.rnn_layers", "policy.image_encoder", "policy.vector_encoder", "policy.resnet_base_width", "policy.resnet_layers",
        "policy.resnet_bottleneck", "policy.critic", "policy.activation", "policy.freeze_encoder", "normalize.obs",
        "policy.transformer.layers",
        "policy.transformer.heads", "policy.transformer.context", "policy.transformer.positions",
        "ppo.advantage", "env.gridnav.num_rays", "env.gridnav.camera", "env.gridnav.camera_size",
        "env.gridnav.camera_depth_dtype", "env.gridnav.goal_sensor", "env.synthetic.obs_dim",
        "env.synthetic.num_actions", "env.synthetic.num_scenes",
        "reward.model", "reward.weights", "reward.kwargs", "reward.mode", "env.gym.drop_keys", "env.gym.atari"}  # a resume with another model is refused


def test_config_explain_and_help_keys(capsys):
    from ddppo.cli import main

    assert main(["config", "--explain", "policy.hidden_size"]) == 0
    out = capsys.readouterr().out
    assert "policy.hidden_size: int = 128" in out and "width of the encoders" in out and "shape:" in out
    assert main(["config", str(GRIDNAV), "ppo.lr=0.5", "--explain", "ppo.lr"]) == 0
    assert "(here: 0.5)" in capsys.readouterr().out
    assert main(["config", "--help-keys"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(list(C.fields_of())) and any(ln.startswith("eval.rank_wait_s ") for ln in lines)
    assert main(["config", "--explain", "ppo.no_such_key"]) == 2
    assert "not a config key" in capsys.readouterr().err


def test_diff_keys():
    a = C.load_config(GRIDNAV)
    b = C.load_config(GRIDNAV, ["ppo.lr=0.123", "policy.hidden_size=7", "env.gridnav.num_rays=5"])
    assert sorted(C.diff_keys(a, b)) == ["env.gridnav.num_rays", "policy.hidden_size", "ppo.lr"]
    assert C.diff_keys(a, a) == []
    assert set(C.diff_keys(a, b)) & set(C.SHAPE_KEYS) == {"env.gridnav.num_rays", "policy.hidden_size"}


def test_all_shipped_configs_are_valid():
    for path in sorted((REPO / "configs").glob("*.yaml")):
        cfg = C.load_config(path)
        assert not C.problems(cfg), path
        assert all(math.isfinite(v) for v in (cfg.ppo.lr, cfg.ppo.clip))
