"""`ddppo bench habitat-baselines`: the config mapping (against habitat-baselines 0.2.x's own config where it is
installed), its log reading, the steady-rate definition, and the refusal where it cannot run."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from ddppo.benchmarks.peers import habitat_baselines_config_v02 as config_v02
from ddppo.benchmarks.peers.habitat_baselines import parity, steady_rate
from ddppo.config import get_key, load_config
from ddppo.errors import ConfigError
from testutil import REPO, cli_env

CPU = str(REPO / "configs" / "pointnav_habitat_cpu.yaml")
SIMPLE = ["policy.architecture=habitat_baselines_simple", "policy.hidden_size=512", "policy.rnn_type=gru",
          "policy.rnn_layers=1", "env.habitat.dataset=/data/pointnav/v1/train/train.json.gz",
          "env.habitat.scenes_dir=/data/scenes", "env.habitat.depth_width=128", "env.habitat.depth_height=96",
          "rollout.num_steps=128", "ppo.normalize_advantage=false", "run.seed=7", "env.habitat.turn_angle=15"]


def opts(cfg, tmp_path: Path) -> dict[str, str]:
    flat = config_v02.options(cfg, tmp_path, 8 * 128 * 3, 1)
    return dict(zip(flat[0::2], flat[1::2]))


def test_every_mapped_key_is_a_ddppo_key_and_reaches_habitat_baselines(tmp_path):
    cfg = load_config(CPU, SIMPLE)
    for ddppo_key, _, get in config_v02.MAPPING:
        for key in ddppo_key.split(" + "):
            get_key(cfg, key if "." in key else f"policy.{key}")
        get(cfg)
    got = opts(cfg, tmp_path)
    assert got["TASK_CONFIG.DATASET.DATA_PATH"] == "/data/pointnav/v1/{split}/{split}.json.gz"
    assert got["TASK_CONFIG.DATASET.SPLIT"] == "train"
    assert (got["NUM_ENVIRONMENTS"], got["RL.PPO.num_steps"], got["TASK_CONFIG.SEED"]) == ("8", "128", "7")
    assert got["RL.POLICY.name"] == "PointNavBaselinePolicy" and got["RL.PPO.hidden_size"] == "512"
    assert got["RL.PPO.use_normalized_advantage"] == "False"
    assert (got["TASK_CONFIG.SIMULATOR.DEPTH_SENSOR.WIDTH"], got["TASK_CONFIG.SIMULATOR.DEPTH_SENSOR.HEIGHT"]) == \
        ("128", "96")
    assert got["TASK_CONFIG.SIMULATOR.TURN_ANGLE"] == "15"
    assert got["CHECKPOINT_INTERVAL"] == "3"  # its one checkpoint lands on the last update
    assert got["SENSORS"] == "['DEPTH_SENSOR']"


def test_what_habitat_baselines_cannot_do_is_refused_by_name(tmp_path):
    for extra, named in ((["env.habitat.distance_reward_scale=2.0"], "distance_reward_scale"),
                         (["policy.architecture=ddppo"], "policy.architecture='ddppo'"),
                         (["env.habitat.dataset=/data/episodes.json.gz"], "env.habitat.dataset"),
                         (["ppo.clip_value_loss=false"], "clip_value_loss")):
        with pytest.raises(ConfigError, match=named):
            config_v02.options(load_config(CPU, SIMPLE + extra), tmp_path, 1024, 1)


HB_LOG = """\
2026-12-01 10:00:00,100 config: ...
2026-12-01 10:00:10,000 update: 1\tfps: 90.000\t
2026-12-01 10:00:10,000 update: 1\tenv-time: 4.000s\tpth-time: 6.000s\tframes: 1024
2026-12-01 10:00:10,001 Average window size: 1  reward: -0.500  distance_to_goal: 5.000  success: 0.000  spl: 0.000
2026-12-01 10:00:20,500 update: 2\tenv-time: 8.000s\tpth-time: 12.500s\tframes: 2048
2026-12-01 10:00:20,501 Average window size: 2  reward: -0.250  distance_to_goal: 4.500  success: 0.250  spl: 0.125
"""


def test_habitat_baselines_train_log_read_back_and_steady_rate(tmp_path):
    (tmp_path / "train.log").write_text(HB_LOG)
    records = config_v02.read_train_log(tmp_path / "train.log")
    assert [(r["update"], r["env_steps"], r["success"], r["spl"]) for r in records] == [(1, 1024, 0.0, 0.0),
                                                                                          (2, 2048, 0.25, 0.125)]
    assert steady_rate(records) == pytest.approx(1024 / 10.5)  # update 1 to update 2: start-up left out
    assert steady_rate(records[:1]) is None
    (tmp_path / "eval.log").write_text("2026-12-01 10:00:00,000 Average episode success: 0.2500\n"
                                       "2026-12-01 10:00:00,000 Average episode spl: 0.1000\n")
    assert config_v02.read_eval_log(tmp_path / "eval.log") == {"success": 0.25, "spl": 0.1}


def test_parity_uses_the_reference_confidence_interval():
    def run(side, success):
        return {"side": side, "eval": {"ddppo": {"per_episode": {"success": success, "spl": [s / 2 for s in success]}}}}

    close = parity([run("ddppo", [1, 0, 1, 0]), run("habitat-baselines", [1, 1, 0, 0, 1, 0])])
    assert close["success"]["met"] and close["success"]["hb_ci95"][0] < 0.5 < close["success"]["hb_ci95"][1]
    far = parity([run("ddppo", [0] * 40), run("habitat-baselines", [1] * 30 + [0] * 10)])
    assert not far["success"]["met"] and not far["spl"]["met"]


def test_refuses_in_one_line_where_it_cannot_run():
    """Without habitat-baselines 0.2.x (or, where it is installed, without the default case's data): exit 2."""
    proc = subprocess.run([sys.executable, "-m", "ddppo", "bench", "habitat-baselines", "--out", "/dev/null"],
                          cwd=REPO, env=cli_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert "habitat-baselines" in proc.stderr or "does not exist" in proc.stderr


def _hb_02() -> bool:
    try:
        from importlib import metadata

        return importlib.util.find_spec("habitat_baselines") is not None and metadata.version("habitat").startswith(
            "0.2.")
    except Exception:
        return False


@pytest.mark.skipif(not _hb_02(), reason="habitat-baselines 0.2.x is not installed (its yacs config reads the keys)")
def test_options_are_accepted_by_habitat_baselines_own_config(tmp_path):
    """Its get_config type-checks every KEY VALUE against its defaults and the DD-PPO exp config; the values
    arrive where its trainer reads them."""
    from ddppo.benchmarks.peers.habitat_baselines import habitat_baselines_home
    from habitat_baselines.config.default import get_config

    _, exp, task = habitat_baselines_home()
    cfg = load_config(CPU, SIMPLE)
    flat = config_v02.options(cfg, tmp_path, 8 * 128 * 3, 1)
    real = get_config(str(exp), ["BASE_TASK_CONFIG_PATH", str(task), *flat])
    sim = real.TASK_CONFIG.SIMULATOR
    assert (sim.DEPTH_SENSOR.WIDTH, sim.DEPTH_SENSOR.HEIGHT, sim.TURN_ANGLE) == (128, 96, 15)
    assert list(sim.DEPTH_SENSOR.POSITION) == [0.0, cfg.env.habitat.sensor_height, 0.0]
    assert (real.RL.PPO.num_steps, real.RL.PPO.use_normalized_advantage, real.RL.POLICY.name) == \
        (128, False, "PointNavBaselinePolicy")
    assert (real.RL.PPO.lr, real.RL.PPO.max_grad_norm, real.RL.PPO.ppo_epoch) == \
        (cfg.ppo.lr, cfg.ppo.max_grad_norm, cfg.ppo.epochs)
    assert real.TASK_CONFIG.TASK.SUCCESS.SUCCESS_DISTANCE == cfg.env.habitat.success_distance
    assert real.TASK_CONFIG.ENVIRONMENT.MAX_EPISODE_STEPS == cfg.env.habitat.max_episode_steps
    assert real.TASK_CONFIG.DATASET.DATA_PATH == "/data/pointnav/v1/{split}/{split}.json.gz"


def test_the_ab_side_runs_in_every_round_in_rotating_order_and_is_compared_to_both():
    """--ab: a third side (ddppo with more overrides) interleaved with the other two; its ratios to both."""
    from types import SimpleNamespace

    from ddppo.benchmarks.peers.habitat_baselines import table, throughput

    rates = {"ddppo": 100.0, "habitat-baselines": 80.0, "ddppo+ab": 130.0}
    order: list[str] = []

    def train(side, seed, updates):
        order.append(side)
        return {"steady_steps_per_s": rates[side], "wall_s": 1.0, "profile": {"learn": 0.5}}

    bench = SimpleNamespace(ab=["rollout.overlap_learning=true"], cfg=SimpleNamespace(run=SimpleNamespace(seed=0)),
                            train=train)
    tp = throughput(bench, 3, 2)
    assert order == ["ddppo", "habitat-baselines", "ddppo+ab", "habitat-baselines", "ddppo+ab", "ddppo",
                     "ddppo+ab", "ddppo", "habitat-baselines"]
    assert tp["ratio_ab_over_hb"] == pytest.approx(130 / 80) and tp["ratio_ab_over_ddppo"] == pytest.approx(1.3)
    assert tp["ratio_ddppo_over_hb"] == pytest.approx(100 / 80)
    lines = table({"habitat_baselines_version": "0.2.2", "case": "c", "throughput": tp})
    assert any("rollout.overlap_learning=true: 1.62x habitat-baselines, 1.30x ddppo" in line for line in lines), lines
