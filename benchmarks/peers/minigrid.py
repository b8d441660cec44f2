"""MiniGrid on its raw observation, side by side: ddppo (configs/minigrid.yaml) against stable-baselines3 PPO with
the same PPO settings (rl-starter-files': 16 envs x 128 steps, 4 epochs, minibatches of 256, entropy 0.01, grad
norm 0.5; as the config, lr 1e-3 decayed linearly and advantages standardised per minibatch on SB3's side, per
update on ddppo's), both on the 7x7x3 image and the direction with the mission left out:

    ddppo bench minigrid [--env MiniGrid-DoorKey-5x5-v0] [--seeds 1 2 3] [--budget 100000] [--jobs 1] [--out FILE]
                         [--set KEY=VALUE ...]   (ddppo's side: overrides of configs/minigrid.yaml)

The protocol (a process per run, timed from start to exit; steps/s, steps per CPU second, the return at the
budget and the learning curve) is side_by_side.py's. SB3's NatureCNN does not fit a 7x7 image, so
SB3's side uses rl-starter-files' MiniGrid CNN (2x2 convolutions, 16-32-64 channels) beside the direction one-hot,
with 64-wide actor and critic heads; ddppo's side runs configs/minigrid.yaml as shipped (the default `cnn`, 132k
parameters, the direction embedded), or the same CNN as SB3's with `--set policy.image_encoder=grid`.
Needs the extras `bench` and `minigrid`. Prints figures and writes them as JSON; nothing is asserted.
"""

from __future__ import annotations

import sys

from ddppo.benchmarks.peers.side_by_side import Task, main as side_by_side, sb3_curve, sb3_figures

NAME = "minigrid"
HELP = ("ddppo vs stable-baselines3 PPO on MiniGrid's raw observation (rl-starter-files' settings): "
        "wall-clock steps/s and return at equal steps (extras `bench`, `minigrid`)")

SB3_SETTINGS = dict(n_steps=128, batch_size=256, n_epochs=4, ent_coef=0.01, vf_coef=0.5, gae_lambda=0.95,
                    gamma=0.99, max_grad_norm=0.5, clip_range=0.2, normalize_advantage=True)
LR = 1e-3  # decayed linearly to 0 at the budget, as configs/minigrid.yaml
NUM_ENVS = 16


def sb3_run(env_id: str, seed: int, budget: int) -> dict:
    """One SB3 PPO run (in this process, one torch thread); its figures and learning curve."""
    import gymnasium
    import minigrid  # noqa: F401  (registers the ids)
    import torch
    from gymnasium.wrappers import FilterObservation
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
    from torch import nn

    class MiniGridCNN(BaseFeaturesExtractor):
        """rl-starter-files' image CNN on the raw 7x7x3 integers, with the direction one-hot beside it."""

        def __init__(self, space: gymnasium.spaces.Dict):
            super().__init__(space, 64 + 4)
            self.cnn = nn.Sequential(nn.Conv2d(3, 16, 2), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(16, 32, 2), nn.ReLU(),
                                     nn.Conv2d(32, 64, 2), nn.ReLU(), nn.Flatten())

        def forward(self, obs: dict) -> torch.Tensor:
            direction = obs["direction"].reshape(len(obs["direction"]), -1)  # one-hot (SB3 preprocesses it)
            return torch.cat([self.cnn(obs["image"]), direction], 1)  # the image: SB3 moved its channels first

    envs = make_vec_env(env_id, NUM_ENVS, seed=seed,
                        wrapper_class=lambda env: FilterObservation(env, ["image", "direction"]))
    model = PPO("MultiInputPolicy", envs, seed=seed, device="cpu", verbose=0, **SB3_SETTINGS,
                learning_rate=lambda remaining: LR * remaining,
                policy_kwargs=dict(features_extractor_class=MiniGridCNN, normalize_images=False,
                                   net_arch=dict(pi=[64], vf=[64]), activation_fn=nn.Tanh))
    curve = sb3_curve()
    model.learn(budget, callback=curve)
    return sb3_figures(model, curve)


TASK = Task(name="minigrid", module="minigrid", description=__doc__.splitlines()[0],
            default_env="MiniGrid-DoorKey-5x5-v0", needs=("minigrid",), extras="minigrid", config="minigrid",
            env_name=lambda env: f"gym:minigrid:{env}", window=6, sb3_run=sb3_run)


def main(argv: list[str] | None = None) -> int:
    return side_by_side(TASK, argv)


if __name__ == "__main__":
    sys.exit(main())
