"""A success classifier learnt from demonstrations, as a run's only reward (docs/guides/objectives.md).

    ddppo record gridnav --episodes 256 --out demos
    python success_reward.py demos success.pt
    ddppo train gridnav reward.model=success_reward:SuccessClassifier reward.weights=success.pt \
        reward.mode=terminal reward.env_weight=0 run.dir=runs/success-reward
    ddppo eval runs/success-reward

The classifier reads gridnav's `pointgoal` (distance, cos, sin of the goal): trained on the recorded expert
episodes, where the last step of a successful episode is at the goal and every other step is not, it scores an
episode's final observation with the probability that the episode ended at its goal.
"""

from __future__ import annotations

import sys

import numpy as np
import torch


class SuccessClassifier(torch.nn.Module):
    """P(the episode ended at its goal) from the final observation's pointgoal."""

    def __init__(self, width: int = 32):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(3, width), torch.nn.ReLU(), torch.nn.Linear(width, 1))

    def forward(self, obs, actions=None, episode_step=None, done=None):
        return torch.sigmoid(self.net(obs["pointgoal"].float())).squeeze(-1)


def examples(demos: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(pointgoal of every recorded step, 1.0 where it is the last step of a successful episode)."""
    from ddppo.imitation.dataset import Dataset

    episodes = Dataset(demos).load()
    labels = np.zeros(episodes.num_steps, np.float32)
    last = episodes.starts + episodes.lengths - 1
    labels[last[episodes.success > 0.5]] = 1.0
    return torch.from_numpy(episodes.obs["pointgoal"]).float(), torch.from_numpy(labels)


def train(demos: str, out: str, steps: int = 500, seed: int = 0) -> float:
    """Fit the classifier on the demonstrations (balanced binary cross-entropy); save its state dict to `out`;
    return its accuracy on them."""
    torch.manual_seed(seed)
    x, y = examples(demos)
    model = SuccessClassifier()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    positive = float(y.mean())
    weight = torch.where(y > 0, 0.5 / positive, 0.5 / (1 - positive))  # the rare positives count as much
    for _ in range(steps):
        p = model({"pointgoal": x}).clamp(1e-6, 1 - 1e-6)
        loss = -(weight * (y * p.log() + (1 - y) * (1 - p).log())).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    torch.save(model.state_dict(), out)
    with torch.no_grad():
        return float(((model({"pointgoal": x}) > 0.5).float() == y).float().mean())


if __name__ == "__main__":
    print(f"accuracy on the demonstrations: {train(sys.argv[1], sys.argv[2]):.3f}")  # noqa: T201
