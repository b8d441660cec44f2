"""The grid-world PointNav env: geometry, rewards, episodes, determinism, state."""

import heapq
import math

import numpy as np
import pytest

from ddppo.envs.base import EnvError, VecEnv
from ddppo.envs.gridnav.maps import geodesic_fields, parse_ascii
from ddppo.envs.gridnav.env import MOVE_FORWARD, STOP, TURN_LEFT, TURN_RIGHT, GridNav
from ddppo.envs.gridnav.options import GridNavOptions
from ddppo.envs.registry import make_vec_env
from ddppo.envs.base import EnvSpec

F, L, R = MOVE_FORWARD, TURN_LEFT, TURN_RIGHT
EAST, NORTH, WEST, SOUTH = 0, 1, 2, 3

# A wall (col 3, rows 1-2) between start (1,1) and goal (1,4): geodesic 7, euclidean 3.
WALL_MAP = parse_ascii("""
#######
#..#..#
#..#..#
#.....#
#######
""")


def hand_env(num_envs=1, maps=(WALL_MAP,), **overrides):
    opts = GridNavOptions(**{"min_geodesic": 1.0, **overrides})
    env = GridNav(opts, EnvSpec(num_envs=num_envs, seed=0), maps=list(maps))
    env.reset()
    return env


def run(env, actions):
    """Step env 0 (of a 1-env batch) through `actions`; returns the StepResults."""
    return [env.step(np.array([a])) for a in actions]


def dijkstra(free, goal, num_headings):
    """Reference shortest paths (plain Dijkstra, same move rules as the env)."""
    moves = [(0, 1), (-1, 0), (0, -1), (1, 0)]
    if num_headings == 8:
        moves += [(-1, 1), (-1, -1), (1, -1), (1, 1)]
    dist = np.full(free.shape, np.inf)
    dist[goal] = 0.0
    heap = [(0.0, goal)]
    while heap:
        d, (r, c) = heapq.heappop(heap)
        if d > dist[r, c]:
            continue
        for dr, dc in moves:
            rr, cc = r + dr, c + dc
            if not (free[rr, cc] and free[r + dr, c] and free[r, c + dc]):
                continue
            nd = d + math.hypot(dr, dc)
            if nd < dist[rr, cc] - 1e-9:
                dist[rr, cc] = nd
                heapq.heappush(heap, (nd, (rr, cc)))
    return dist


def test_factory_builds_a_vec_env_with_the_documented_spaces():
    env = make_vec_env("gridnav", {"num_maps": 4}, EnvSpec(num_envs=3, seed=0))
    assert isinstance(env, VecEnv) and isinstance(env, GridNav)
    obs = env.reset()
    assert obs["pointgoal"].shape == (3, 3) and obs["depth"].shape == (3, 16)
    assert all(v.dtype == np.float32 for v in obs.values())
    assert env.action_space.n == 4
    for _ in range(20):
        obs = env.step(np.random.default_rng(0).integers(0, 4, 3)).obs
        for i in range(3):
            assert env.observation_space.contains({k: v[i] for k, v in obs.items()})


@pytest.mark.parametrize("num_headings", [4, 8])
def test_geodesic_fields_match_dijkstra_on_generated_maps(num_headings):
    env = GridNav(GridNavOptions(num_maps=6, num_headings=num_headings, obstacle_density=0.1),
                  EnvSpec(num_envs=1, seed=3))
    t = env.tables
    for m in range(6):
        free = ~t.occupancy[m]
        for g in t.goals[m, :3]:
            want = dijkstra(free, divmod(int(g), free.shape[1]), num_headings).ravel()
            np.testing.assert_allclose(t.fields[m, list(t.goals[m]).index(g)], want, rtol=1e-6)


def test_hand_computed_geodesics():
    free = ~WALL_MAP
    field4 = geodesic_fields(free, np.array([1 * 7 + 4]), 4)[0].reshape(WALL_MAP.shape)
    assert field4[1, 1] == 7 and field4[3, 4] == 2 and field4[3, 3] == 3 and field4[1, 5] == 1
    assert np.isinf(field4[0, 0])
    field8 = geodesic_fields(free, np.array([1 * 7 + 4]), 8)[0].reshape(WALL_MAP.shape)
    assert field8[1, 1] == pytest.approx(dijkstra(free, (1, 4), 8)[1, 1])
    assert field8[1, 1] < field4[1, 1]


