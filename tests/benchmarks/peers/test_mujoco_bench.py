"""`ddppo bench mujoco`'s sides are valid ddppo configs carrying the published settings they claim (the runs
themselves need mujoco and SB3, and minutes: they are the benchmark, not a test)."""

from __future__ import annotations

import pytest

from ddppo.benchmarks.peers import mujoco
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


@pytest.mark.parametrize("settings", mujoco.SETTINGS)
def test_the_ddppo_side_weighs_the_value_loss_as_sb3_does(settings):
    """SB3's value term is vf_coef * MSE; ddppo's is value_coef * 0.5 * MSE: the side passes twice vf_coef, so the
    two objectives are the same function of the same errors."""
    import torch
    import torch.nn.functional as F

    from ddppo.ppo.loss import ppo_loss

    task = mujoco.TASKS[0]
    cfg = load_config(str(shipped_config("mujoco")), mujoco.ddppo_overrides(task, settings))
    values, returns, zeros = torch.tensor([0.5, -2.0, 3.0]), torch.tensor([1.0, 1.0, -1.0]), torch.zeros(3)
    out = ppo_loss(zeros, zeros, zeros, zeros, values, values, returns, None, clip=0.2, clip_value_loss=False,
                   value_coef=cfg.ppo.value_coef, entropy_coef=0.0)
    sb3 = mujoco.hyper(task, settings)["vf_coef"] * F.mse_loss(returns, values)
    torch.testing.assert_close(out.total, sb3)


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
