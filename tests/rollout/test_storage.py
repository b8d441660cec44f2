"""Rollout storage (ddppo/rollout/storage.py) and the rollout value it returns (ddppo/rollout/rollout.py): layout,
valid mask, bootstrap; and the collector filling it (preemption, truncation bootstrap). The minibatches cut from
it: tests/ppo/test_batches.py."""

import gymnasium
import numpy as np
import pytest
import torch

from ddppo.config import PolicyConfig
from ddppo.timing import Timer
from ddppo.model.policy import Policy
from ddppo.rollout.acting import Actor
from ddppo.rollout.factory import episode_observers
from ddppo.rollout.lockstep import LockstepCollector
from ddppo.rollout.scoring import Scoring
from ddppo.advantage.gae import gae, rollout_gae
from ddppo.ppo.batches import minibatches
from ddppo.rollout.storage import RolloutStorage
from ddppo.envs.base import EpisodeInfo, StepResult

from rollout_testutil import fill, make_storage, obs_at

def test_dtypes_and_shapes():
    s = make_storage()
    assert s.obs["img"].dtype == torch.uint8 and s.obs["img"].shape == (7, 4, 4, 4, 1)
    assert s.obs["vec"].shape == (7, 4, 3)
    assert s.actions.dtype == torch.long and s.actions.shape == (6, 4)
    assert s.values.shape == (6, 4)
    box = make_storage(action_space=gymnasium.spaces.Box(-1, 1, (2,), np.float32))
    assert box.actions.dtype == torch.float32 and box.actions.shape == (6, 4, 2)


def test_begin_and_insert_layout():
    s = make_storage()
    hidden = fill(s, 3, done_at={(1, 2)})
    assert s.step == 3
    assert torch.equal(s.memory0["rnn"], hidden)
    for t in range(4):  # obs[t] is what the action at t saw; obs[t+1] is what the step returned
        torch.testing.assert_close(s.obs["vec"][t], obs_at(t)["vec"])
        assert torch.equal(s.obs["img"][t], obs_at(t)["img"])
    for t in range(3):
        assert torch.equal(s.actions[t], torch.full((4,), t))
        torch.testing.assert_close(s.values[t], 10.0 * t + torch.arange(4.0))
        torch.testing.assert_close(s.rewards[t], t + torch.arange(4.0) / 100)
        torch.testing.assert_close(s.logp[t], torch.full((4,), -0.1 * t))
    # episode_start[0] from begin; episode_start[t+1] = done[t]
    assert torch.equal(s.episode_start[0], torch.ones(4))
    assert torch.equal(s.dones[1], torch.tensor([0.0, 0.0, 1.0, 0.0]))
    assert torch.equal(s.episode_start[2], torch.tensor([0.0, 0.0, 1.0, 0.0]))
    assert torch.equal(s.episode_start[1], torch.zeros(4))
    # a new rollout starts from step 0 again
    s.begin(obs_at(9), torch.zeros(4), {"rnn": torch.zeros_like(s.memory0["rnn"])})
    assert s.step == 0 and torch.equal(s.obs["img"][0], obs_at(9)["img"])
    assert torch.equal(s.episode_start[0], torch.zeros(4))


def test_valid_mask_after_preempted_rollout():
    s = make_storage(T=6)
    fill(s, 6)
    assert torch.equal(s.valid, torch.ones(6, 4))
    fill(s, 2)  # preempted after 2 of 6 steps
    expected = torch.zeros(6, 4)
    expected[:2] = 1.0
    assert torch.equal(s.valid, expected)


def test_the_rollout_is_a_view_of_the_collected_steps():
    s = make_storage(T=6)
    hidden = fill(s, 4, done_at={(1, 2)})
    boot = torch.tensor([3.0, -2.0, 0.5, 7.0])
    r = s.rollout(boot, rank_weight=2.0)
    assert r.steps == 4 and r.num_envs == 4 and r.rank_weight == 2.0 and r.lengths is None
    assert torch.equal(r.values, s.values[:4]) and torch.equal(r.rewards, s.rewards[:4])
    assert torch.equal(r.obs["vec"], s.obs["vec"][:4]) and torch.equal(r.episode_start, s.episode_start[:4])
    assert torch.equal(r.memory["rnn"], hidden) and torch.equal(r.bootstrap, boot)
    assert torch.equal(r.valid, torch.ones(4, 4))
    changed = r.replace(rewards=torch.zeros(4, 4))  # a reward model's scored rollout: a new value
    assert torch.equal(r.rewards, s.rewards[:4]) and not changed.rewards.any()