def test_rewards_collisions_success_and_spl_on_a_hand_route():
    env = hand_env(slack_reward=-0.01, success_reward=2.5)
    env.set_episode(0, start=(1, 1), goal=(1, 4), heading=EAST)
    assert env.geodesic_distance()[0] == 7
    # east, bump the wall, south x2, east x3 (one past: a detour), north x2, west, stop
    route = [F, F, R, F, F, L, F, F, F, L, F, F, L, F, STOP]
    geo_after = [6, 6, 6, 5, 4, 4, 3, 2, 3, 3, 2, 1, 1, 0, 0]
    results = run(env, route)
    prev = 7
    for res, geo, action in zip(results, geo_after, route):
        bonus = 2.5 if action == STOP else 0.0
        assert res.reward[0] == pytest.approx(-0.01 + (prev - geo) + bonus, abs=1e-6)
        prev = geo
    assert not any(r.done[0] for r in results[:-1])
    last = results[-1]
    assert last.terminated[0] and not last.truncated[0]
    (ep,) = last.episodes
    assert ep.env_index == 0
    assert ep.metrics["success"] == 1.0
    assert ep.metrics["collisions"] == 1
    assert ep.metrics["length"] == 15
    assert ep.metrics["spl"] == pytest.approx(7 / 9)
    assert ep.metrics["distance_to_goal"] == 0.0
    assert ep.metrics["return"] == pytest.approx(15 * -0.01 + 7 + 2.5, abs=1e-5)
    np.testing.assert_allclose(last.final_obs["pointgoal"][0], [0, 0, 0])


def test_stop_away_from_the_goal_terminates_without_success():
    env = hand_env(success_distance=0.5)
    env.set_episode(0, start=(1, 1), goal=(1, 4), heading=EAST)
    (res,) = run(env, [STOP])
    assert res.terminated[0] and not res.truncated[0]
    assert res.reward[0] == pytest.approx(-0.01)
    m = res.episodes[0].metrics
    assert m["success"] == 0 and m["spl"] == 0 and m["distance_to_goal"] == 7 and m["length"] == 1


def test_success_distance_is_geodesic():
    env = hand_env(success_distance=1.0)
    env.set_episode(0, start=(1, 2), goal=(1, 4), heading=EAST)  # euclidean 2 but geodesic 6
    assert run(env, [STOP])[0].episodes[0].metrics["success"] == 0
    env.set_episode(0, start=(1, 5), goal=(1, 4), heading=EAST)
    assert run(env, [STOP])[0].episodes[0].metrics["success"] == 1


def test_time_limit_truncates_and_reports_the_final_observation():
    env = hand_env(max_episode_steps=3)
    env.set_episode(0, start=(3, 1), goal=(1, 4), heading=EAST)
    results = run(env, [L, L, L])
    assert not results[1].done[0]
    last = results[2]
    assert last.truncated[0] and not last.terminated[0]
    # after three left turns the agent faces south; the goal (up 2, right 3) is behind-left
    np.testing.assert_allclose(last.final_obs["pointgoal"][0], [math.sqrt(13) * 2 / 7, -2 / math.sqrt(13),
                                                                 3 / math.sqrt(13)], rtol=1e-6)
    m = last.episodes[0].metrics
    assert m["length"] == 3 and m["success"] == 0 and m["spl"] == 0
    assert env.state_dict()["steps"][0] == 0  # a new episode started
    env.set_episode(0, start=(1, 5), goal=(1, 4), heading=WEST)
    last = run(env, [F, L, STOP])[-1]  # STOP on the last allowed step: a termination only
    assert last.terminated[0] and not last.truncated[0] and last.episodes[0].metrics["success"] == 1


def test_pointgoal_is_egocentric():
    env = hand_env()
    for heading, ahead, left in [(EAST, 3, 2), (NORTH, 2, -3), (WEST, -3, -2), (SOUTH, -2, 3)]:
        env.set_episode(0, start=(3, 1), goal=(1, 4), heading=heading)
        d = math.sqrt(13)
        np.testing.assert_allclose(env.observe()["pointgoal"][0], [d * 2 / 7, ahead / d, left / d], rtol=1e-6,
                                   atol=1e-7)


