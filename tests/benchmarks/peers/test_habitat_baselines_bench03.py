"""`ddppo bench habitat-baselines` against habitat-baselines 0.3.x: the Hydra mapping (checked by 0.3.x's own loader
where it is installed), both 0.3.x trainers' logs read back, and the three-side throughput rounds and ratios."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace

import pytest

from ddppo.benchmarks.peers import habitat_baselines_config_v03 as config_v03
from ddppo.benchmarks.peers.habitat_baselines import steady_rate, table, throughput
from ddppo.config import get_key, load_config
from ddppo.errors import ConfigError
from testutil import REPO

CPU = str(REPO / "configs" / "pointnav_habitat_cpu.yaml")
SIMPLE = ["policy.architecture=habitat_baselines_simple", "policy.hidden_size=512", "policy.rnn_type=gru",
          "policy.rnn_layers=1", "env.habitat.dataset=/data/pointnav/v1/train/train.json.gz",
          "env.habitat.scenes_dir=/data/scenes", "env.habitat.depth_width=128", "env.habitat.depth_height=96",
          "rollout.num_steps=128", "ppo.normalize_advantage=false", "run.seed=7", "env.habitat.turn_angle=15"]


def test_every_mapped_key_is_a_ddppo_key_and_both_trainers_get_the_same_settings(tmp_path):
    cfg = load_config(CPU, SIMPLE)
    for ddppo_key, _, get in config_v03.MAPPING:
        for key in ddppo_key.split(" + "):
            get_key(cfg, key if "." in key else f"policy.{key}")
        get(cfg)
    ddppo_side = config_v03.values(cfg, "hb-ddppo", tmp_path, 3, 1)
    ver = config_v03.values(cfg, "hb-ver", tmp_path, 3, 1)
    assert ddppo_side["habitat_baselines.trainer_name"] == "ddppo" and ver["habitat_baselines.trainer_name"] == "ver"
    assert ver["habitat_baselines.rl.ver.overlap_rollouts_and_learn"] is True
    assert {k: v for k, v in ver.items() if ".rl.ver." not in k and k != "habitat_baselines.trainer_name"} == \
        {k: v for k, v in ddppo_side.items() if k != "habitat_baselines.trainer_name"}
    assert ddppo_side["habitat.dataset.data_path"] == "/data/pointnav/v1/{split}/{split}.json.gz"
    assert ddppo_side["habitat.dataset.split"] == "train" and ddppo_side["habitat.seed"] == 7
    depth = "habitat.simulator.agents.main_agent.sim_sensors.depth_sensor."
    assert (ddppo_side[depth + "width"], ddppo_side[depth + "height"]) == (128, 96)
    assert ddppo_side["habitat.simulator.turn_angle"] == 15
    assert ddppo_side["habitat_baselines.rl.policy.main_agent.name"] == "PointNavBaselinePolicy"
    assert ddppo_side["habitat_baselines.rl.ppo.use_normalized_advantage"] is False
    assert (ddppo_side["habitat_baselines.num_updates"], ddppo_side["habitat_baselines.checkpoint_interval"]) == (3, 3)
    assert not any(".rgb_sensor." in k for k in ddppo_side)  # depth only: no RGB sensor keys
    rgb = config_v03.values(load_config(CPU, SIMPLE + ["env.habitat.rgb=true"]), "hb-ddppo", tmp_path, 3, 1)
    assert rgb["habitat.simulator.agents.main_agent.sim_sensors.rgb_sensor.width"] == cfg.env.habitat.rgb_width


def test_what_habitat_baselines_03_cannot_do_is_refused_by_name(tmp_path):
    for extra, named in ((["env.habitat.distance_reward_scale=2.0"], "distance_reward_scale"),
                         (["policy.architecture=ddppo"], "policy.architecture='ddppo'"),
                         (["env.habitat.dataset=/data/episodes.json.gz"], "env.habitat.dataset")):
        with pytest.raises(ConfigError, match=named):
            config_v03.values(load_config(CPU, SIMPLE + extra), "hb-ddppo", tmp_path, 3, 1)
    # 0.3.x has use_clipped_value_loss: mapped, not refused as 0.2.x must
    off = config_v03.values(load_config(CPU, SIMPLE + ["ppo.clip_value_loss=false"]), "hb-ver", tmp_path, 3, 1)
    assert off["habitat_baselines.rl.ppo.use_clipped_value_loss"] is False


DDPPO_LOG = """\
2026-12-01 10:00:00,100 Agent number of parameters: 1897605
2026-12-01 10:00:10,000 update: 1\tfps: 55.301\t
2026-12-01 10:00:10,000 Num updates: 1\tNum frames 1024
2026-12-01 10:00:10,000 Average window size: 1  distance_to_goal: 2.949  reward: -0.219  spl: 0.000  success: 0.000
2026-12-01 10:00:10,000 \tPerf Stats: trainer.rollout_collect: 3.000 trainer.step_env: 0.006 trainer.update_agent: 1.000
2026-12-01 10:00:20,500 update: 2\tfps: 55.424\t
2026-12-01 10:00:20,500 Num updates: 2\tNum frames 2048
2026-12-01 10:00:20,500 Average window size: 2  distance_to_goal: 2.873  reward: -0.136  spl: 0.125  success: 0.250
"""
VER_LOG = """\
2026-12-01 10:00:08,000 InferenceWorker-1 initialized
2026-12-01 10:00:10,000 update: 1\tfps: 56.5\twindow fps: 56.5\tframes: 1030
2026-12-01 10:00:10,000 Average window size: 12  reward: 0.010  distance_to_goal: 2.543  success: 0.000  spl: 0.000
2026-12-01 10:00:10,001 learner: learn: 200.0ms  update agent: 199.0ms  overlap_transfers: 1.7ms
2026-12-01 10:00:10,001 policy: rollout: 600.0ms  wait: 74.5ms  step policy: 7.1ms
2026-12-01 10:00:18,000 update: 2\tfps: 73.1\twindow fps: 73.1\tframes: 2030
"""


def test_both_03_trainers_logs_read_back_with_one_steady_rate_definition(tmp_path):
    (tmp_path / "ddppo.log").write_text(DDPPO_LOG)
    (tmp_path / "ver.log").write_text(VER_LOG)
    records = config_v03.read_train_log(tmp_path / "ddppo.log")
    assert [(r["update"], r["env_steps"], r["success"], r["spl"]) for r in records] == [(1, 1024, 0.0, 0.0),
                                                                                          (2, 2048, 0.25, 0.125)]
    assert steady_rate(records) == pytest.approx(1024 / 10.5)  # update 1 to update 2: start-up left out
    ver = config_v03.read_train_log(tmp_path / "ver.log")
    assert [(r["update"], r["env_steps"]) for r in ver] == [(1, 1030), (2, 2030)]
    assert steady_rate(ver) == pytest.approx(1000 / 8.0)
    assert config_v03.profile(tmp_path / "ddppo.log") == {"rollout (collect)": 0.75, "learn (update_agent)": 0.25}
    assert config_v03.profile(tmp_path / "ver.log")["learn (overlapped with rollout)"] == pytest.approx(0.25)


def test_03_throughput_rounds_rotate_over_all_sides_and_compare_each_ddppo_side_to_each_trainer():
    rates = {"ddppo": 100.0, "hb-ddppo": 80.0, "hb-ver": 125.0, "ddppo+ab": 150.0}
    order: list[str] = []

    def train(side, seed, updates):
        order.append(side)
        return {"steady_steps_per_s": rates[side], "wall_s": 1.0, "profile": {"learn": 0.5}}

    bench = SimpleNamespace(ab=["rollout.overlap_learning=true"], hb_sides=["hb-ddppo", "hb-ver"],
                            cfg=SimpleNamespace(run=SimpleNamespace(seed=0)), train=train)
    tp = throughput(bench, 2, 2)
    assert order == ["ddppo", "hb-ddppo", "hb-ver", "ddppo+ab", "hb-ddppo", "hb-ver", "ddppo+ab", "ddppo"]
    assert tp["ratios"] == pytest.approx({"ddppo/hb-ddppo": 1.25, "ddppo/hb-ver": 0.8, "ddppo+ab/hb-ddppo": 1.875,
                                          "ddppo+ab/hb-ver": 1.2, "ddppo+ab/ddppo": 1.5})
    assert "ratio_ddppo_over_hb" not in tp  # the 0.2.x keys only where its one side ran
    lines = table({"habitat_baselines_version": "0.3.3", "case": "c", "throughput": tp})
    assert "ratio ddppo+ab / hb-ver: 1.20x" in lines and "ratio ddppo / hb-ddppo: 1.25x" in lines, lines


def _hb_03() -> bool:
    try:
        from importlib import metadata

        return importlib.util.find_spec("habitat_baselines") is not None and \
            metadata.version("habitat-baselines").startswith("0.3.")
    except Exception:
        return False


@pytest.mark.skipif(not _hb_03(), reason="habitat-baselines 0.3.x is not installed (its Hydra loader checks the keys)")
@pytest.mark.parametrize("side", ["hb-ddppo", "hb-ver"])
def test_exp_config_is_accepted_by_habitat_baselines_03_own_loader(tmp_path, side):
    """Its get_config composes the written config with its structured configs (unknown keys and wrong types
    raise) and patches it as its run.py does; the values arrive where its trainers read them."""
    from habitat_baselines.config.default import get_config

    cfg = load_config(CPU, SIMPLE)
    real = get_config(str(config_v03.write_exp_config(cfg, side, tmp_path, 3, 1)))
    hb, sim = real.habitat_baselines, real.habitat.simulator
    assert hb.trainer_name == config_v03.TRAINERS[side] and hb.rl.ver.overlap_rollouts_and_learn == (side == "hb-ver")
    assert list(sim.agents.main_agent.sim_sensors) == ["depth_sensor"]
    depth = sim.agents.main_agent.sim_sensors.depth_sensor
    assert (depth.width, depth.height, depth.hfov, sim.turn_angle) == (128, 96, 90, 15)
    assert list(depth.position) == [0.0, cfg.env.habitat.sensor_height, 0.0]
    assert (hb.rl.ppo.num_steps, hb.rl.ppo.use_normalized_advantage, hb.rl.policy.main_agent.name) == \
        (128, False, "PointNavBaselinePolicy")
    assert (hb.rl.ppo.lr, hb.rl.ppo.max_grad_norm, hb.rl.ppo.ppo_epoch) == \
        (cfg.ppo.lr, cfg.ppo.max_grad_norm, cfg.ppo.epochs)
    assert real.habitat.task.measurements.success.success_distance == cfg.env.habitat.success_distance
    assert real.habitat.environment.max_episode_steps == cfg.env.habitat.max_episode_steps
    assert real.habitat.dataset.data_path == "/data/pointnav/v1/{split}/{split}.json.gz"
    assert real.habitat.task.lab_sensors.pointgoal_with_gps_compass_sensor.dimensionality == 2
    assert (hb.num_updates, hb.total_num_steps, hb.checkpoint_folder) == (3, -1.0, str(Path(tmp_path) / "ckpt"))
