"""Variable-experience collection (ddppo/rollout/variable.py, overlapped.py) with real env workers of different speeds:
the step budget, recurrent state per env within and across segments, and the carry-over through a
checkpoint (steps in flight are received, saved and stored first after loading)."""

import pytest
import torch

from ddppo.config import PolicyConfig, TransformerConfig
from ddppo.model import memory
from ddppo.model.policy import Policy
from ddppo.model.precision import store_memory_in
from ddppo.config import RolloutConfig
from ddppo.rollout.storage import RolloutStorage
from ddppo.envs.registry import make_vec_env
from ddppo.envs.base import EnvSpec
from testutil import OneStorage, build_collector

N, T, CAP = 4, 6, 12
# per-env step times spread by a log-normal factor (sigma 1.5) redrawn every 5-step episode
SKEWED = {"step_sleep_s": 0.002, "step_sleep_sigma": 1.5, "episode_length": 5}


class NeverStop:
    at = None

    def begin(self, update):
        pass

    def should_stop(self, update, step):
        return self.at is not None and step >= self.at

    def finished(self, update):
        pass

    def rank_weight(self, steps_per_env):  # preemption.rank_weighting off
        return 1.0

    min_steps = 1  # no floor under the variable mode's two-sided weights: nothing cuts a rollout here


class StopAt(NeverStop):
    at = 3


@pytest.fixture
def make():
    made = []

    def build(seed=0, overlap=False, preemption=None, rnn_type="gru", precision="fp32"):
        envs = make_vec_env("synthetic", SKEWED, EnvSpec(num_envs=N, seed=seed, num_workers=N))
        made.append(envs)
        torch.manual_seed(0)
        policy = Policy(envs.observation_space, envs.action_space,
                        PolicyConfig(hidden_size=8, rnn_type=rnn_type,
                                     transformer=TransformerConfig(layers=1, heads=2, context=4)))
        store_memory_in(policy, precision)  # the memory's dtypes under run.precision, as the builder keeps them
        storage = RolloutStorage(T if overlap else CAP, N, envs.observation_space, envs.action_space,
                                 policy.initial_memory(N), torch.device("cpu"))
        cfg = RolloutConfig(num_steps=T, mode="fixed" if overlap else "variable", overlap=overlap, batch_wait_s=0.0)
        collector = OneStorage(build_collector(cfg, envs, policy, preemption or NeverStop(), precision=precision),
                               storage)
        return collector, policy, storage

    yield build
    for envs in made:
        envs.close()


def snapshot(s):
    return {"obs": s.obs["obs"].clone(), "start": s.episode_start.clone(), "memory0": memory.clone(s.memory0),
            "actions": s.actions.clone(), "logp": s.logp.clone(), "rewards": s.rewards.clone(),
            "lengths": s.lengths.clone()}


@pytest.mark.parametrize("overlap", [False, True], ids=["variable", "fixed-double-buffered"])
def test_budget_and_recurrent_state_per_env_across_segments(make, overlap):
    collector, policy, s = make(overlap=overlap)
    first = collector.collect(1)
    one = snapshot(s)
    second = collector.collect(2)
    two = snapshot(s)
    for res, snap in ((first, one), (second, two)):
        assert res.env_steps == N * T == int(snap["lengths"].sum())  # one env per worker: the budget exactly
        assert res.diag["env_steps_min"] == snap["lengths"].min() and res.diag["env_steps_max"] <= CAP
        if overlap:
            assert snap["lengths"].tolist() == [T] * N and not res.preempted
    check_segments(policy, one, two)


def test_double_buffered_preemption_stops_every_env_at_the_same_step(make):
    collector, _, s = make(overlap=True, preemption=StopAt())
    res = collector.collect(1)
    assert res.preempted and s.lengths.tolist() == [3] * N and res.env_steps == 3 * N
    assert not collector.envs.in_flight


def check_segments(policy, one, two):
    # an env so slow that the others filled the budget (each up to the cap) may store no step in a segment: it has
    # nothing to replay, and the next segment starts where it was
    with torch.no_grad():
        for n in range(N):
            for snap in (one, two):  # each segment replays from its own initial state to its stored logp
                L = int(snap["lengths"][n])
                if L == 0:
                    continue
                logp, _, _ = policy.evaluate({"obs": snap["obs"][:L, n:n + 1]}, memory.select(snap["memory0"], [n]),
                                             snap["start"][:L, n:n + 1], snap["actions"][:L, n:n + 1])
                torch.testing.assert_close(logp[:, 0], snap["logp"][:L, n])
            # the next segment starts where this env's segment ended: observation, start flag, memory
            L = int(one["lengths"][n])
            if L == 0:
                h_end = memory.select(one["memory0"], [n])
            else:
                _, h_end = policy.sequence_params({"obs": one["obs"][:L, n:n + 1]}, memory.select(one["memory0"], [n]),
                                                  one["start"][:L, n:n + 1])
            torch.testing.assert_close(memory.select(two["memory0"], [n]), h_end)
            assert torch.equal(two["obs"][0, n], one["obs"][L, n])
            assert two["start"][0, n] == one["start"][L, n]


def test_steps_in_flight_survive_a_checkpoint(make):
    a, _, _ = make()
    a.collect(1)
    # every env is sent its next step as the rollout ends (or holds a finished one not yet stored)
    assert set(a.envs.in_flight) | {w.worker for w in a.unstored} == set(range(N))
    state = a.state_dict()  # receives every step in flight first
    assert not a.envs.in_flight
    unstored = state["variable"]["unstored"]
    assert sorted(u["worker"] for u in unstored) == list(range(N))
    pending = state["variable"]["pending"]
    b, _, s = make(seed=99)  # other envs, put back where a's were
    b.load_state_dict(state)
    b.collect(2)
    assert torch.equal(s.obs["obs"][0], state["obs"]["obs"])
    for u in unstored:  # stored first, as the step of the action taken before the checkpoint
        for row, n in enumerate(range(u["lo"], u["hi"])):
            assert s.actions[0, n] == pending["action"][n]
            assert torch.equal(s.obs["obs"][1, n], torch.as_tensor(u["obs"]["obs"][row]))
    assert int(s.lengths.sum()) == N * T


@pytest.mark.parametrize("saved, resumed", [("fp32", "bf16"), ("bf16", "fp32")])
def test_steps_in_flight_resume_in_the_runs_memory_dtype(make, saved, resumed):
    """A resume that changes run.precision: the memory after each step in flight takes the resumed run's dtypes, as
    the current memory does (a transformer's KV cache is bf16 under bf16, fp32 under fp32), and keeps them. Left in
    the saved dtype, every step acted on later would pass its cache through that dtype for the rest of the run."""
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}
    a, _, _ = make(rnn_type="transformer", precision=saved)
    a.collect(1)
    state = a.state_dict()
    in_flight = state["variable"]["pending"]["memory"]
    assert in_flight["k"].dtype == dtype[saved]
    b, _, _ = make(seed=99, rnn_type="transformer", precision=resumed)
    b.load_state_dict(state)
    torch.testing.assert_close(b.pending["memory"]["k"].float(), in_flight["k"].float(), rtol=1e-2, atol=1e-2)
    for collected in (False, True):  # restored, then written by acting in the resumed run
        if collected:
            b.collect(2)
        for k in ("k", "v"):
            assert b.actor.memory[k].dtype == b.pending["memory"][k].dtype == dtype[resumed]
        assert b.pending["memory"]["len"].dtype == torch.int64
