"""gridnav's first-person camera (env.gridnav.camera, envs/gridnav/camera.py) and goal_sensor=false: shapes, the
geometry of what a column sees, colours that tell walls, furniture and the goal apart, determinism, state."""

from __future__ import annotations

import numpy as np
import pytest

from ddppo.config import load_config
from ddppo.envs.base import EnvError, EnvSpec
from ddppo.envs.gridnav.maps import parse_ascii
from ddppo.envs.gridnav.env import MOVE_FORWARD, GridNav
from ddppo.envs.gridnav.options import GridNavOptions
from ddppo.errors import ConfigError

EAST, NORTH, WEST, SOUTH = 0, 1, 2, 3

# a corridor: from (1, 1) facing east, the end wall (col 6) is 4.5 cells from the agent's cell centre
CORRIDOR = parse_ascii("""
#######
#.....#
#######
""")
# an L: the goal at (1, 4) is in sight from (1, 1) facing east, and hidden by the wall from (3, 4) facing north
ROOM = parse_ascii("""
#######
#.....#
#####.#
#.....#
#######
""")
OPEN = parse_ascii("""
#######
#.....#
#.....#
#.....#
#######
""")


def camera_env(maps=(CORRIDOR,), num_envs=1, seed=0, **overrides):
    opts = GridNavOptions(**{"min_geodesic": 1.0, "camera": "rgbd", "camera_size": 64, "max_range": 10.0,
                             **overrides})
    env = GridNav(opts, EnvSpec(num_envs=num_envs, seed=seed), maps=list(maps) if maps else None)
    env.reset()
    return env


def is_goal_red(rgb: np.ndarray) -> np.ndarray:
    """Pixels of the goal's hue: red well above green and blue (no wall, furniture, floor or ceiling is)."""
    r, g, b = (rgb[..., k].astype(int) for k in range(3))
    return (r > 60) & (r > 2 * (g + b))


def is_blue(rgb: np.ndarray) -> np.ndarray:
    r, g, b = (rgb[..., k].astype(int) for k in range(3))
    return b > r + 60


@pytest.mark.parametrize("camera, size, keys", [
    ("depth", [48, 64], {"pointgoal": ((3,), np.float32), "depth": ((48, 64, 1), np.float32)}),
    ("rgb", 32, {"pointgoal": ((3,), np.float32), "rgb": ((32, 32, 3), np.uint8)}),
    ("rgbd", [16, 24], {"pointgoal": ((3,), np.float32), "depth": ((16, 24, 1), np.float32),
                        "rgb": ((16, 24, 3), np.uint8)}),
    ("none", 64, {"pointgoal": ((3,), np.float32), "depth": ((16,), np.float32)}),
])
def test_camera_observations_have_the_declared_shapes_and_dtypes(camera, size, keys):
    env = camera_env(maps=None, num_envs=3, camera=camera, camera_size=size, num_maps=2)
    obs = env.reset()
    assert {k: (v.shape[1:], v.dtype) for k, v in obs.items()} == keys
    assert {k: (s.shape, s.dtype) for k, s in env.observation_space.spaces.items()} == keys
    for _ in range(5):
        obs = env.step(np.random.default_rng(0).integers(0, 4, 3)).obs
        for i in range(3):
            assert env.observation_space.contains({k: v[i] for k, v in obs.items()})


def test_depth_image_as_uint8_is_the_float_image_scaled():
    as_float = camera_env(camera="depth", camera_depth_dtype="float32")
    as_bytes = camera_env(camera="depth", camera_depth_dtype="uint8")
    for env in (as_float, as_bytes):
        env.set_episode(0, start=(1, 2), goal=(1, 5), heading=EAST)
    depth, quantised = as_float.observe()["depth"][0], as_bytes.observe()["depth"][0]
    assert quantised.dtype == np.uint8 and as_bytes.observation_space["depth"].high.max() == 255
    np.testing.assert_array_equal(quantised, np.rint(depth * 255).astype(np.uint8))


