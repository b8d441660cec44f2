"""A memory core of your own: a decaying average of the features, emptied where an episode starts.

Chosen by policy.rnn_type naming this module and the registered name, from the folder that holds this file:

    ddppo train gridnav policy.rnn_type=decay_core:decay

ddppo imports `decay_core` (from the working directory first, as `python -m` would) when it reads the config, so
`ddppo eval`, a resumed run and `ddppo.api.Agent` find the same core from the run's config.yaml.
"""

import torch
from torch import nn

from ddppo.api import register_core
from ddppo.model.core import Core

DECAY = 0.9  # how much of the average each step keeps


@register_core("decay")
class DecayCore(Core):
    """out_t = tanh(W [x_t; avg_t]), then avg <- DECAY * avg + (1 - DECAY) * x_t; avg is 0 at an episode's start."""

    def __init__(self, width):
        super().__init__()
        self.mix = nn.Linear(2 * width, width)

    def initial_memory(self, num_envs, device="cpu"):
        return {"avg": torch.zeros(num_envs, self.mix.out_features, device=device)}

    def forward(self, x, memory, start):
        avg, out = memory["avg"], []
        for t in range(x.shape[0]):  # x (T, N, width), start (T, N)
            avg = avg.masked_fill(start[t].unsqueeze(-1) != 0, 0.0)  # a new episode sees nothing from before
            out.append(torch.tanh(self.mix(torch.cat([x[t], avg.to(x.dtype)], -1))))
            avg = DECAY * avg + (1 - DECAY) * x[t]
        return torch.stack(out), {"avg": avg}
