"""GAE (ddppo/advantage/gae.py) against a plain-Python loop, and its done / truncation semantics."""

import random

import pytest
import torch

from ddppo.advantage.gae import gae


def reference_gae(rewards, values, dones, gamma, lam):
    """Textbook GAE, one env and one step at a time, in plain Python floats."""
    T, N = len(rewards), len(rewards[0])
    adv = [[0.0] * N for _ in range(T)]
    for n in range(N):
        running = 0.0
        for t in reversed(range(T)):
            nonterminal = 0.0 if dones[t][n] else 1.0
            delta = rewards[t][n] + gamma * values[t + 1][n] * nonterminal - values[t][n]
            running = delta + gamma * lam * nonterminal * running
            adv[t][n] = running
    returns = [[adv[t][n] + values[t][n] for n in range(N)] for t in range(T)]
    return adv, returns


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("gamma,lam", [(0.99, 0.95), (0.9, 1.0), (1.0, 0.0), (0.5, 0.7)])
def test_matches_plain_loop_on_random_data_with_dones(seed, gamma, lam):
    rng = random.Random(seed)
    T, N = rng.randint(1, 12), rng.randint(1, 5)
    rewards = [[rng.uniform(-2, 2) for _ in range(N)] for _ in range(T)]
    values = [[rng.uniform(-3, 3) for _ in range(N)] for _ in range(T + 1)]
    dones = [[rng.random() < 0.3 for _ in range(N)] for _ in range(T)]
    adv, ret = gae(torch.tensor(rewards), torch.tensor(values), torch.tensor(dones, dtype=torch.float32),
                   gamma, lam)
    ref_adv, ref_ret = reference_gae(rewards, values, dones, gamma, lam)
    assert adv.shape == ret.shape == (T, N)
    torch.testing.assert_close(adv, torch.tensor(ref_adv), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ret, torch.tensor(ref_ret), rtol=1e-5, atol=1e-5)


def test_hand_computed_two_steps():
    # T=2, one env, no done: delta1 = 1 + 0.5*4 - 3 = 0; delta0 = 2 + 0.5*3 - 1 = 2.5
    # A1 = 0, A0 = 2.5 + 0.5*0.5*0 = 2.5; with a done at t=0: delta0 = 2 - 1 = 1, A0 = 1.
    rewards = torch.tensor([[2.0], [1.0]])
    values = torch.tensor([[1.0], [3.0], [4.0]])
    adv, ret = gae(rewards, values, torch.zeros(2, 1), 0.5, 0.5)
    torch.testing.assert_close(adv, torch.tensor([[2.5], [0.0]]))
    torch.testing.assert_close(ret, torch.tensor([[3.5], [3.0]]))
    adv, _ = gae(rewards, values, torch.tensor([[1.0], [0.0]]), 0.5, 0.5)
    torch.testing.assert_close(adv, torch.tensor([[1.0], [0.0]]))


def test_done_cuts_bootstrap_and_propagation():
    """After a done, neither values[t+1] nor later advantages leak into step t."""
    T = 6
    rewards = torch.randn(T, 1)
    values = torch.randn(T + 1, 1)
    dones = torch.zeros(T, 1)
    dones[2] = 1.0
    adv, _ = gae(rewards, values, dones, 0.99, 0.95)
    changed = values.clone()
    changed[3:] += 100.0  # everything after the episode boundary
    rewards2 = rewards.clone()
    rewards2[3:] -= 50.0
    adv2, _ = gae(rewards2, changed, dones, 0.99, 0.95)
    torch.testing.assert_close(adv[:3], adv2[:3])
    assert not torch.allclose(adv[3:], adv2[3:])


def test_last_step_bootstraps_from_values_T():
    rewards = torch.zeros(3, 2)
    values = torch.zeros(4, 2)
    values[3] = torch.tensor([10.0, 10.0])
    dones = torch.tensor([[0.0, 0.0], [0.0, 0.0], [0.0, 1.0]])
    adv, _ = gae(rewards, values, dones, 0.9, 1.0)
    # env 0 bootstraps: A_t = 0.9^(3-t) * 10 ; env 1 ended at t=2: nothing to bootstrap
    torch.testing.assert_close(adv[:, 0], torch.tensor([7.29, 8.1, 9.0]))
    torch.testing.assert_close(adv[:, 1], torch.zeros(3))


