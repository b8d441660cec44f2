"""`ddppo bench habitat-baselines` on the real habitat-baselines 0.3.x stack (habitat-sim 0.3.x): a few updates of
each of its trainers through the benchmark, and the learning path's cross-evaluation (ddppo's export loaded by its
evaluator). Skips where habitat-baselines 0.3.x or habitat-sim does not import."""

from __future__ import annotations

import os
from importlib import metadata
from pathlib import Path

import pytest

pytestmark = [pytest.mark.multiprocess, pytest.mark.habitat_sim, pytest.mark.slow]
pytest.importorskip("habitat_sim")
pytest.importorskip("habitat_baselines")
try:
    _VERSION = metadata.version("habitat-baselines")
except metadata.PackageNotFoundError:
    _VERSION = ""
if not _VERSION.startswith("0.3."):
    pytest.skip(f"habitat-baselines 0.3.x is not installed ({_VERSION or 'none'})", allow_module_level=True)

from ddppo.benchmarks.peers import habitat_baselines_config_v03 as config_v03  # noqa: E402
from ddppo.benchmarks.peers.habitat_baselines import Bench, learning, steady_rate  # noqa: E402
from ddppo.envs.scenes.dataset import write_split  # noqa: E402
from ddppo.envs.scenes.episode_gen import EpisodeGenParams, generate_for_scene  # noqa: E402
from ddppo.envs.scenes.interface import SimSettings  # noqa: E402
from ddppo.envs.scenes.layout import LayoutParams  # noqa: E402
from ddppo.envs.scenes.scene_gen import generate_scenes  # noqa: E402
from ddppo.envs.scenes.sim import HabitatSim  # noqa: E402
from testutil import REPO  # noqa: E402

GPU = -1 if not os.environ.get("DDPPO_HABITAT_GPU") else int(os.environ["DDPPO_HABITAT_GPU"])
TINY = ["policy.architecture=habitat_baselines_simple", "policy.hidden_size=64", "policy.rnn_type=gru",
        "policy.rnn_layers=1", "env.num_envs=2", "env.num_workers=0", "rollout.num_steps=8", "run.torch_threads=1",
        "env.habitat.max_episode_steps=20", f"env.habitat.gpu_device_id={GPU}"]


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    """One generated scene with its navmesh, a train and a val split of its episodes; the benchmark's overrides."""
    root = tmp_path_factory.mktemp("hb03")
    scenes, note = generate_scenes(str(root / "scenes" / "gen"), 1, seed=0, gpu_device_id=GPU,
                                   params=LayoutParams(size_min=5.0, size_max=6.0, max_rooms=2, max_furniture=1))
    assert scenes[0].navmesh and os.path.isfile(scenes[0].navmesh), note
    sim = HabitatSim(SimSettings(depth_sensor=False, gpu_device_id=GPU))
    try:
        episodes = generate_for_scene(sim, scenes[0].glb, f"gen/{os.path.basename(scenes[0].glb)}", 6, seed=0,
                                      params=EpisodeGenParams(min_geodesic=1.0, max_geodesic=6.0))
    finally:
        sim.close()
    for split in ("train", "val"):
        write_split(str(root / "pointnav" / split), episodes)
    return [*TINY, f"env.habitat.dataset={root / 'pointnav' / 'train'}", f"env.habitat.scenes_dir={root / 'scenes'}"]


@pytest.mark.parametrize("side", ["hb-ddppo", "hb-ver"])
def test_each_03_trainer_runs_through_the_bench_and_yields_a_steady_rate(case, tmp_path, side):
    bench = Bench(str(REPO / "configs" / "pointnav_habitat_cpu.yaml"), case, tmp_path, "val")
    assert bench.hb_sides == ["hb-ddppo", "hb-ver"]
    run = bench.train(side, 1, 3)
    steps = [r["env_steps"] for r in run["curve"]]
    assert len(steps) == 3 and steps == sorted(steps) and steps[0] > 0, run["curve"]
    assert run["steady_steps_per_s"] and run["steady_steps_per_s"] > 0
    records = config_v03.read_train_log(Path(run["dir"]) / "stdout.log")
    assert run["steady_steps_per_s"] == pytest.approx(steady_rate(records))
    assert os.path.isfile(run["checkpoint"]) and run["profile"], run


def test_learning_path_cross_evaluates_both_checkpoints_with_both_evaluators(case, tmp_path):
    """2 updates each of ddppo and its DD-PPO, then each final checkpoint by both evaluators: ddppo's own through
    `ddppo export --habitat-version 0.3` into habitat-baselines 0.3.x's evaluator, which must load it."""
    bench = Bench(str(REPO / "configs" / "pointnav_habitat_cpu.yaml"), case, tmp_path, "val")
    result = learning(bench, [1], 2)
    assert [r["side"] for r in result["runs"]] == ["ddppo", "hb-ddppo"]
    for run in result["runs"]:
        for evaluator in ("ddppo", "habitat-baselines"):
            found = run["eval"][evaluator]
            assert found["episodes"] == 6 and found["success"] is not None and found["spl"] is not None, found
    assert len(list(tmp_path.glob("eval-habitat-baselines-of-ddppo-*/ckpt.0.pth"))) == 1  # the export it loaded
