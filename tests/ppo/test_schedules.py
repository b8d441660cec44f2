"""ppo.lr_schedule and ppo.clip_schedule follow the env-step counter (PPOUpdater.set_lr_for)."""

import pytest
import torch

from ddppo.config import PPOConfig
from ddppo.ppo.update import PPOUpdater


def updater(**ppo) -> PPOUpdater:
    up = PPOUpdater.__new__(PPOUpdater)  # only the schedule: no process group, no gradient reducer
    up.cfg = PPOConfig(**ppo)
    up.optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    return up


@pytest.mark.parametrize("lr_schedule,clip_schedule", [("linear", "linear"), ("linear", "constant"),
                                                       ("constant", "linear")])
def test_lr_and_clip_decay_linearly_to_zero_where_asked(lr_schedule, clip_schedule):
    up = updater(lr=2.5e-4, clip=0.1, lr_schedule=lr_schedule, clip_schedule=clip_schedule)
    for steps, remaining in ((0, 1.0), (250, 0.75), (1000, 0.0), (1200, 0.0)):
        lr = up.set_lr_for(steps, 1000)
        assert lr == pytest.approx(2.5e-4 * (remaining if lr_schedule == "linear" else 1.0))
        assert up.optimizer.param_groups[0]["lr"] == lr
        assert up.clip == pytest.approx(0.1 * (remaining if clip_schedule == "linear" else 1.0))