def test_depth_scan_on_a_hand_map():
    env = hand_env(num_rays=3, fov_degrees=180, max_range=6.0)
    env.set_episode(0, start=(1, 1), goal=(1, 4), heading=EAST)
    # right (south): wall enters at 2.5; ahead (east): 1.5; left (north): 0.5
    np.testing.assert_allclose(env.observe()["depth"][0], np.array([2.5, 1.5, 0.5]) / 6, atol=1e-3)
    env.set_episode(0, start=(3, 5), goal=(1, 4), heading=WEST)  # ahead: 4.5 to the west wall; right: 1.5 north
    np.testing.assert_allclose(env.observe()["depth"][0], np.array([2.5, 4.5, 0.5]) / 6, atol=1e-3)


def test_depth_scan_matches_ray_marching():
    # 4 headings: no ray runs exactly through cell corners, where marching is ambiguous
    opts = GridNavOptions(num_maps=3, num_rays=7, max_range=4.0, num_headings=4, obstacle_density=0.1)
    env = GridNav(opts, EnvSpec(num_envs=16, seed=5))
    env.reset()
    obs = env.observe()
    t_grid = np.arange(1, 4001) * 1e-3
    for i in range(16):
        top = env.topdown(i)
        occ, (r, c) = top["occupancy"], top["agent"]
        angles = top["heading_angle"] + (-np.pi + 2 * np.pi * (np.arange(7) + 0.5) / 7)
        for k, a in enumerate(angles):
            rows = np.floor(r + 0.5 - np.sin(a) * t_grid).astype(int)
            cols = np.floor(c + 0.5 + np.cos(a) * t_grid).astype(int)
            inside = (rows >= 0) & (rows < occ.shape[0]) & (cols >= 0) & (cols < occ.shape[1])
            hit = ~inside | occ[rows.clip(0, occ.shape[0] - 1), cols.clip(0, occ.shape[1] - 1)]
            want = t_grid[hit.argmax()] if hit.any() else 4.0
            assert obs["depth"][i, k] * 4.0 == pytest.approx(want, abs=5e-3)


def test_diagonal_rays_do_not_pass_between_diagonal_blocks():
    corner = parse_ascii("""
    ######
    #....#
    #.#..#
    #..#.#
    #....#
    ######
    """)
    env = hand_env(maps=[corner], num_headings=8, num_rays=1, fov_degrees=10, max_range=6.0)
    env.set_episode(0, start=(3, 2), goal=(1, 1), heading=1)  # north-east, towards the (2,2)/(3,3) corner
    assert env.observe()["depth"][0] * 6 == pytest.approx(math.sqrt(0.5), abs=1e-2)
    env.set_episode(0, start=(4, 1), goal=(1, 1), heading=1)  # passes the free (3,1)/(4,2) corner first
    assert env.observe()["depth"][0] * 6 == pytest.approx(1.5 * math.sqrt(2), abs=1e-2)
    run(env, [F, F])  # the same rule for moves: the first succeeds, the second would squeeze
    assert env.topdown(0)["agent"] == (3, 2)
    assert env.state_dict()["collisions"][0] == 1


@pytest.mark.parametrize("num_headings", [4, 8])
def test_shortest_path_oracle_reaches_success_1_and_spl_1(num_headings):
    env = GridNav(GridNavOptions(num_maps=16, num_headings=num_headings), EnvSpec(num_envs=32, seed=1))
    env.reset()
    episodes = []
    while len(episodes) < 200:
        episodes += env.step(env.oracle_actions()).episodes
    assert all(e.metrics["success"] == 1.0 for e in episodes)
    assert min(e.metrics["spl"] for e in episodes) == pytest.approx(1.0, abs=1e-5)
    assert all(e.metrics["collisions"] == 0 for e in episodes)


def test_episodes_start_in_one_region_at_least_min_geodesic_apart():
    env = GridNav(GridNavOptions(num_maps=8, min_geodesic=4.0), EnvSpec(num_envs=64, seed=2))
    env.reset()
    for _ in range(30):
        res = env.step(np.random.default_rng(0).integers(0, 4, 64))
        state = env.state_dict()
        fresh = state["steps"] == 0
        assert np.all(state["shortest"][fresh] >= 4.0) and np.all(np.isfinite(state["shortest"]))
    assert len({int(m) for m in env.state_dict()["map"]}) > 1
    assert res.reward.dtype == np.float32


def test_generated_maps_have_rooms_and_closed_borders():
    env = GridNav(GridNavOptions(num_maps=20, map_size=12), EnvSpec(num_envs=1, seed=0))
    occ = env.tables.occupancy
    assert occ.shape == (20, 12, 12)
    assert occ[:, 0].all() and occ[:, -1].all() and occ[:, :, 0].all() and occ[:, :, -1].all()
    interior_blocked = occ[:, 1:-1, 1:-1].sum(axis=(1, 2))
    assert (interior_blocked >= 8).mean() > 0.8  # walls of at least one split in most maps
    assert len({o.tobytes() for o in occ}) == 20