def test_a_wall_ahead_is_seen_at_its_perpendicular_distance_and_height():
    env = camera_env(camera="depth", camera_size=64, camera_fov=90.0, max_range=10.0)
    env.set_episode(0, start=(1, 2), goal=(1, 1), heading=EAST)  # the goal behind
    depth = env.observe()["depth"][0, :, :, 0] * 10.0  # in cells
    # the end wall's face is 3.5 cells ahead: every column that sees it sees 3.5 (no fisheye bend)
    np.testing.assert_allclose(depth[31:33, 28:36], 3.5, rtol=1e-5)  # the columns within the corridor
    # f = 32 px (64 px over 90 degrees): the wall spans 32 * 0.5 / 3.5 = 4.6 px each side of the horizon: 10 rows
    centre = depth[:, 32]
    assert np.flatnonzero(np.isclose(centre, 3.5)).tolist() == list(range(27, 37))
    # the floor's bottom row is 32 * 0.5 / 31.5 cells away; the ceiling's top row too
    assert centre[63] == pytest.approx(16.0 / 31.5, rel=1e-5) and centre[0] == pytest.approx(centre[63])
    # one step closer, the wall is one cell nearer
    env.step(np.array([MOVE_FORWARD]))
    assert env.observe()["depth"][0, 32, 32, 0] * 10.0 == pytest.approx(2.5, rel=1e-5)


def test_depth_beyond_max_range_is_clipped_to_one():
    env = camera_env(camera="depth", max_range=2.0)
    env.set_episode(0, start=(1, 2), goal=(1, 1), heading=EAST)
    assert env.observe()["depth"][0, 32, 32, 0] == 1.0


def test_the_goal_is_red_when_in_view_and_absent_when_behind_or_occluded():
    env = camera_env(maps=(ROOM,), camera="rgb", camera_size=[48, 64])
    env.set_episode(0, start=(1, 1), goal=(1, 4), heading=EAST)
    rgb = env.observe()["rgb"][0]
    red = is_goal_red(rgb)
    assert red[:, 28:36].any()  # straight ahead, in the middle columns
    assert not red[:, :16].any() and not red[:, 48:].any()
    env.set_episode(0, start=(1, 1), goal=(1, 4), heading=WEST)  # behind the agent
    assert not is_goal_red(env.observe()["rgb"][0]).any()
    env.set_episode(0, start=(3, 4), goal=(1, 4), heading=NORTH)  # the wall (row 2) is in the way
    assert not is_goal_red(env.observe()["rgb"][0]).any()
    env.set_episode(0, start=(3, 5), goal=(1, 5), heading=NORTH)  # through the gap at (2, 5): seen again
    assert is_goal_red(env.observe()["rgb"][0]).any()


def test_furniture_and_walls_have_different_colours():
    env = camera_env(maps=None, camera="rgb", camera_size=32, num_maps=4, obstacle_density=0.2, seed=1)
    t, width = env.tables, env.map_shape[1]
    seen = {True: 0, False: 0}
    for m in range(4):
        occ, furniture = t.occupancy[m], t.furniture[m]
        assert furniture.any() and (occ & ~furniture).any()
        for r, c in zip(*np.nonzero(~occ)):
            if not (occ[r, c + 1] and seen[bool(furniture[r, c + 1])] < 3):  # a blocked cell right ahead (east)
                continue
            free = [g for g in np.flatnonzero(~occ.ravel() & (np.arange(occ.size) != r * width + c))]
            env.set_episode(0, start=(r, c), goal=divmod(int(free[0]), width), heading=EAST, map_index=m)
            centre = env.observe()["rgb"][0, 8:24, 12:20]  # wholly the adjacent block's face
            assert is_blue(centre).all() == bool(furniture[r, c + 1])
            assert not is_blue(centre).any() or furniture[r, c + 1]
            seen[bool(furniture[r, c + 1])] += 1
    assert seen == {True: 3, False: 3}


def test_camera_frames_are_deterministic_under_the_seed():
    def frames(seed):
        env = camera_env(maps=None, num_envs=4, seed=seed, camera="rgbd", camera_size=24, num_maps=3)
        out = [env.reset()]
        actions = np.random.default_rng(5).integers(0, 4, (30, 4))
        out += [env.step(a).obs for a in actions]
        return out

    first, again, other = frames(7), frames(7), frames(8)
    for a, b in zip(first, again):
        for k in a:
            np.testing.assert_array_equal(a[k], b[k])
    assert any(not np.array_equal(a["rgb"], b["rgb"]) for a, b in zip(first, other))


