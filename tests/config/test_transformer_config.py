"""policy.transformer: what the config refuses, one line naming the key and the fix; a resume that changes the
cache's shape is refused naming the key."""

import pytest

from ddppo.checkpoint.fits import shape_changes
from ddppo.config import load_config
from ddppo.errors import ConfigError

T = "policy.rnn_type=transformer"


@pytest.mark.parametrize("overrides,named", [
    ([T, "ppo.minibatch_split=sample"], "ppo.minibatch_split=sample needs policy.rnn_type=none"),
    ([T, "policy.hidden_size=96", "policy.transformer.heads=5"], "policy.transformer.heads=5 must divide"),
    ([T, "policy.hidden_size=96", "policy.transformer.heads=32"], "policy.transformer.heads=32 must divide"),
    ([T, "env.gridnav.max_episode_steps=50", "policy.transformer.context=64"],
     r"policy.transformer.context=64 is longer than an episode \(env.gridnav.max_episode_steps=50\).*context=50"),
    ([T, "policy.transformer.positions=sinusoidal"], "policy.transformer.positions"),
    ([T, "policy.transformer.dropout=1.0"], "policy.transformer.dropout"),
])
def test_what_cannot_run_is_refused_naming_the_key(overrides, named):
    with pytest.raises(ConfigError, match=named):
        load_config(None, overrides)


def test_the_rules_apply_to_the_transformer_only():
    cfg = load_config(None, ["policy.transformer.heads=5", "policy.transformer.context=500"])  # rnn_type=gru
    assert cfg.policy.rnn_type == "gru"
    assert load_config(None, [T]).policy.transformer.context == 64  # fits gridnav's 100-step episodes


def test_a_resume_with_another_context_names_the_key():
    stored = load_config(None, [T, "policy.transformer.context=32"])
    assert "policy.transformer.context: 32 -> 64" in shape_changes(stored, load_config(None, [T]))


def test_config_prints_the_cache_size_as_a_yaml_comment(capsys):
    from ddppo.cli import main
    from ddppo.config import from_yaml_text

    assert main(["config", "gridnav", T, "policy.transformer.context=33", "env.num_envs=4"]) == 0
    out = capsys.readouterr().out
    per_env = 2 * 2 * 32 * 128 * 4 + 16  # layers x 2 x (context - 1) x hidden x 4 bytes, and len and pos
    assert f"memory per env: {per_env:,} bytes (KV cache" in out
    assert f"memory per rank: {per_env * 4 / 2**20:,.2f} MiB (env.num_envs=4" in out
    assert from_yaml_text(out, "stdout") == load_config("gridnav", [T, "policy.transformer.context=33",
                                                                   "env.num_envs=4"])


@pytest.mark.parametrize("kind", ["gru", "lstm"])
def test_config_sizes_of_a_recurrent_core(kind):
    import torch

    from ddppo.config.sizes import core_size
    from ddppo.model.recurrent import RecurrentCore

    cfg = load_config(None, [f"policy.rnn_type={kind}", "policy.rnn_layers=2", "policy.hidden_size=24"])
    core = RecurrentCore(kind, 24, 2)
    assert core_size(cfg).parameters == sum(p.numel() for p in core.parameters())
    assert core_size(cfg).memory_bytes == core.state_layers * 24 * torch.float32.itemsize
