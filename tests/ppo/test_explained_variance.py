"""explained_variance counts collected steps only: the zero padding of preempted and variable-length
rollouts is not a perfectly predicted sample."""

from __future__ import annotations

import math

import torch

from ddppo.ppo.update import explained_variance


def test_padding_is_left_out():
    g = torch.Generator().manual_seed(0)
    target = torch.randn(8, 3, generator=g) + 2.0
    pred = target + 0.5 * torch.randn(8, 3, generator=g)
    valid = torch.ones(8, 3)
    valid[5:, 0] = 0  # env 0's segment ended at step 5 (variable mode), env 2's at step 2
    valid[2:, 2] = 0
    target, pred = target * valid, pred * valid  # padding: zeros in both, as storage leaves them
    m = valid.bool()
    expected = 1.0 - float((target[m] - pred[m]).var() / target[m].var())
    assert math.isclose(explained_variance(pred, target, valid), expected, rel_tol=1e-6)
    unmasked = 1.0 - float((target - pred).var() / target.var())
    assert abs(unmasked - expected) > 0.05  # the padding would have inflated it


def test_no_variance_is_nan():
    assert math.isnan(explained_variance(torch.ones(4, 2), torch.ones(4, 2), torch.ones(4, 2)))
    assert math.isnan(explained_variance(torch.ones(1, 1), torch.ones(1, 1), torch.ones(1, 1)))
