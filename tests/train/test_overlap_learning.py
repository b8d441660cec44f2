"""rollout.overlap_learning in one process: the acting policy lags the learner by exactly one update, the
modes it runs with, what it refuses, and what a checkpoint holds of it."""

from __future__ import annotations

import pytest
import torch

from ddppo.config import load_config
from ddppo.errors import ConfigError
from ddppo.model.policy import Policy

GRIDNAV = "configs/gridnav.yaml"


def _spy_on_updates(trainer) -> list[dict]:
    """Record, for every update, the weights it starts from and the rollout it learns on (copies)."""
    records: list[dict] = []
    update = trainer.updater.update

    def spy(rollout, *args, **kwargs):
        records.append({
            "before": {k: v.detach().clone() for k, v in trainer.policy.state_dict().items()},
            "obs": {k: v.clone() for k, v in rollout.obs.items()}, "start": rollout.episode_start.clone(),
            "memory": {k: v.clone() for k, v in rollout.memory.items()}, "actions": rollout.actions.clone(),
            "logp": rollout.logp.clone(), "valid": rollout.valid.clone()})
        return update(rollout, *args, **kwargs)

    trainer.updater.update = spy
    return records


def _logp_gap(trainer, weights: dict, rec: dict) -> float:
    """Largest |stored behaviour log-prob - log-prob under `weights`| over the rollout's valid steps."""
    policy = Policy(trainer.envs.observation_space, trainer.envs.action_space, trainer.cfg.policy)
    policy.load_state_dict(weights)
    with torch.no_grad():
        logp = policy.evaluate(rec["obs"], rec["memory"], rec["start"], rec["actions"])[0]
    return float(((logp - rec["logp"]).abs() * rec["valid"]).max())


def lag_check(tmp_path, overrides: list[str], lag: int) -> None:
    from testutil import trainer_in_process

    cfg = load_config(GRIDNAV, [f"run.dir={tmp_path / 'run'}", "env.num_envs=4", "rollout.num_steps=16",
                                "ppo.num_mini_batch=2", "ppo.epochs=2", "policy.hidden_size=32", "ppo.lr=0.01",
                                "run.total_env_steps=320", "run.torch_threads=1", "dist.device=cpu",
                                "log.tensorboard=false", "checkpoint.interval_updates=1000", *overrides])
    with trainer_in_process(cfg) as trainer:
        records = _spy_on_updates(trainer)
        assert trainer.train() == 0
    assert len(records) == 5
    for k in range(1, len(records)):
        behaviour = records[max(k - lag, 0)]["before"]  # the weights before update k + 1 - lag
        newer = records[k]["before"] if lag else records[k - 1]["before"]
        assert _logp_gap(trainer, behaviour, records[k]) < 1e-4, f"rollout {k + 1}: not the expected weights"
        assert _logp_gap(trainer, newer, records[k]) > 1e-3, f"rollout {k + 1}: weights indistinguishable"


@pytest.mark.parametrize("on,lag", [("false", 0), ("true", 1)], ids=["serial", "overlap_learning"])
def test_acting_policy_lags_exactly_one_update(tmp_path, on, lag):
    """Rollout k+1's behaviour log-probs are those of the weights before update k (serial: after it)."""
    lag_check(tmp_path, [f"rollout.overlap_learning={on}"], lag)


def test_acting_policy_lags_exactly_one_update_with_overlapped_workers(tmp_path):
    lag_check(tmp_path, ["rollout.overlap_learning=true", "rollout.overlap=true", "env.num_workers=2"], 1)


def test_refuses_what_it_cannot_run_naming_the_keys():
    with pytest.raises(ConfigError) as err:
        load_config(GRIDNAV, ["rollout.overlap_learning=true", "rollout.mode=variable", "env.num_workers=2",
                              "rollout.idle_envs=wait"])
    assert "rollout.overlap_learning=true" in str(err.value) and "rollout.idle_envs=wait" in str(err.value)
    # what it runs with: lockstep, overlapped halves, variable (envs stepping on), GRPO
    for extra in ([], ["rollout.overlap=true", "env.num_workers=2"],
                  ["rollout.mode=variable", "env.num_workers=2"],
                  ["env.name=gridnav", "ppo.advantage=grpo", "ppo.group_size=4", "env.num_envs=8"]):
        assert load_config(GRIDNAV, ["rollout.overlap_learning=true", *extra]).rollout.overlap_learning


