"""An advantage estimator is one registered class, the config holds only its name: a toy estimator in a module of
the working directory, registered with `@register_estimator` as a user's own would be, is chosen with
`ppo.advantage=MODULE:NAME`, has its own config rules reported with every other problem, trains, is saved and
resumes, with no library file touched. The built-in ones are registered the same way and state their needs
(critic, env groups, rules) themselves."""

from __future__ import annotations

import dataclasses
import os
import sys

import pytest

from ddppo import checkpoint as ckpt
from ddppo.advantage import estimator_class, estimator_for, register_estimator
from ddppo.advantage.estimator import MEMBERS
from ddppo.cli import main
from ddppo.config import PPOConfig, load_config
from ddppo.errors import ConfigError
from ddppo.user_code import ADVANTAGES
from testutil import trainer_in_process

TOY_MODULE = '''
import torch

from ddppo.advantage import register_estimator
from ddppo.advantage.gae import normalize_advantages
from ddppo.advantage import Advantages


@register_estimator("toy")
class ToyEstimator:
    """Monte-Carlo advantages: the discounted return to the rollout's end, minus the value (no bootstrap);
    carries how many rollouts it has seen (its saved state)."""

    critic = True

    @staticmethod
    def env_group_size(ppo):
        return 1

    @staticmethod
    def config_problems(cfg):
        if cfg.ppo.gamma == 0.5:
            raise KeyError("no rule for gamma 0.5")
        if cfg.ppo.gamma < 1:
            return []
        return [f"ppo.gamma={cfg.ppo.gamma} must be < 1 with ppo.advantage={cfg.ppo.advantage}: the toy "
                f"estimator's returns never bootstrap"]

    def __init__(self, ppo, num_envs):
        self.gamma, self.rollouts, self.normalised = ppo.gamma, 0, 0

    def compute(self, rollout):
        ret = torch.zeros(rollout.num_envs, device=rollout.rewards.device)
        returns = torch.zeros_like(rollout.rewards)
        for t in reversed(range(rollout.steps)):
            ret = rollout.rewards[t] + self.gamma * ret * (1.0 - rollout.dones[t])
            returns[t] = ret
        self.rollouts += 1
        return Advantages(returns - rollout.values, returns, rollout.valid)

    def normalise(self, adv, ctx):
        self.normalised += 1
        return adv._replace(advantages=normalize_advantages(adv.advantages, adv.mask, ctx))

    def minibatch(self, adv, valid):
        return adv

    def state_dict(self):
        return {"rollouts": self.rollouts}

    def load_state_dict(self, state):
        self.rollouts = state["rollouts"]
'''


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """A working directory holding the user's modules; what they register is undone afterwards."""
    code = tmp_path / "code"
    code.mkdir()
    monkeypatch.chdir(code)
    monkeypatch.setattr(ADVANTAGES, "_builders", dict(ADVANTAGES._builders))
    monkeypatch.setattr(ADVANTAGES, "_extra", list(ADVANTAGES._extra))
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", os.curdir, str(code))])
    for name in ("toy_adv_mod", "bad_adv_mod"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    (code / "toy_adv_mod.py").write_text(TOY_MODULE)
    return code


def test_a_users_estimator_trains_saves_and_resumes(tmp_path, workdir, tiny_config):
    cfg = tiny_config(tmp_path / "run", **{"ppo.advantage": "toy_adv_mod:toy", "log.tensorboard": "false",
                                           "run.total_env_steps": 256, "checkpoint.interval_updates": 1})
    with trainer_in_process(cfg) as trainer:
        assert type(trainer.advantage).__name__ == "ToyEstimator" and trainer.updater.advantage is trainer.advantage
        assert trainer.policy.critic is not None  # the class says it learns a critic
        assert trainer.train() == 0 and trainer.progress.update == 2
        assert (trainer.advantage.rollouts, trainer.advantage.normalised) == (2, 2)
    saved = ckpt.load(tmp_path / "run" / "checkpoints" / "ckpt-2.pt")
    assert saved["rank_states"][0]["advantage"] == {"rollouts": 2}
    with trainer_in_process(cfg) as resumed:  # its saved state comes back, like any owner's
        assert resumed.progress.update == 2 and resumed.advantage.rollouts == 2


def test_a_users_estimator_reports_its_own_config_rules(workdir):
    with pytest.raises(ConfigError) as err:
        load_config(None, ["ppo.advantage=toy_adv_mod:toy", "ppo.gamma=1.0"])
    assert ("ppo.gamma=1.0 must be < 1 with ppo.advantage=toy_adv_mod:toy: the toy estimator's returns never "
            "bootstrap") in str(err.value)
    assert load_config(None, ["ppo.advantage=toy_adv_mod:toy"]).ppo.advantage == "toy_adv_mod:toy"
    assert "toy" in list(ADVANTAGES)  # a choice, once its module is imported


def test_an_estimator_lacking_a_member_is_refused_naming_it(workdir):
    (workdir / "bad_adv_mod.py").write_text(
        "from ddppo.advantage import register_estimator\n\n\n"
        "@register_estimator('bad')\nclass Bad:\n    critic = True\n\n"
        "    def compute(self, rollout):\n        pass\n")
    with pytest.raises(ConfigError) as err:
        load_config(None, ["ppo.advantage=bad_adv_mod:bad"])
    assert ("ppo.advantage='bad_adv_mod:bad': importing 'bad_adv_mod' failed: TypeError: advantage estimator 'bad' "
            "(Bad) lacks env_group_size, config_problems, normalise, minibatch, state_dict, load_state_dict"
            ) in str(err.value)
    with pytest.raises(ConfigError, match="ppo.advantage='nope': must be one of gae, grpo"):
        load_config(None, ["ppo.advantage=nope"])


def test_the_built_in_estimators_are_the_config_choices_and_state_their_needs(capsys):
    field = {f.name: f for f in dataclasses.fields(PPOConfig)}["advantage"]
    assert field.metadata["choices"] is ADVANTAGES and ADVANTAGES.builtin == ("gae", "grpo")
    for name in ADVANTAGES.builtin:
        cls = estimator_class(PPOConfig(advantage=name))
        assert all(hasattr(cls, m) for m in MEMBERS)
        estimator = estimator_for(PPOConfig(advantage=name), num_envs=8)
        assert isinstance(estimator, cls) and all(callable(getattr(estimator, m)) for m in MEMBERS[1:])
    gae, grpo = (estimator_class(PPOConfig(advantage=n, group_size=4)) for n in ("gae", "grpo"))
    assert (gae.critic, gae.env_group_size(PPOConfig(group_size=4))) == (True, 1)
    assert (grpo.critic, grpo.env_group_size(PPOConfig(group_size=4))) == (False, 4)
    assert main(["config", "--explain", "ppo.advantage"]) == 0
    assert "    one of: gae, grpo\n" in capsys.readouterr().out
    with pytest.raises(ValueError, match="registered already"):
        register_estimator("gae")(type("Other", (), {m: None for m in MEMBERS}))


# GRPO's own rules, as the config reports them (the messages the config checks gave before GRPO stated them)
GRPO_RULES = [
    (["ppo.group_size=2"], "ppo.group_size=2 must be >= 4 with ppo.advantage=grpo: the within-group mean and std of "
                           "fewer returns are too noisy to be a baseline"),
    (["ppo.group_size=5", "env.num_envs=16"], "ppo.group_size=5 must divide env.num_envs=16 (groups never span "
                                              "ranks)"),
    (["env.name=synthetic"], "ppo.advantage=grpo needs grouped episodes, which env.name='synthetic' does not run: "
                             "use env.name=gridnav, or ppo.advantage=gae"),
    (["env.num_workers=2"], "ppo.advantage=grpo needs in-process envs (a group's members step together; got "
                            "env.num_workers=2): set env.num_workers=0"),
    (["rollout.mode=variable", "env.num_workers=4"], "rollout.mode=variable cannot run ppo.advantage=grpo: grouped "
                                                     "episodes step in lockstep; use rollout.mode=fixed"),
]


@pytest.mark.parametrize("overrides, message", GRPO_RULES, ids=[" ".join(o) for o, _ in GRPO_RULES])
def test_grpo_states_its_own_rules(overrides, message):
    with pytest.raises(ConfigError) as err:
        load_config(None, ["ppo.advantage=grpo", "env.num_envs=8", "ppo.group_size=4", *overrides])
    assert message in str(err.value)


def test_a_users_estimator_whose_rules_fail_is_one_config_error_line(workdir):
    with pytest.raises(ConfigError) as err:
        load_config(None, ["ppo.advantage=toy_adv_mod:toy", "ppo.gamma=0.5"])
    assert ("ppo.advantage='toy_adv_mod:toy': its config_problems raised KeyError: 'no rule for gamma 0.5'"
            in str(err.value))
