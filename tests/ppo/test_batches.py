"""The minibatches the PPO update cuts from a rollout (ddppo/ppo/batches.py): split by environment with time kept
whole, or of samples drawn from every (step, env); always exactly ppo.num_mini_batch of them."""

import pytest
import torch

from ddppo.advantage.gae import rollout_gae
from ddppo.ppo.batches import minibatches
from tests.rollout.rollout_testutil import fill, make_storage


@pytest.mark.parametrize("N,k,L", [(4, 1, 6), (4, 2, 6), (4, 4, 2), (6, 3, 1), (8, 4, 5)])
def test_minibatches_split_by_env_always_num_mini_batch(N, k, L):
    s = make_storage(T=6, N=N, layers=2)
    hidden = fill(s, L, N=N)
    rollout = s.rollout(torch.zeros(N))
    adv = rollout_gae(rollout, 0.99, 0.95)
    g = torch.Generator().manual_seed(0)
    batches = list(minibatches(rollout, adv, k, generator=g))
    assert len(batches) == k
    seen = []
    for mb in batches:
        # env ids of this batch, recovered from the recognisable observations
        envs = torch.round((mb.obs["vec"][0, :, 0] - 0) * 10).long()
        seen += envs.tolist()
        n = N // k
        assert mb.obs["vec"].shape == (L, n, 3) and mb.obs["img"].shape == (L, n, 4, 4, 1)
        assert mb.actions.shape == mb.old_logp.shape == mb.old_values.shape == mb.valid.shape == (L, n)
        assert mb.memory["rnn"].shape == (n, 2, 5)
        assert torch.equal(mb.memory["rnn"], hidden[envs])  # the memory of the same envs
        assert torch.equal(mb.advantages, adv.advantages[:, envs])
        assert torch.equal(mb.returns, adv.returns[:, envs])
        assert torch.equal(mb.old_values, s.values[:L, envs])
        assert torch.equal(mb.episode_start, s.episode_start[:L, envs])
        assert torch.equal(mb.valid, torch.ones(L, n))
        for t in range(L):  # time stays whole and in order
            torch.testing.assert_close(mb.obs["vec"][t, :, 0], t + envs / 10)
    assert sorted(seen) == list(range(N))  # each env in exactly one minibatch


def test_minibatches_shuffle_envs_between_epochs():
    s = make_storage(T=2, N=8)
    fill(s, 2, N=8)
    rollout = s.rollout(torch.zeros(8))
    adv = rollout_gae(rollout, 0.99, 0.95)
    g = torch.Generator().manual_seed(1)
    orders = {tuple(torch.cat([mb.memory["rnn"][:, 0, 0] for mb in minibatches(rollout, adv, 4, generator=g)]
                              ).tolist())
              for _ in range(5)}
    assert len(orders) > 1


@pytest.mark.parametrize("N,k,L", [(4, 1, 6), (4, 3, 6), (1, 5, 6), (2, 7, 3)])
def test_sample_minibatches_draw_every_step_of_every_env_once(N, k, L):
    """ppo.minibatch_split=sample: exactly k minibatches (however the samples divide), each sample (t, env)
    once over them, its fields kept together."""
    s = make_storage(T=6, N=N)
    fill(s, L, N=N)
    rollout = s.rollout(torch.zeros(N))
    adv = rollout_gae(rollout, 0.99, 0.95)
    batches = list(minibatches(rollout, adv, k, generator=torch.Generator().manual_seed(0), split="sample"))
    assert len(batches) == k
    seen = []
    for mb in batches:
        B = mb.valid.shape[1]
        assert mb.obs["vec"].shape == (1, B, 3) and mb.actions.shape == mb.returns.shape == (1, B)
        assert mb.memory["rnn"].shape == (B, 1, 5) and not mb.memory["rnn"].any()
        t = mb.obs["vec"][0, :, 0].floor()
        env = torch.round((mb.obs["vec"][0, :, 0] - t) * 10).long()
        seen += list(zip(t.long().tolist(), env.tolist()))
        assert torch.equal(mb.advantages[0], adv.advantages[t.long(), env])
        assert torch.equal(mb.old_values[0], s.values[t.long(), env])
    assert sorted(seen) == [(t, n) for t in range(L) for n in range(N)]