def test_a_checkpoint_holds_no_collector_state_and_resume_starts_fresh_episodes(tmp_path, caplog):
    """The rollout collected but not learned on is dropped: nothing of the collector is saved."""
    from ddppo import checkpoint as ckpt
    from testutil import trainer_in_process

    base = [f"run.dir={tmp_path / 'run'}", "env.num_envs=4", "rollout.num_steps=16", "ppo.num_mini_batch=2",
            "policy.hidden_size=32", "run.torch_threads=1", "dist.device=cpu", "log.tensorboard=false",
            "checkpoint.interval_updates=1", "rollout.overlap_learning=true"]
    with trainer_in_process(load_config(GRIDNAV, base + ["run.total_env_steps=128"])) as trainer:
        assert trainer.train() == 0
        assert trainer.learning.ready is not None  # the next rollout was collected, not learned on
    _, data = ckpt.newest_valid(tmp_path / "run")
    assert data["counters"]["env_steps"] == 128 and data["counters"]["update"] == 2
    assert "obs" not in data["rank_states"][0] and "rng" in data["rank_states"][0]
    with trainer_in_process(load_config(GRIDNAV, base + ["run.total_env_steps=256"])) as trainer:
        assert (trainer.progress.update, trainer.progress.env_steps) == (2, 128)
        assert trainer.learning.ready is None
        assert trainer.train() == 0
        assert (trainer.progress.update, trainer.progress.env_steps) == (4, 256)


def test_two_runs_are_bit_identical(tmp_path):
    """The learner draws its minibatches from its own generator: the threads' timing changes nothing."""
    from testutil import trainer_in_process

    weights = []
    for run in ("a", "b"):
        cfg = load_config(GRIDNAV, [f"run.dir={tmp_path / run}", "env.num_envs=4", "rollout.num_steps=16",
                                    "ppo.num_mini_batch=2", "policy.hidden_size=32", "run.torch_threads=1",
                                    "dist.device=cpu", "log.tensorboard=false", "run.total_env_steps=256",
                                    "rollout.overlap_learning=true"])
        with trainer_in_process(cfg) as trainer:
            assert trainer.train() == 0
            weights.append({k: v.clone() for k, v in trainer.policy.state_dict().items()})
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])


def test_the_learner_thread_hands_back_its_result_or_its_error_and_runs_one_call_at_a_time():
    from ddppo.distributed import PeerLostError
    from ddppo.train.overlap_learning import LearnerThread

    learner = LearnerThread(torch.device("cpu"))
    learner.start(lambda a, b: (a + b, torch.get_num_threads()), 1, 2)
    with pytest.raises(RuntimeError, match="still running"):
        learner.start(lambda: None)
    assert learner.join() == (3, torch.get_num_threads())  # the main thread's torch threads, on the learner's

    def lost():
        raise PeerLostError("rank 0: gradient all-reduce failed: peer rank(s) [1] lost")

    learner.start(lost)
    with pytest.raises(PeerLostError, match=r"\[1\] lost"):
        learner.join()
    assert not learner.running


@pytest.mark.parametrize("rnn", ["gru", "lstm"])
def test_the_acting_copy_flattens_its_recurrent_weights(monkeypatch, rnn):
    """deepcopy copies an RNN's weights one by one; on CUDA cuDNN then warns and repacks them on every acting
    step unless the copy calls flatten_parameters (counted here on the copy's own modules; a no-op on CPU)."""
    import gymnasium
    import numpy as np

    from ddppo.config import PolicyConfig
    from ddppo.train.overlap_learning import acting_copy

    calls: list[int] = []
    real = torch.nn.RNNBase.flatten_parameters
    monkeypatch.setattr(torch.nn.RNNBase, "flatten_parameters", lambda self: (calls.append(id(self)), real(self)))
    obs = gymnasium.spaces.Dict({"obs": gymnasium.spaces.Box(-np.inf, np.inf, (3,), np.float32)})
    policy = Policy(obs, gymnasium.spaces.Discrete(2), PolicyConfig(hidden_size=8, rnn_type=rnn, rnn_layers=2))
    calls.clear()
    acting = acting_copy(policy)
    rnns = [id(m) for m in acting.modules() if isinstance(m, torch.nn.RNNBase)]
    assert len(rnns) == 1 and calls == rnns
    assert not any(p.requires_grad for p in acting.parameters())