@pytest.mark.parametrize("L", [6, 4, 1])
def test_gae_of_a_rollout_bootstraps_after_its_last_step(L):
    s = make_storage(T=6)
    fill(s, 6, done_at={(0, 1)})  # a full earlier rollout leaves stale data in every row
    fill(s, L, done_at={(0, 1)})
    last = torch.tensor([3.0, -2.0, 0.5, 7.0])
    values_before = s.values.clone()
    out = rollout_gae(s.rollout(last), 0.9, 0.8)
    assert torch.equal(s.values, values_before)  # the estimator writes nothing into the rollout
    values = torch.cat([s.values[:L], last[None]])
    adv, ret = gae(s.rewards[:L], values, s.dones[:L], 0.9, 0.8)
    torch.testing.assert_close(out.advantages, adv)
    torch.testing.assert_close(out.returns, ret)
    assert out.advantages.shape == (L, 4) and torch.equal(out.mask, torch.ones(L, 4))
    # the last collected step bootstraps from `last` (hand check, env 0 never done)
    delta = s.rewards[L - 1, 0] + 0.9 * last[0] - s.values[L - 1, 0]
    torch.testing.assert_close(out.advantages[L - 1, 0], delta)


# --------------------------------------------------------------------------------- collector
class CountingEnv:
    """1-d obs = step count of the episode; a fixed episode length ends it by truncation
    (or termination for env 1 on its 2nd step). Reward 1 per step."""

    def __init__(self, num_envs=3, length=3):
        self.num_envs, self.length = num_envs, length
        self.observation_space = gymnasium.spaces.Dict({"x": gymnasium.spaces.Box(-100, 100, (1,), np.float32)})
        self.action_space = gymnasium.spaces.Discrete(2)
        self.t = np.zeros(num_envs, dtype=np.int64)

    def _obs(self, t):
        return {"x": t.astype(np.float32)[:, None]}

    def reset(self):
        self.t[:] = 0
        return self._obs(self.t)

    def step(self, actions):
        self.t += 1
        terminated = np.zeros(self.num_envs, bool)
        terminated[1] = self.t[1] == 2
        truncated = ~terminated & (self.t >= self.length)
        final = self._obs(self.t)
        done = terminated | truncated
        episodes = [EpisodeInfo(int(i), {"return": float(self.t[i]), "length": float(self.t[i])})
                    for i in np.flatnonzero(done)]
        self.t[done] = 0
        return StepResult(self._obs(self.t), np.ones(self.num_envs, np.float32), terminated, truncated, final,
                          episodes)

    def state_dict(self):
        return {"t": self.t.copy()}

    def load_state_dict(self, state):
        self.t = state["t"].copy()

    def close(self):
        pass


class StopAt:
    """A stand-in for Preemption: stop before step `at` (None: never)."""

    def __init__(self, at=None):
        self.at, self.finished_updates = at, []

    def begin(self, update):
        pass

    def should_stop(self, update, step):
        return self.at is not None and step >= self.at

    def finished(self, update):
        self.finished_updates.append(update)

    def rank_weight(self, steps_per_env):  # preemption.rank_weighting off
        return 1.0


def make_collector(T, preemption, gamma=0.9, rnn="none"):
    torch.manual_seed(0)
    env = CountingEnv()
    policy = Policy(env.observation_space, env.action_space, PolicyConfig(hidden_size=8, rnn_type=rnn))
    storage = RolloutStorage(T, env.num_envs, env.observation_space, env.action_space,
                             policy.initial_memory(env.num_envs), torch.device("cpu"))
    actor = Actor(env, policy, torch.device("cpu"), Timer())
    return LockstepCollector(actor, preemption, T, Scoring(gamma), episode_observers(env)), policy, storage


def test_collector_preempted_rollout_and_carry_over():
    pre = StopAt(2)
    collector, _, s = make_collector(5, pre)
    res = collector.collect(1, s)
    assert res.steps == 2 and res.preempted and s.step == 2 and pre.finished_updates == []
    assert res.rollout.steps == 2 and torch.equal(res.rollout.valid[:, 0], torch.tensor([1.0, 1.0]))
    assert torch.equal(s.valid[:, 0], torch.tensor([1.0, 1.0, 0.0, 0.0, 0.0]))
    # the next rollout continues from where the envs are (obs 2), not from a reset
    pre.at = None
    res = collector.collect(2, s)
    assert res.steps == 5 and not res.preempted and pre.finished_updates == [2]
    assert s.obs["x"][0, 0, 0] == 2.0
    assert torch.equal(s.episode_start[0], torch.tensor([0.0, 1.0, 0.0]))  # env 1 ended at its step 2


