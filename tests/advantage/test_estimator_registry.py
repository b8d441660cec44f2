"""Adding an advantage estimator is one module plus one config choice: a toy estimator, registered the way a new
one would be, trains, is saved and resumes, with no other library file touched.

The files a new estimator touches (and the only places this test changes):
  ddppo/advantage/<name>.py     its module: here `ToyEstimator`, defined in this test
  ddppo/advantage/__init__.py   one line in ESTIMATORS (the registry)
  ddppo/config/schema.py        one entry in ADVANTAGES (the ppo.advantage choice; whether it learns a critic)
"""

from __future__ import annotations

import dataclasses
from types import MappingProxyType

import torch

from ddppo import checkpoint as ckpt
from ddppo.advantage import ESTIMATORS, estimator_for
from ddppo.advantage.gae import normalize_advantages
from ddppo.config import schema
from testutil import trainer_in_process


class ToyEstimator:
    """Monte-Carlo advantages: the discounted return to the rollout's end, minus the value (no bootstrap);
    carries how many rollouts it has seen (its saved state)."""

    def __init__(self, ppo, num_envs):
        self.gamma, self.rollouts, self.normalised = ppo.gamma, 0, 0

    def compute(self, storage, bootstrap_value):
        L = storage.step
        ret = torch.zeros(storage.num_envs, device=storage.device)
        storage.advantages.zero_()
        storage.returns.zero_()
        for t in reversed(range(L)):
            ret = storage.rewards[t] + self.gamma * ret * (1.0 - storage.dones[t])
            storage.returns[t] = ret
        storage.advantages[:L] = storage.returns[:L] - storage.values[:L]
        self.rollouts += 1

    def normalise(self, storage, ctx):
        self.normalised += 1
        normalize_advantages(storage.advantages[: storage.step], storage.valid[: storage.step], ctx)

    def minibatch(self, adv, valid):
        return adv

    def state_dict(self):
        return {"rollouts": self.rollouts}

    def load_state_dict(self, state):
        self.rollouts = state["rollouts"]


def register_toy(monkeypatch):
    """What adding ddppo/advantage/toy.py asks of the library: the registry line and the config choice."""
    monkeypatch.setitem(ESTIMATORS, "toy", ToyEstimator)  # ddppo/advantage/__init__.py: "toy": ToyEstimator
    monkeypatch.setitem(schema.ADVANTAGES, "toy", True)  # ddppo/config/schema.py: "toy": True (it has a critic)
    # the field's choices are tuple(ADVANTAGES), read when schema.py is imported: what re-importing it would give
    field = {f.name: f for f in dataclasses.fields(schema.PPOConfig)}["advantage"]
    monkeypatch.setattr(field, "metadata", MappingProxyType({**field.metadata, "choices": tuple(schema.ADVANTAGES)}))


def test_a_toy_estimator_is_one_module_one_registry_line_one_config_choice(tmp_path, tiny_config, monkeypatch):
    register_toy(monkeypatch)
    cfg = tiny_config(tmp_path, **{"ppo.advantage": "toy", "log.tensorboard": "false", "run.total_env_steps": 256,
                                   "checkpoint.interval_updates": 1})
    with trainer_in_process(cfg) as trainer:
        assert isinstance(trainer.advantage, ToyEstimator) and trainer.updater.advantage is trainer.advantage
        assert trainer.train() == 0 and trainer.progress.update == 2
        assert (trainer.advantage.rollouts, trainer.advantage.normalised) == (2, 2)
    assert ckpt.load(tmp_path / "checkpoints" / "ckpt-2.pt")["rank_states"][0]["advantage"] == {"rollouts": 2}
    with trainer_in_process(cfg) as resumed:  # its saved state comes back, like any owner's
        assert resumed.progress.update == 2 and resumed.advantage.rollouts == 2


def test_the_registry_and_the_config_choices_agree():
    field = {f.name: f for f in dataclasses.fields(schema.PPOConfig)}["advantage"]
    assert set(ESTIMATORS) == set(schema.ADVANTAGES) == set(field.metadata["choices"])
    for name in ESTIMATORS:
        estimator = estimator_for(schema.PPOConfig(advantage=name), num_envs=8)
        assert all(callable(getattr(estimator, m)) for m in ("compute", "normalise", "state_dict", "load_state_dict"))
