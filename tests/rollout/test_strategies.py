"""Rollout strategies behind one interface (ddppo/rollout/factory.py): the factory builds the lockstep,
overlapped or variable collector the rollout config asks for and refuses what none can run; config validation
refuses the same combinations before anything starts (one line naming the key and the fix, exit 2); the
asynchronous worker API is the one declared in envs/base.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from ddppo.config import PolicyConfig, RolloutConfig, load_config
from ddppo.errors import ConfigError
from ddppo.model.policy import Policy
from ddppo.rollout.collector import RolloutCollector
from ddppo.rollout.factory import storage_steps
from ddppo.rollout.lockstep import LockstepCollector
from ddppo.rollout.overlapped import OverlappedCollector
from ddppo.rollout.storage import RolloutStorage
from ddppo.rollout.variable import VariableCollector
from ddppo.envs.base import AsyncVecEnv, worker_count
from ddppo.envs.registry import make_vec_env
from ddppo.envs.base import EnvSpec
from rollout_testutil import NeverStop
from testutil import OneStorage, build_collector

GRIDNAV = str(Path(__file__).resolve().parents[2] / "configs" / "gridnav.yaml")


@pytest.fixture
def build():
    made = []

    def make(cfg: RolloutConfig, workers: int, **normalization):
        envs = make_vec_env("synthetic", {}, EnvSpec(num_envs=4, seed=0, num_workers=workers))
        made.append(envs)
        policy = Policy(envs.observation_space, envs.action_space, PolicyConfig(hidden_size=8, rnn_type="gru"))
        storage = RolloutStorage(storage_steps(cfg), 4, envs.observation_space, envs.action_space,
                                 policy.initial_memory(4), torch.device("cpu"))
        return OneStorage(build_collector(cfg, envs, policy, NeverStop(),
                              **normalization), storage), envs

    yield make
    for envs in made:
        envs.close()


@pytest.mark.parametrize("cfg, workers, cls", [
    (RolloutConfig(num_steps=4), 0, LockstepCollector),
    (RolloutConfig(num_steps=4), 2, LockstepCollector),
    (RolloutConfig(num_steps=4, overlap=True), 2, OverlappedCollector),
    (RolloutConfig(num_steps=4, mode="variable"), 4, VariableCollector),
], ids=["lockstep", "lockstep-workers", "overlapped", "variable"])
def test_the_factory_builds_the_strategy_the_config_names(build, cfg, workers, cls):
    collector, envs = build(cfg, workers)
    assert type(collector.collector) is cls and isinstance(collector.collector, RolloutCollector)
    assert isinstance(envs, AsyncVecEnv) == (workers > 0) and worker_count(envs) == workers
    res = collector.collect(1)  # the one interface: collect, state_dict, load_state_dict
    assert res.env_steps == 4 * cfg.num_steps
    state = collector.state_dict()
    assert ("variable" in state) == (cfg.mode == "variable")
    collector.load_state_dict(state)
    assert collector.collect(2).env_steps == 4 * cfg.num_steps


@pytest.mark.parametrize("cfg, workers", [
    (RolloutConfig(num_steps=4), 0), (RolloutConfig(num_steps=4), 2),
    (RolloutConfig(num_steps=4, overlap=True), 2), (RolloutConfig(num_steps=4, mode="variable"), 4),
], ids=["lockstep", "lockstep-workers", "overlapped", "variable"])
def test_every_strategy_stores_the_rewards_its_scale_returns(build, cfg, workers):
    """The scoring stage's scale (normalize.reward's scaler) sees every env's numpy rewards and done flags on the
    host, with the envs' indices where a batch is some of them, and what it returns is what the scored rollout
    holds."""
    seen = []

    def scale(reward, done, envs=None):
        assert isinstance(reward, np.ndarray) and done.dtype == bool
        seen.extend(range(len(reward)) if envs is None else envs.tolist())
        return np.full(len(reward), 7.0, np.float32)

    collector, envs = build(cfg, workers, scale=scale)
    rollout = collector.collect(1).rollout
    valid = rollout.valid > 0
    assert valid.any() and torch.all(rollout.rewards[valid] == 7.0)  # synthetic envs do not truncate here
    assert sorted(set(seen)) == [0, 1, 2, 3] and len(seen) == 4 * cfg.num_steps


@pytest.mark.parametrize("cfg, workers, needle", [
    (RolloutConfig(overlap=True), 0, "rollout.overlap=true needs env.num_workers >= 2"),
    (RolloutConfig(overlap=True), 1, "rollout.overlap=true needs env.num_workers >= 2"),
    (RolloutConfig(overlap=True, mode="variable"), 4, "rollout.overlap=true applies to rollout.mode=fixed"),
    (RolloutConfig(mode="variable"), 0, "rollout.mode=variable steps envs asynchronously"),
])
def test_the_factory_refuses_what_no_strategy_can_run(build, cfg, workers, needle):
    with pytest.raises(ValueError, match=needle):
        build(cfg, workers)


def test_a_saved_state_of_one_strategy_does_not_load_into_another(build):
    variable, _ = build(RolloutConfig(num_steps=4, mode="variable"), 4)
    lockstep, _ = build(RolloutConfig(num_steps=4), 0)
    with pytest.raises(ValueError, match="other rollout.mode"):
        lockstep.load_state_dict(variable.state_dict())
    with pytest.raises(ValueError, match="other rollout.mode"):
        variable.load_state_dict(lockstep.state_dict())


@pytest.mark.parametrize("overrides, needles", [
    (["rollout.overlap=true"], ["rollout.overlap=true needs env.num_workers >= 2", "got 0",
                                "set env.num_workers=2 or more"]),
    (["rollout.overlap=true", "env.num_workers=1", "env.num_envs=4", "ppo.num_mini_batch=2"],
     ["rollout.overlap=true needs env.num_workers >= 2", "got 1"]),
    (["rollout.overlap=true", "rollout.mode=variable", "env.num_workers=4"],
     ["rollout.overlap=true applies to rollout.mode=fixed only", "rollout.overlap=false"]),
    (["ppo.advantage=grpo", "ppo.group_size=4", "env.num_workers=4"],
     ["ppo.advantage=grpo needs in-process envs", "env.num_workers=0"]),
    (["ppo.advantage=grpo", "ppo.group_size=4", "env.name=synthetic"],
     ["ppo.advantage=grpo needs grouped episodes", "env.name='synthetic'", "env.name=gridnav"]),
    (["ppo.advantage=grpo", "ppo.group_size=4", "env.name=gym:CartPole-v1"], ["env.name='gym:CartPole-v1'"]),
])
def test_config_validation_refuses_combinations_no_strategy_runs(overrides, needles):
    with pytest.raises(ConfigError) as err:
        load_config(GRIDNAV, overrides)
    for needle in needles:
        assert needle in str(err.value), err.value


def test_the_accepted_combinations_pass_validation():
    for overrides in (["rollout.overlap=true", "env.num_workers=2"], ["ppo.advantage=grpo", "ppo.group_size=4"],
                      ["rollout.mode=variable", "env.num_workers=4", "rollout.idle_envs=wait",
                       "rollout.importance_weights=true"]):
        load_config(GRIDNAV, overrides)


@pytest.mark.multiprocess
def test_the_cli_refuses_overlap_without_workers_in_one_line(cli, tmp_path):
    run = tmp_path / "run"
    res = cli("train", GRIDNAV, f"run.dir={run}", "rollout.overlap=true")
    assert res.returncode == 2, res
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "rollout.overlap=true needs env.num_workers >= 2" in lines[0], res.stderr
    assert "Traceback" not in res.stderr and not run.exists()
