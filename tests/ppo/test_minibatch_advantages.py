"""ppo.normalize_advantage_per=minibatch: each minibatch's valid advantages standardised on their own (SB3,
CleanRL); padding (masked-out steps, possibly NaN) neither counts nor changes."""

import torch

from ddppo.advantage.gae import minibatch_normalized


def test_valid_advantages_are_standardised_and_padding_is_left_alone():
    adv = torch.tensor([[1.0, 2.0], [3.0, float("nan")], [5.0, 100.0]])
    valid = torch.tensor([[1.0, 1.0], [1.0, 0.0], [1.0, 0.0]])
    out = minibatch_normalized(adv, valid)
    picked = out[valid > 0]
    torch.testing.assert_close(picked.mean(), torch.tensor(0.0), atol=1e-6, rtol=0)
    torch.testing.assert_close(picked.std(), torch.tensor(1.0), atol=1e-4, rtol=0)
    assert torch.isnan(out[1, 1]) and out[2, 1] == 100.0


def test_fewer_than_two_valid_samples_pass_unchanged():
    adv = torch.tensor([[4.0, 7.0]])
    assert torch.equal(minibatch_normalized(adv, torch.tensor([[1.0, 0.0]])), adv)


def test_no_mask_standardises_exactly_as_a_mask_of_ones():
    adv = torch.randn(1, 64, generator=torch.Generator().manual_seed(3)) * 5 + 2
    assert torch.equal(minibatch_normalized(adv, None), minibatch_normalized(adv, torch.ones(1, 64)))
    assert torch.equal(minibatch_normalized(adv[:, :1], None), adv[:, :1])