def test_truncation_convention_equals_cutting_the_rollout_and_bootstrapping():
    """The documented truncation semantics: the collector stores reward + gamma * V(final obs)
    with done=1; GAE then gives the same advantages as a rollout that simply ended at that step
    and bootstrapped from V(final obs), while the next episode stays independent."""
    gamma, lam = 0.97, 0.9
    torch.manual_seed(0)
    T, cut = 7, 3  # env truncated after the action at step `cut`
    rewards = torch.randn(T, 1)
    values = torch.randn(T + 1, 1)
    v_final = torch.tensor(1.7)  # value of the truncated episode's last observation (not in `values`)
    stored = rewards.clone()
    stored[cut] += gamma * v_final
    dones = torch.zeros(T, 1)
    dones[cut] = 1.0
    adv, ret = gae(stored, values, dones, gamma, lam)

    # The same first episode as its own rollout of cut+1 steps, bootstrapped (not done) from V(final).
    values_cut = torch.cat([values[: cut + 1], v_final.view(1, 1)])
    adv_cut, ret_cut = gae(rewards[: cut + 1], values_cut, torch.zeros(cut + 1, 1), gamma, lam)
    torch.testing.assert_close(adv[: cut + 1], adv_cut)
    torch.testing.assert_close(ret[: cut + 1], ret_cut)
    # ...and differs from treating the time limit as a termination (no bootstrap).
    adv_term, _ = gae(rewards, values, dones, gamma, lam)
    assert not torch.allclose(adv_term[cut], adv[cut])


def test_pure_function_inputs_untouched():
    rewards, values, dones = torch.randn(5, 3), torch.randn(6, 3), (torch.rand(5, 3) < 0.3).float()
    copies = [x.clone() for x in (rewards, values, dones)]
    gae(rewards, values, dones, 0.99, 0.95)
    for x, c in zip((rewards, values, dones), copies):
        assert torch.equal(x, c)


def test_variable_lengths_hand_computed():
    # gamma = lam = 0.5; env 0 collected 1 step, env 1 three (done after its step 1).
    # env 0: delta0 = 1 + 0.5*4 - 2 = 1 (bootstrap values[1, 0] = 4) -> A0 = 1, later steps 0.
    # env 1: delta2 = 2 + 0.5*2 - 1 = 2 -> A2 = 2; delta1 = 0 - 1 = -1 (done) -> A1 = -1;
    #        delta0 = 1 + 0.5*1 - 1 = 0.5 -> A0 = 0.5 + 0.25*(-1) = 0.25.
    rewards = torch.tensor([[1.0, 1.0], [9.0, 0.0], [9.0, 2.0]])  # env 0's 9s lie beyond its segment
    values = torch.tensor([[2.0, 1.0], [4.0, 1.0], [7.0, 1.0], [7.0, 2.0]])
    dones = torch.tensor([[0.0, 0.0], [1.0, 1.0], [0.0, 0.0]])
    adv, _ = gae(rewards, values, dones, 0.5, 0.5, lengths=torch.tensor([1, 3]))
    torch.testing.assert_close(adv, torch.tensor([[1.0, 0.25], [0.0, -1.0], [0.0, 2.0]]))


@pytest.mark.parametrize("seed", range(4))
def test_variable_lengths_match_each_env_alone(seed):
    """Each env's segment gives what GAE over that env alone, truncated to its length, gives."""
    g = torch.Generator().manual_seed(seed)
    T, N = 7, 5
    rewards, values = torch.randn(T, N, generator=g), torch.randn(T + 1, N, generator=g)
    dones = (torch.rand(T, N, generator=g) < 0.3).float()
    lengths = torch.randint(0, T + 1, (N,), generator=g)
    adv, ret = gae(rewards, values, dones, 0.9, 0.8, lengths)
    for n in range(N):
        L = int(lengths[n])
        assert torch.equal(adv[L:, n], torch.zeros(T - L))
        if L == 0:
            continue
        vals = torch.cat([values[:L, n], values[L:L + 1, n]])  # values[L, n] bootstraps the segment
        a, r = gae(rewards[:L, n:n + 1], vals[:, None], dones[:L, n:n + 1], 0.9, 0.8)
        torch.testing.assert_close(adv[:L, n], a[:, 0])
        torch.testing.assert_close(ret[:L, n], r[:, 0])


def torch_loop_gae(rewards, values, dones, gamma, lam, lengths=None):
    """GAE as a float32 torch loop, one step at a time over all envs (ddppo's implementation until the recursion
    moved to numpy): the host loop must give these numbers bit for bit."""
    T = rewards.shape[0]
    adv, last = torch.zeros_like(rewards), torch.zeros_like(rewards[0])
    not_done = 1.0 - dones
    for t in reversed(range(T)):
        delta = rewards[t] + gamma * values[t + 1] * not_done[t] - values[t]
        last = delta + gamma * lam * not_done[t] * last
        if lengths is not None:
            last = torch.where(t < lengths, last, torch.zeros_like(last))
        adv[t] = last
    return adv


@pytest.mark.parametrize("variable", [False, True])
def test_the_host_recursion_gives_a_torch_loops_numbers_bit_for_bit(variable):
    g = torch.Generator().manual_seed(7)
    T, N = 300, 6
    rewards, values = torch.randn(T, N, generator=g) * 3, torch.randn(T + 1, N, generator=g) * 10
    dones = (torch.rand(T, N, generator=g) < 0.05).float()
    lengths = torch.tensor([300, 1, 150, 299, 0, 77]) if variable else None
    adv, _ = gae(rewards, values, dones, 0.99, 0.95, lengths)
    assert torch.equal(adv, torch_loop_gae(rewards, values, dones, 0.99, 0.95, lengths))