def test_save_and_restore_with_the_camera_gives_the_same_frames():
    env = camera_env(maps=None, num_envs=3, seed=2, camera="rgbd", camera_size=16, num_maps=3,
                     goal_visible_steps=4)
    actions = np.random.default_rng(1).integers(0, 4, (24, 3))
    for a in actions[:6]:
        env.step(a)
    state = env.state_dict()
    twin = camera_env(maps=None, num_envs=3, seed=2, camera="rgbd", camera_size=16, num_maps=3, goal_visible_steps=4)
    twin.load_state_dict(state)
    for k, v in env.observe().items():
        np.testing.assert_array_equal(twin.observe()[k], v)
    for a in actions[6:]:
        mine, theirs = env.step(a), twin.step(a)
        np.testing.assert_array_equal(mine.reward, theirs.reward)
        for k in mine.obs:
            np.testing.assert_array_equal(mine.obs[k], theirs.obs[k])


def test_without_the_goal_sensor_only_the_image_is_observed():
    env = camera_env(maps=(ROOM,), camera="rgb", goal_sensor=False)
    obs = env.observe()
    assert set(obs) == {"rgb"} and set(env.observation_space.spaces) == {"rgb"}
    env.set_episode(0, start=(1, 1), goal=(1, 3), heading=EAST)
    env.step(np.array([MOVE_FORWARD]))
    res = env.step(np.array([0]))  # STOP one cell short: the rules are the same as with the sensor
    assert res.episodes[0].metrics["success"] == 0.0


def test_a_goal_to_the_left_is_drawn_left_of_centre_and_one_to_the_right_right_of_it():
    env = camera_env(maps=(OPEN,), camera="rgb", camera_size=[32, 64])
    columns = {}
    for goal in ((2, 4), (1, 4), (3, 4)):  # ahead; 18 degrees to the left; to the right
        env.set_episode(0, start=(2, 1), goal=goal, heading=EAST)
        columns[goal] = np.flatnonzero(is_goal_red(env.observe()["rgb"][0]).any(axis=0))
    assert columns[(2, 4)].mean() == pytest.approx(31.5, abs=0.5)
    assert columns[(1, 4)].size and columns[(1, 4)].max() < 32
    assert columns[(3, 4)].size and columns[(3, 4)].min() >= 32
    np.testing.assert_array_equal(columns[(3, 4)], 63 - columns[(1, 4)][::-1])  # mirror images


@pytest.mark.parametrize("override, message", [
    ("env.gridnav.camera=fisheye", "env.gridnav.camera='fisheye' must be one of none, depth, rgb, rgbd"),
    ("env.gridnav.camera_size=[0,64]", "env.gridnav.camera_size=[0, 64] must be an int or [height, width], each "
                                       "in [1, 1024] pixels"),
    ("env.gridnav.camera_size=[64]", "env.gridnav.camera_size=[64] must be an int or [height, width]"),
    ("env.gridnav.camera_size=big", "env.gridnav.camera_size='big' must be an int or [height, width]"),
    ("env.gridnav.camera_fov=180", "env.gridnav.camera_fov=180.0 must be in (0, 180)"),
    ("env.gridnav.goal_sensor=false", "env.gridnav.goal_sensor=false with camera='none': the goal is then nowhere "
                                      "in the observation"),
])
def test_bad_camera_options_are_refused_in_one_line_naming_the_key(override, message):
    with pytest.raises(ConfigError) as err:
        load_config("gridnav", [override])
    assert message in str(err.value) and "\n" not in str(err.value)


def test_an_env_built_directly_refuses_bad_camera_options_too():
    with pytest.raises(EnvError, match=r"camera_size=\[64, 0\] must be"):
        GridNav(GridNavOptions(camera="depth", camera_size=[64, 0]), EnvSpec(num_envs=1, seed=0), maps=[CORRIDOR])
