"""`ddppo bench throughput|memory|sb3` run end to end on a tiny budget (figures are not checked, only that each
entry point runs and writes its JSON). The habitat case of `throughput` is in tests/habitat/test_bench_grid.py."""

import json

import pytest

from testutil import REPO

GRIDNAV_YAML = REPO / "configs" / "gridnav.yaml"

TINY_CASE = [str(GRIDNAV_YAML), "env.num_envs=2", "rollout.num_steps=4", "policy.hidden_size=8",
             "env.gridnav.map_size=7", "env.gridnav.num_maps=2", "ppo.num_mini_batch=1", "ppo.epochs=1"]


def test_bench_throughput(cli, tmp_path):
    out = tmp_path / "throughput.json"
    r = cli("bench", "throughput", "--rounds", "1", "--out", str(out), "--case", *TINY_CASE, cwd=tmp_path)
    assert r.returncode == 0, r
    (result,) = json.loads(out.read_text())
    assert "rollout/raw" in r.stdout and result["rollout_fps"] > 0 and result["train_fps"] > 0


def test_bench_rollout_modes(cli, tmp_path):
    out = tmp_path / "rollout.json"
    case = [*TINY_CASE, "env.num_workers=2", "env.gridnav.max_episode_steps=6"]
    r = cli("bench", "rollout", "--rounds", "1", "--out", str(out), "--case", *case, cwd=tmp_path)
    assert r.returncode == 0, r
    data = json.loads(out.read_text())
    (modes,) = data["modes"].values()
    assert modes["fixed"]["fps"] > 0 and modes["variable"]["fps"] > 0 and "var/fixed" in r.stdout
    (phase,) = data["rollout_phase"].values()
    assert phase["raw"] > 0 and phase["double_buffered"] > 0 and "bottleneck" in modes["variable"]["bottleneck"]


def test_bench_memory(cli, tmp_path):
    out = tmp_path / "memory.json"
    r = cli("bench", "memory", "--out", str(out), "--case", *TINY_CASE, cwd=tmp_path)
    assert r.returncode == 0, r
    (result,) = json.loads(out.read_text())
    assert result["num_envs"] == 2 and result["num_steps"] == 4 and result["analytic_bytes"] > 0


def test_bench_sb3(cli, tmp_path):
    from ddppo.benchmarks.peers import sb3_cartpole

    if not sb3_cartpole.available():
        pytest.skip("stable-baselines3 (the optional `bench` extra) is not installed")
    out = tmp_path / "sb3.json"
    r = cli("bench", "sb3", "--seeds", "1", "--budget", "512", "--out", str(out), cwd=tmp_path)
    assert r.returncode == 0, r
    data = json.loads(out.read_text())
    assert len(data["runs"]) == 1 and set(data["median"]) == {"ddppo", "sb3"}


def test_bench_sb3_without_the_extra_says_how_to_install(cli, tmp_path):
    from ddppo.benchmarks.peers import sb3_cartpole

    if sb3_cartpole.available():
        pytest.skip("stable-baselines3 is installed")
    r = cli("bench", "sb3", "--seeds", "1", "--budget", "64", "--out", str(tmp_path / "sb3.json"), cwd=tmp_path)
    assert r.returncode == 2 and "pip install" in r.stderr and not (tmp_path / "sb3.json").exists()


def test_bench_checkpoint_io(cli, tmp_path):
    """One update of the real trainer writes a checkpoint; its size is what its model and optimiser hold, and each
    save went through the trainer's path (only the newest kept)."""
    out = tmp_path / "checkpoint-io.json"
    work = tmp_path / "shared"
    work.mkdir()
    r = cli("bench", "checkpoint-io", "--repeats", "2", "--dir", str(work), "--out", str(out), "--case", *TINY_CASE,
            cwd=tmp_path)
    assert r.returncode == 0, r
    (result,) = json.loads(out.read_text())["results"]
    assert len(result["save_s"]) == 2 and len(result["serialise_s"]) == 2 and "MB/s" in r.stdout
    assert result["bytes"] > 3 * 4 * result["parameters"]  # parameters and Adam's two moments, float32, and more
    assert not list(work.iterdir())  # written where asked, then removed


def test_bench_memory_task(cli, tmp_path):
    """A core trains gridnav_memory and is evaluated; the run's success and fps are in the JSON."""
    out = tmp_path / "memory_task.json"
    r = cli("bench", "memory-task", "--cores", "transformer", "--seeds", "1", "--steps", "256",
            "--episodes", "2", "--out", str(out), "env.num_envs=4", "rollout.num_steps=16", "ppo.num_mini_batch=1",
            "ppo.epochs=1", "policy.hidden_size=16", cwd=tmp_path)
    assert r.returncode == 0, r
    runs = json.loads(out.read_text())["runs"]
    assert [x["variant"] for x in runs] == ["transformer"]
    assert all(0 <= x["success"] <= 1 and x["fps"] > 0 for x in runs) and "success per seed" in r.stdout


def test_bench_reward_model(cli, tmp_path):
    """The three cases train; the model's share of the time is 0 without it and above 0 when it scores every step."""
    out = tmp_path / "reward_model.json"
    r = cli("bench", "reward-model", "--rounds", "1", "--steps", "64", "--width", "8", "--out", str(out),
            *TINY_CASE, cwd=tmp_path)
    assert r.returncode == 0, r
    med = json.loads(out.read_text())["median"]
    assert set(med) == {"no reward model", "step", "terminal"} and all(m["fps"] > 0 for m in med.values())
    assert med["no reward model"]["reward_model_share"] == 0 and med["step"]["reward_model_share"] > 0
