"""habitat-baselines VER's two rules in variable mode (ddppo/rollout/variable.py): importance weights that
down-weight fast envs' samples, min(1, (T + 1) / (L_n + 1)), applied as mean(weight * term) over the valid
samples; and the idle-env rule at a rollout's end (`step`: every idle env is sent an old-policy step; `wait`:
only the actions in flight continue, the idle envs are acted on by the new policy)."""

from __future__ import annotations

import pytest
import torch

from ddppo.config import PolicyConfig, RolloutConfig
from ddppo.advantage.gae import rollout_gae
from ddppo.model import memory
from ddppo.model.policy import Policy
from ddppo.ppo.batches import minibatches
from ddppo.ppo.loss import ppo_loss
from ddppo.rollout.factory import storage_steps
from ddppo.rollout.storage import RolloutStorage
from ddppo.rollout.variable import importance_weights
from ddppo.envs.registry import make_vec_env
from ddppo.envs.base import EnvSpec
from rollout_testutil import NeverStop
from testutil import OneStorage, build_collector

N, T = 4, 6


def test_importance_weights_down_weight_envs_with_more_than_their_share():
    w = importance_weights(torch.tensor([6, 13, 3, 0]), 6)
    assert w.tolist() == pytest.approx([1.0, 7 / 14, 1.0, 1.0])  # only the fast env (13 > 6 steps) counts less


def test_the_loss_weighs_policy_value_and_entropy_terms_as_ver_does():
    g = torch.Generator().manual_seed(0)
    L, n = 5, 3
    new_logp, old_logp, adv, ent, values, old_values, returns = (torch.randn(L, n, generator=g) for _ in range(7))
    valid = torch.ones(L, n)
    valid[3:, 0] = 0.0
    weight = torch.tensor([1.0, 0.25, 0.5])[None, :]
    kw = dict(clip=0.2, clip_value_loss=False, value_coef=0.5, entropy_coef=0.01)
    out = ppo_loss(new_logp, old_logp, adv, ent, values, old_values, returns, valid, weight=weight, **kw)
    plain = ppo_loss(new_logp, old_logp, adv, ent, values, old_values, returns, valid, **kw)
    ratio = (new_logp - old_logp).exp()
    surrogate = torch.min(ratio * adv, ratio.clamp(0.8, 1.2) * adv)
    m = valid.bool()
    mean_w = lambda x: (x * weight.expand(L, n))[m].sum() / m.sum()  # noqa: E731  VER: mean(weight * term)
    torch.testing.assert_close(out.policy, -mean_w(surrogate))
    torch.testing.assert_close(out.value, 0.5 * mean_w((values - returns) ** 2))
    torch.testing.assert_close(out.entropy, mean_w(ent))
    assert out.approx_kl == plain.approx_kl and out.clip_fraction == plain.clip_fraction  # diagnostics unweighted


@pytest.fixture
def make():
    made = []

    def build(idle_envs: str = "step", weighted: bool = False):
        cfg = RolloutConfig(num_steps=T, mode="variable", batch_wait_s=0.0, idle_envs=idle_envs,
                            importance_weights=weighted, importance_weights_form="one_sided")  # VER's
        # a skewed spread of env speeds: segments of different lengths
        envs = make_vec_env("synthetic", {"step_sleep_s": 0.002, "step_sleep_sigma": 1.5, "episode_length": 5},
                            EnvSpec(num_envs=N, seed=0, num_workers=N))
        made.append(envs)
        torch.manual_seed(0)
        policy = Policy(envs.observation_space, envs.action_space, PolicyConfig(hidden_size=8, rnn_type="gru"))
        storage = RolloutStorage(storage_steps(cfg), N, envs.observation_space, envs.action_space,
                                 policy.initial_memory(N), torch.device("cpu"))
        return OneStorage(build_collector(cfg, envs, policy, NeverStop()), storage), policy

    yield build
    for envs in made:
        envs.close()


@pytest.mark.parametrize("weighted", [False, True])
def test_the_collector_hands_the_weights_to_the_minibatches_when_asked(make, weighted):
    collector, _ = make(weighted=weighted)
    rollout = collector.collect(1).rollout
    adv = rollout_gae(rollout, 0.99, 0.95)
    batches = list(minibatches(rollout, adv, 2))
    if not weighted:
        assert rollout.env_weight is None and all(mb.weight is None for mb in batches)
        return
    assert torch.equal(rollout.env_weight, importance_weights(rollout.lengths, T))
    assert sorted(w for mb in batches for w in mb.weight.tolist()) == sorted(rollout.env_weight.tolist())


def _first_step_policy(policy, s, n):
    """The log-probability of env n's first stored action under `policy` (from the stored state)."""
    with torch.no_grad():
        logp, _, _ = policy.evaluate({"obs": s.obs["obs"][:1, n:n + 1]}, memory.select(s.memory0, [n]),
                                     s.episode_start[:1, n:n + 1], s.actions[:1, n:n + 1])
    return logp[0, 0]


@pytest.mark.parametrize("rule", ["step", "wait"])
def test_idle_envs_at_the_rollout_end_step_with_the_old_policy_or_wait_for_the_new_one(make, rule):
    """Each env's first stored step of a rollout was acted by the policy that sent its pending action: the
    previous rollout's policy for an env busy at that rollout's end, the new one for an idle env (`wait`). An env
    so slow that the others filled the budget (each up to the cap) may store no step in a rollout: its action stays
    pending into the next one, so the test keeps, per env, which policy version sent the pending action, and runs
    more rollouts (a new policy each) until the case each rule is about has been checked."""
    collector, policy = make(idle_envs=rule)
    envs = collector.envs
    versions = [{n: p.clone() for n, p in policy.state_dict().items()}]  # versions[v - 1]: rollout v's policy
    collector.collect(1)
    pending = {n: 1 for n in range(N)}  # env -> the policy version that sent its pending action
    checked = {"old": 0, "new": 0}
    for update in range(2, 8):
        busy = set(envs.in_flight) | {w.worker for w in collector.unstored}
        idle = set(range(N)) - busy
        if rule == "step":
            assert not idle  # every env was sent an old-policy step
        elif update == 2:
            assert idle  # at least the envs of the rollout's last batch wait for the learner
        for n in idle:
            pending[n] = update  # acted on first by the new policy (even if that step is not stored this rollout)
        with torch.no_grad():  # "the learner": a new policy
            for p in policy.parameters():
                p.add_(0.5 * torch.randn_like(p))
        versions.append({n: p.clone() for n, p in policy.state_dict().items()})
        collector.collect(update)
        s = collector.storage
        for n in range(N):
            if int(s.lengths[n]) == 0:
                continue  # its pending action is still the one it had
            version = pending[n]
            acted_by = Policy(envs.observation_space, envs.action_space, PolicyConfig(hidden_size=8, rnn_type="gru"))
            acted_by.load_state_dict(versions[version - 1])
            torch.testing.assert_close(s.logp[0, n], _first_step_policy(acted_by, s, n))
            checked["new" if n in idle else "old"] += 1
            pending[n] = update  # its next pending action is sent by this rollout's policy
        if checked["old"] and (rule == "step" or checked["new"]):
            break
    assert checked["old"] and (rule == "step" or checked["new"]), checked
