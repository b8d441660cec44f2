"""`ddppo bench mujoco`'s sides are valid ddppo configs carrying the published settings they claim (the runs
themselves need mujoco and SB3, and minutes: they are the benchmark, not a test)."""

from __future__ import annotations

import pytest

from ddppo.benchmarks import mujoco
from ddppo.config import load_config
from ddppo.config.loading import shipped_config


@pytest.mark.parametrize("settings", mujoco.SETTINGS)
@pytest.mark.parametrize("task", mujoco.TASKS)
def test_every_ddppo_side_is_a_valid_config_with_the_settings_values(task, settings):
    z, m = mujoco.hyper(task, settings), mujoco.MODEL[settings]
    for extra in ([], mujoco.env_split_overrides(task, settings),
                  mujoco.env_split_overrides(task, settings) + mujoco.BEFORE):
        cfg = load_config(str(shipped_config("mujoco")), mujoco.ddppo_overrides(task, settings) + extra)
        assert cfg.env.name == f"gym:{task}"
        assert cfg.env.num_envs * cfg.rollout.num_steps == m["n_steps"]  # the same samples per update as SB3
        assert cfg.env.num_envs * cfg.rollout.num_steps // cfg.ppo.num_mini_batch == z["batch_size"]
        assert (cfg.ppo.lr, cfg.ppo.gamma, cfg.ppo.epochs, cfg.ppo.clip) == (
            z["learning_rate"], z["gamma"], z["n_epochs"], z["clip_range"])
        assert cfg.ppo.lr_schedule == ("linear" if m["anneal"] else "constant")
        assert (cfg.policy.hidden_size, cfg.policy.activation, cfg.policy.init_log_std) == (
            m["width"], m["activation"], m["log_std"])
        assert cfg.policy.init == ("orthogonal" if m["ortho"] else "torch")


def test_cleanrl_settings_are_cleanrls_published_defaults():
    m, z = mujoco.MODEL["cleanrl"], mujoco.CLEANRL
    assert (m["n_steps"] // z["batch_size"], z["n_epochs"], z["learning_rate"], z["max_grad_norm"]) == (32, 10, 3e-4,
                                                                                                         0.5)
    assert (m["width"], m["activation"], m["anneal"]) == (64, "tanh", True)
    assert m["clip_value"] is False  # SB3's value loss on both sides (SB3 cannot run CleanRL's clipped one)


def test_unknown_names_and_an_ab_variant_without_overrides_are_refused(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert mujoco.main(["--tasks", "Ant-v9", "--out", str(out)]) == 2
    assert "unknown ['Ant-v9']" in capsys.readouterr().err
    assert mujoco.main(["--variants", "ddppo-ab", "--out", str(out)]) == 2
    assert "needs --ab" in capsys.readouterr().err
    assert mujoco.main(["--settings", "zoo2", "--out", str(out)]) == 2
    assert not out.exists()
