"""Pixel observations from gymnasium stay uint8 end to end and reach the image encoder in [0, 1].

A Box(0, 255, (H, W, C), uint8) observation must not be turned into 0-255 floats by the gym adapter:
rollout storage holds it as uint8 (a quarter of the bytes), and the policy scales it once, on the
device, with the scale taken from the space's bounds.
"""

import gymnasium
import numpy as np
import pytest
import torch

import pixelenv
from ddppo.config import PolicyConfig
from ddppo.model.encoders import ImageInput
from ddppo.model.policy import Policy
from ddppo.rollout.storage import RolloutStorage
from ddppo.envs.registry import make_vec_env
from ddppo.envs.base import EnvSpec
from testutil import obs_to_torch

N = 3


@pytest.fixture(scope="module")
def pixel_env():
    env = make_vec_env(f"gym:pixelenv:{pixelenv.ENV_ID}", {}, EnvSpec(num_envs=N, seed=0))
    yield env
    env.close()


def test_gym_pixel_observations_keep_uint8_and_their_bounds(pixel_env):
    space = pixel_env.observation_space["state"]
    assert space.dtype == np.uint8 and space.shape == (pixelenv.H, pixelenv.W, 3)
    assert int(space.low.min()) == 0 and int(space.high.max()) == 255
    obs = pixel_env.reset()["state"]
    assert obs.dtype == np.uint8 and obs.max() == 255
    res = pixel_env.step(np.zeros(N, int))
    assert res.obs["state"].dtype == np.uint8 and res.final_obs["state"].dtype == np.uint8


def test_rollout_storage_holds_uint8_and_the_encoder_sees_0_to_1(pixel_env):
    space = pixel_env.observation_space
    torch.manual_seed(0)
    policy = Policy(space, pixel_env.action_space, PolicyConfig(hidden_size=16))
    storage = RolloutStorage(4, N, space, pixel_env.action_space, policy.initial_memory(N),
                             torch.device("cpu"))
    assert storage.obs["state"].dtype == torch.uint8 and storage.obs["state"].element_size() == 1
    obs = obs_to_torch(pixel_env.reset(), torch.device("cpu"))
    assert obs["state"].dtype == torch.uint8
    storage.begin(obs, torch.ones(N), policy.initial_memory(N))
    np.testing.assert_array_equal(storage.obs["state"][0].numpy(), obs["state"].numpy())

    seen = []
    encoder = policy.encoders["state"].encoder
    encoder.register_forward_pre_hook(lambda _m, args: seen.append(args[0].detach().clone()))
    policy.act(obs, policy.initial_memory(N), torch.ones(N))
    x = seen[-1]
    assert x.dtype == torch.float32 and float(x.min()) >= 0.0 and float(x.max()) == pytest.approx(1.0)
    torch.testing.assert_close(x, obs["state"].permute(0, 3, 1, 2).float() / 255.0)


@pytest.mark.parametrize("low,high,dtype,expect", [
    (0, 255, np.uint8, lambda x: x / 255.0),
    (0.0, 255.0, np.float32, lambda x: x / 255.0),  # a float image in 0-255: the bounds say so
    (0.0, 10.0, np.float32, lambda x: x / 10.0),  # e.g. depth in metres
    (0.0, 1.0, np.float32, lambda x: x),
    (-1.0, 1.0, np.float32, lambda x: (x + 1.0) / 2.0),
    (-np.inf, np.inf, np.float32, lambda x: x),  # unbounded: unscaled
])
def test_image_scale_comes_from_the_space_bounds(low, high, dtype, expect):
    space = gymnasium.spaces.Box(low, high, (4, 5, 2), dtype)
    seen = []
    image = ImageInput(space, torch.nn.Identity())
    image.encoder.register_forward_pre_hook(lambda _m, args: seen.append(args[0]))
    raw = torch.from_numpy(space.sample()[None] if np.isfinite(high) else np.full((1, 4, 5, 2), 3.0, dtype))
    image(raw)
    torch.testing.assert_close(seen[0], expect(raw.permute(0, 3, 1, 2).double()).float())


def test_nature_cnn_is_the_dqn_papers_and_refuses_small_images():
    from ddppo.errors import ConfigError
    from ddppo.model.encoders import NatureCNN

    space = gymnasium.spaces.Dict({"state": gymnasium.spaces.Box(0, 255, (84, 84, 4), np.uint8)})
    policy = Policy(space, gymnasium.spaces.Discrete(4), PolicyConfig(image_encoder="nature", hidden_size=512,
                                                                      rnn_type="none"))
    cnn = policy.encoders["state"].encoder
    assert isinstance(cnn, NatureCNN)
    assert [tuple(m.weight.shape) for m in cnn.conv if hasattr(m, "weight")] == [(32, 4, 8, 8), (64, 32, 4, 4),
                                                                                 (64, 64, 3, 3)]
    assert cnn.fc[0].weight.shape == (512, 3136)  # 64 x 7 x 7 from 84 x 84
    action, *_ = policy.act({"state": torch.zeros(2, 84, 84, 4, dtype=torch.uint8)}, policy.initial_memory(2),
                            torch.ones(2))
    assert action.shape == (2,)
    with pytest.raises(ConfigError, match="nature needs images of at least 36x36 .* not 7x7"):
        NatureCNN((7, 7, 3), 64)


def test_grid_cnn_is_rl_starter_files_and_refuses_small_images():
    from ddppo.errors import ConfigError
    from ddppo.model.encoders import GridCNN

    space = gymnasium.spaces.Dict({"image": gymnasium.spaces.Box(0, 255, (7, 7, 3), np.uint8),
                                   "direction": gymnasium.spaces.Discrete(4)})
    policy = Policy(space, gymnasium.spaces.Discrete(7), PolicyConfig(image_encoder="grid", hidden_size=64,
                                                                      rnn_type="none"))
    cnn = policy.encoders["image"].encoder
    assert isinstance(cnn, GridCNN)
    assert [tuple(m.weight.shape) for m in cnn.conv if hasattr(m, "weight")] == [(16, 3, 2, 2), (32, 16, 2, 2),
                                                                                 (64, 32, 2, 2)]
    assert cnn.fc[0].weight.shape == (64, 64)  # 7x7 -> 6x6, pooled to 3x3 -> 2x2 -> 1x1, 64 channels
    assert GridCNN((9, 11, 3), 32).fc[0].weight.shape == (32, 64 * 2 * 3)  # 9x11 -> ... -> 2x3
    obs = {"image": torch.zeros(2, 7, 7, 3, dtype=torch.uint8), "direction": torch.tensor([0.0, 3.0])}
    action, *_ = policy.act(obs, policy.initial_memory(2), torch.ones(2))
    assert action.shape == (2,)
    with pytest.raises(ConfigError, match="grid needs images of at least 7x7 .* not 6x7"):
        GridCNN((6, 7, 3), 64)