def test_same_seed_same_trajectory_other_seed_other():
    def trajectory(seed):
        env = GridNav(GridNavOptions(num_maps=8), EnvSpec(num_envs=8, seed=seed))
        out = [env.reset()["pointgoal"]]
        for a in np.random.default_rng(7).integers(0, 4, (100, 8)):
            res = env.step(a)
            out += [res.obs["pointgoal"], res.obs["depth"], res.reward]
        return np.concatenate([o.ravel() for o in out])

    np.testing.assert_array_equal(trajectory(4), trajectory(4))
    assert not np.array_equal(trajectory(4), trajectory(5))


def _plain(value):
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return all(_plain(v) for v in value)
    return isinstance(value, (int, float, bool, str, np.ndarray)) or value is None


def test_state_round_trip_continues_bit_identically():
    opts = GridNavOptions(num_maps=8, max_episode_steps=20)
    actions = np.random.default_rng(3).integers(0, 4, (200, 8))
    a = GridNav(opts, EnvSpec(num_envs=8, seed=9))
    a.reset()
    for act in actions[:50]:
        a.step(act)
    state = a.state_dict()
    assert _plain(state)
    b = GridNav(opts, EnvSpec(num_envs=8, seed=9))
    b.load_state_dict(state)
    for act in actions[50:]:
        ra, rb = a.step(act), b.step(act)
        for k in ra.obs:
            np.testing.assert_array_equal(ra.obs[k], rb.obs[k])
        np.testing.assert_array_equal(ra.reward, rb.reward)
        assert [e.metrics for e in ra.episodes] == [e.metrics for e in rb.episodes]


def test_state_from_other_maps_is_rejected():
    a = GridNav(GridNavOptions(num_maps=4), EnvSpec(num_envs=2, seed=1))
    b = GridNav(GridNavOptions(num_maps=4), EnvSpec(num_envs=2, seed=2))
    with pytest.raises(EnvError, match="different maps"):
        b.load_state_dict(a.state_dict())
    c = GridNav(GridNavOptions(num_maps=4), EnvSpec(num_envs=3, seed=1))
    with pytest.raises(EnvError, match="num_envs"):
        c.load_state_dict(a.state_dict())


def test_topdown_describes_the_episode():
    env = hand_env()
    env.set_episode(0, start=(1, 1), goal=(1, 4), heading=EAST)
    run(env, [F, R, F])
    top = env.topdown(0)
    assert top["occupancy"].shape == WALL_MAP.shape and top["occupancy"][1, 3]
    assert top["agent"] == (2, 2) and top["goal"] == (1, 4) and top["heading"] == SOUTH and top["map_index"] == 0
    np.testing.assert_array_equal(top["path"], [[1, 1], [1, 2], [1, 2], [2, 2]])


def test_bad_input_is_reported():
    with pytest.raises(EnvError, match="num_headings"):
        GridNav(GridNavOptions(num_headings=6), EnvSpec(num_envs=1, seed=0))
    env = GridNav(GridNavOptions(num_maps=2), EnvSpec(num_envs=2, seed=0))
    with pytest.raises(EnvError, match="reset"):
        env.step(np.zeros(2, int))
    env.reset()
    with pytest.raises(EnvError, match=r"\[0, 3\]"):
        env.step(np.array([0, 4]))
    with pytest.raises(EnvError, match="border"):
        GridNav(GridNavOptions(), EnvSpec(num_envs=1, seed=0), maps=[np.zeros((5, 5), bool)])
    with pytest.raises(EnvError, match="min_geodesic"):
        GridNav(GridNavOptions(min_geodesic=50), EnvSpec(num_envs=1, seed=0), maps=[WALL_MAP])


def test_expert_actions_are_the_oracles():
    from ddppo.envs.base import EnvSpec, expert_actions
    from ddppo.envs.gridnav.env import GridNav
    from ddppo.envs.gridnav.options import GridNavOptions

    env = GridNav(GridNavOptions(), EnvSpec(num_envs=3, seed=0))
    env.reset()
    assert expert_actions(env).tolist() == env.oracle_actions().tolist()
    assert expert_actions(object()) is None  # an env without an expert
