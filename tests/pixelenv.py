"""A small pixel environment from gymnasium for the tests: CartPole drawn into a uint8 image.

`import pixelenv` registers `PixelCartPole-v0` (so `env.name=gym:pixelenv:PixelCartPole-v0` works from
the CLI with this folder on PYTHONPATH). Observations are Box(0, 255, (12, 16, 3), uint8): the cart as a
block in the bottom rows (channel 0), the pole's tip (channel 1) and a full-bright frame border (channel 2),
drawn with numpy, so no renderer (pygame) is needed.
"""

from __future__ import annotations

import gymnasium
import numpy as np

ENV_ID = "PixelCartPole-v0"
H, W = 12, 16


class CartPolePixels(gymnasium.ObservationWrapper):
    def __init__(self, env: gymnasium.Env):
        super().__init__(env)
        self.observation_space = gymnasium.spaces.Box(0, 255, (H, W, 3), np.uint8)

    def observation(self, state: np.ndarray) -> np.ndarray:
        x, _, theta, _ = (float(v) for v in state)
        img = np.zeros((H, W, 3), np.uint8)
        col = int(np.clip((x + 2.4) / 4.8 * (W - 1), 0, W - 1))
        img[H - 3:, max(col - 1, 0): col + 2, 0] = 200
        tip_row = int(np.clip(H - 4 - 6 * np.cos(theta), 0, H - 1))
        tip_col = int(np.clip(col + 6 * np.sin(theta), 0, W - 1))
        img[tip_row, tip_col, 1] = 255
        img[[0, -1], :, 2] = 255
        img[:, [0, -1], 2] = 255
        return img


def make_pixel_cartpole(**kwargs) -> gymnasium.Env:
    return CartPolePixels(gymnasium.make("CartPole-v1", **kwargs))


if ENV_ID not in gymnasium.registry:
    gymnasium.register(ENV_ID, entry_point=make_pixel_cartpole, max_episode_steps=500)
