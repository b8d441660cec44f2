"""The normalize section and policy.critic: what the config refuses, one line naming key and fix; YAML's
unquoted on/off; stored configs from before these keys keep meaning what the trainer did then."""

import pytest
import yaml

from ddppo.config import from_yaml_text, load_config, to_yaml
from ddppo.errors import ConfigError


@pytest.mark.parametrize("overrides,named", [
    (["normalize.obs=on", "policy.architecture=habitat_baselines_simple"], "normalize.obs=on needs"),
    (["policy.critic=separate", "policy.rnn_type=gru"], "policy.critic=separate needs policy.rnn_type=none"),
    (["normalize.reward=on", "rollout.overlap_learning=true"], "normalize.reward=on cannot run"),
    (["ppo.minibatch_split=sample", "policy.rnn_type=lstm"], "ppo.minibatch_split=sample needs"),
    (["normalize.update=step", "rollout.mode=variable"], "normalize.update=step needs rollout.mode=fixed"),
    (["normalize.update=step", "ppo.kl_ref.checkpoint=/tmp/ref.pt"], "normalize.update=step cannot run"),
    (["normalize.update=often"], "normalize.update"),
])
def test_what_cannot_run_is_refused_naming_the_key(overrides, named):
    with pytest.raises(ConfigError, match=named):
        load_config(None, overrides)


def test_unquoted_on_and_off_mean_the_words():
    cfg = load_config(None, ["normalize.obs=off", "normalize.reward=on"])
    assert (cfg.normalize.obs, cfg.normalize.reward) == ("off", "on")


def test_a_stored_config_without_the_keys_keeps_the_old_behaviour():
    data = yaml.safe_load(to_yaml(load_config(None, [])))
    del data["normalize"], data["policy"]["critic"]  # as written before issue 34
    cfg = from_yaml_text(yaml.safe_dump(data), "old")
    assert (cfg.normalize.obs, cfg.normalize.reward, cfg.policy.critic) == ("off", "off", "shared")
    fresh = from_yaml_text(to_yaml(load_config(None, [])), "new")
    assert (fresh.normalize.obs, fresh.normalize.reward, fresh.policy.critic) == ("auto", "auto", "auto")