@pytest.mark.parametrize("rnn", ["none", "gru"])
def test_collector_truncation_adds_gamma_value_of_final_obs(rnn):
    gamma = 0.9
    collector, policy, s = make_collector(3, StopAt(None), gamma, rnn)
    rewards = collector.scoring.finish(collector.collect(1, s).rollout).rewards  # scored: rollout/scoring.py
    assert torch.equal(s.rewards, torch.ones(3, 3))  # the storage keeps the envs' own
    # env 0 and 2: truncated after step index 2 (3rd step) with final obs x=3; env 1: terminated at step 1
    h = s.memory0
    with torch.no_grad():
        # recompute the hidden state after the third step of env 0 with the policy itself
        _, _, _, h1 = policy.act({"x": s.obs["x"][0]}, h, s.episode_start[0])
        _, _, _, h2 = policy.act({"x": s.obs["x"][1]}, h1, s.episode_start[1])
        _, _, _, h3 = policy.act({"x": s.obs["x"][2]}, h2, s.episode_start[2])
        v_final = policy.value({"x": torch.full((3, 1), 3.0)}, h3, torch.zeros(3))
    torch.testing.assert_close(rewards[2, [0, 2]], 1.0 + gamma * v_final[[0, 2]])
    assert torch.equal(rewards[1, 1], torch.tensor(1.0))  # termination: no bootstrap
    assert torch.equal(rewards[0], torch.ones(3))
    assert torch.equal(s.dones[2], torch.tensor([1.0, 0.0, 1.0]))
    assert torch.equal(s.dones[1], torch.tensor([0.0, 1.0, 0.0]))


def test_insert_envs_variable_segments_mask_bootstrap_and_minibatches():
    s = make_storage(T=4, N=3)
    s.begin(obs_at(0, 3), torch.ones(3), {"rnn": torch.zeros(3, 1, 5)}, segments=True)
    order = [[0, 1, 2], [1], [1, 2], [1]]  # env 0: 1 step, env 1: 4, env 2: 2
    for envs in order:
        e = torch.tensor(envs)
        t = s.lengths[e]
        nxt = {"vec": obs_at(0, 3)["vec"][e] + (t + 1)[:, None],
               "img": (t + 1).to(torch.uint8)[:, None, None, None].expand(-1, 4, 4, 1)}
        s.insert_envs(e, torch.full((len(e),), 1), torch.zeros(len(e)), torch.ones(len(e)), torch.full((len(e),), 2.0),
                      torch.zeros(len(e)), nxt, torch.zeros(len(e)))
    assert s.lengths.tolist() == [1, 4, 2] and s.step == 4
    assert torch.equal(s.valid, torch.tensor([[1.0, 1, 1], [0, 1, 1], [0, 1, 0], [0, 1, 0]]))
    # each env's next observation sits after its own last step
    assert s.obs["img"][1, 0].max() == 1 and s.obs["img"][2, 2].max() == 2 and s.obs["img"][4, 1].max() == 4
    rollout = s.rollout(torch.tensor([10.0, 20.0, 30.0]))
    assert rollout.lengths.tolist() == [1, 4, 2]
    adv = rollout_gae(rollout, gamma=0.5, lam=1.0)
    torch.testing.assert_close(adv.returns[:, 0], torch.tensor([2.0 + 5.0, 0, 0, 0]))  # r + gamma * V(boot)
    torch.testing.assert_close(adv.returns[1, 2], torch.tensor(2.0 + 15.0))  # env 2 after its own 2nd step
    torch.testing.assert_close(adv.returns[3, 1], torch.tensor(2.0 + 10.0))  # env 1 after its 4th
    assert len(list(minibatches(rollout, adv, 3))) == 3
    with pytest.raises(ValueError, match="capacity"):
        s.insert_envs(torch.tensor([1]), torch.ones(1), torch.zeros(1), torch.ones(1), torch.ones(1), torch.zeros(1),
                      {k: v[[1]] for k, v in obs_at(0, 3).items()}, torch.zeros(1))
