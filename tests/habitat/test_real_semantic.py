"""The generated semantic annotations as the real habitat-sim loads them (skipped where habitat-sim does not import):
`semantic_scene.objects` lists every instance with its category, and a SEMANTIC sensor renders each object's id
exactly where the RGB view shows that object's colour. Also: ObjectNav view points are valid on its navmesh."""

import math
import os

import numpy as np
import pytest

habitat_sim = pytest.importorskip("habitat_sim")

from ddppo.envs.scenes.layout import Layout, LayoutParams  # noqa: E402
from ddppo.envs.scenes.objectnav_gen import ObjectNavGenParams, generate_for_scene  # noqa: E402
from ddppo.envs.scenes.interface import SimSettings  # noqa: E402
from ddppo.envs.scenes.scene_gen import generate_scenes  # noqa: E402
from ddppo.envs.scenes.semantic import semantic_objects  # noqa: E402
from ddppo.envs.scenes.sim import HabitatSim, quiet_logs_by_default, renderer_device  # noqa: E402
from habitat_testutil import habitat_gpu  # noqa: E402

GPU = habitat_gpu()


@pytest.fixture(scope="module")
def scene(tmp_path_factory):
    root = tmp_path_factory.mktemp("semantic")
    scenes, note = generate_scenes(str(root / "gen"), 1, seed=0, gpu_device_id=GPU,
                                   params=LayoutParams(size_min=6.0, size_max=7.0, max_rooms=2, max_furniture=3))
    assert scenes[0].navmesh and scenes[0].semantic, note
    return scenes[0]


def _camera(uuid, kind):
    spec = habitat_sim.CameraSensorSpec()
    spec.uuid, spec.sensor_type, spec.resolution, spec.position = uuid, kind, [96, 128], [0.0, 1.25, 0.0]
    return spec


@pytest.fixture()
def sim(scene):
    """A bare habitat-sim Simulator on the scene (no scene dataset config: the defaults find the annotations).
    Closed after each test: a second simulator made while it is open aborts habitat-sim 0.2.2 (see sim.py)."""
    quiet_logs_by_default()
    cfg = habitat_sim.SimulatorConfiguration()
    cfg.scene_id, cfg.gpu_device_id, cfg.enable_physics = scene.glb, renderer_device(GPU), False
    agent = habitat_sim.agent.AgentConfiguration()
    agent.sensor_specifications = [_camera("rgb", habitat_sim.SensorType.COLOR),
                                   _camera("semantic", habitat_sim.SensorType.SEMANTIC)]
    s = habitat_sim.Simulator(habitat_sim.Configuration(cfg, [agent]))
    s.pathfinder.load_nav_mesh(scene.navmesh)
    yield s
    s.close()


def test_semantic_scene_lists_every_instance_with_its_category(scene, sim):
    expected = [("Unknown", 0)] + [(o.category, o.id) for o in semantic_objects(Layout.load(scene.layout))]
    got = [(o.category.name(), int(o.id.rsplit("_", 1)[1])) for o in sim.semantic_scene.objects]
    assert got == expected
    assert {"wall", "floor", "ceiling"} <= {c.name() for c in sim.semantic_scene.categories}


def test_semantic_sensor_renders_each_object_where_rgb_shows_it(scene, sim):
    layout = Layout.load(scene.layout)
    objects = semantic_objects(layout)
    colour = {o.id: np.array(b.color) * 255 for o, b in zip(objects[3:], [b for b in layout.boxes
                                                                         if b.kind == "furniture"])}
    rng = np.random.default_rng(0)
    agree = masks = 0
    rendered = set()
    for _ in range(24):
        state = habitat_sim.AgentState()
        state.position = sim.pathfinder.get_random_navigable_point()
        yaw = rng.uniform(0, 2 * math.pi)
        state.rotation = np.quaternion(math.cos(yaw / 2), 0, math.sin(yaw / 2), 0)
        sim.get_agent(0).set_state(state)
        obs = sim.get_sensor_observations()
        sem, rgb = obs["semantic"], obs["rgb"][..., :3].astype(np.float64)
        rendered |= set(np.unique(sem).tolist())
        for ident, col in colour.items():
            mask = sem == ident
            if mask.sum() >= 20:
                masks += 1
                agree += int(np.abs(np.median(rgb[mask], axis=0) - col).max() < 30)
    assert {1, 2, 3} <= rendered and 0 not in rendered  # walls, floor, ceiling everywhere; no hole in the mesh
    assert masks >= 3 and agree == masks, f"{agree} of {masks} object masks show the object's colour"


def test_objectnav_view_points_are_navigable_and_reach_the_goal(scene):
    sim = HabitatSim(SimSettings(depth_sensor=False, gpu_device_id=GPU))
    try:
        params = ObjectNavGenParams(categories=("cabinet", "sofa", "plant", "bed", "table"), min_geodesic=0.5,
                                    max_geodesic=5.0)
        data = generate_for_scene(sim, scene.glb, "gen/gen_000.glb", 6, seed=0, params=params)
        for goals in data["goals_by_category"].values():
            for goal in goals:
                for vp in goal["view_points"]:
                    p = np.array(vp["agent_state"]["position"])
                    assert sim.is_navigable(p)
                    np.testing.assert_allclose(sim.snap_point(p), p, atol=1e-4)
        for ep in data["episodes"]:
            key = f"gen_000.glb_{ep['object_category']}"
            vps = [np.array(v["agent_state"]["position"]) for g in data["goals_by_category"][key]
                   for v in g["view_points"]]
            best = min(sim.geodesic_distance(np.array(ep["start_position"]), p) for p in vps)
            assert best == pytest.approx(ep["info"]["geodesic_distance"], abs=1e-4)
            assert 0.5 <= best <= 5.0
            assert os.path.basename(ep["scene_id"]) == "gen_000.glb"
    finally:
        sim.close()
