"""A frozen torchvision resnet18 loaded from a local file, end to end through the CLI: `ddppo train` keeps the
file's weights, a resume and `ddppo eval` need only the checkpoint, the Python API loads it, and a missing file,
a file of another model or a file changed at resume end with one line and exit 2.

Skips where torchvision does not import (CI's vision venv runs it with DDPPO_REQUIRE_VISION=1)."""

import json
import os
import subprocess
import sys

import numpy as np
import torch

from testutil import REPO, cli_env, vision_library

PREFIX = "encoders.state.encoder.backbone.model."  # pixelenv's observation key is "state"
NUM_ENVS, STEPS = 2, 8
TRAIN = ["configs/cartpole.yaml", "env.name=gym:pixelenv:PixelCartPole-v0", f"env.num_envs={NUM_ENVS}",
         f"rollout.num_steps={STEPS}", "ppo.epochs=2", "policy.hidden_size=16", "log.tensorboard=false",
         "log.interval_s=0.1", "run.torch_threads=1", "policy.image_encoder=torchvision:resnet18",
         "policy.freeze_encoder=true"]


def ddppo(*args: str) -> subprocess.CompletedProcess:
    env = cli_env()
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(REPO / "tests"), env.get("PYTHONPATH", "")])
    env["OMP_NUM_THREADS"] = "1"
    return subprocess.run([sys.executable, "-m", "ddppo", *args], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=600)


def random_weights(name: str, seed: int, path) -> dict:
    torch.manual_seed(seed)
    state = vision_library("torchvision").models.get_model(name, weights=None).state_dict()
    torch.save(state, path)
    return state


def backbone_of(checkpoint) -> dict:
    model = torch.load(checkpoint, map_location="cpu", weights_only=True)["model"]
    return {k[len(PREFIX):]: v for k, v in model.items() if k.startswith(PREFIX)}


def one_line_exit_2(proc: subprocess.CompletedProcess, says: str) -> None:
    assert proc.returncode == 2, proc.stderr[-3000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("ddppo: config error: ") and says in last, proc.stderr[-3000:]


def test_a_frozen_resnet18_from_a_file_trains_resumes_and_evaluates_from_the_checkpoint_alone(tmp_path):
    weights, run = tmp_path / "resnet18.pt", tmp_path / "run"
    state = random_weights("resnet18", 5, weights)
    proc = ddppo("train", *TRAIN, f"run.dir={run}", f"policy.encoder_weights={weights}",
                 f"run.total_env_steps={2 * NUM_ENVS * STEPS}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["update"] for r in rows] == [1, 2] and all(r["loss/grad_norm"] > 0 for r in rows)
    saved = backbone_of(run / "checkpoints" / "ckpt-2.pt")
    assert saved.keys() == {k for k in state if not k.startswith("fc.")}  # the classifier is not built
    assert all(torch.equal(saved[k], state[k]) for k in saved)  # frozen: still the file's after two updates

    weights.rename(tmp_path / "moved.pt")  # the checkpoint alone resumes
    proc = ddppo("train", *TRAIN, f"run.dir={run}", f"policy.encoder_weights={weights}",
                 f"run.total_env_steps={3 * NUM_ENVS * STEPS}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "is not there: the checkpoint holds the encoder weights" in proc.stderr
    saved = backbone_of(run / "checkpoints" / "ckpt-3.pt")
    assert all(torch.equal(saved[k], state[k]) for k in saved)

    random_weights("resnet18", 6, weights)  # a changed file at resume is refused, nothing written
    proc = ddppo("train", *TRAIN, f"run.dir={run}", f"policy.encoder_weights={weights}",
                 f"run.total_env_steps={4 * NUM_ENVS * STEPS}")
    one_line_exit_2(proc, f"policy.encoder_weights={weights} is not the file this run started with")
    assert not (run / "checkpoints" / "ckpt-4.pt").exists()

    weights.unlink()
    proc = ddppo("eval", str(run), "eval.num_episodes=2")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads((run / "eval" / "ckpt-3.json").read_text())

    from ddppo.api import Agent

    agent = Agent.from_checkpoint(run / "checkpoints" / "ckpt-3.pt")
    backbone = agent.policy.encoders["state"].encoder.backbone
    assert backbone.frozen and all(torch.equal(v, state[k]) for k, v in backbone.model.state_dict().items())
    action, _ = agent.act({"state": np.zeros((12, 16, 3), np.uint8)})
    assert int(action) in (0, 1)


def test_a_missing_file_or_one_of_another_model_is_one_line_before_anything_is_written(tmp_path):
    random_weights("resnet34", 0, tmp_path / "resnet34.pt")
    for weights, says in ((tmp_path / "nothere.pt", "nothere.pt: no such file"),
                          (tmp_path / "resnet34.pt", "does not fit torchvision:resnet18 (unexpected: layer1.2.")):
        run = tmp_path / f"run-{weights.stem}"
        proc = ddppo("train", *TRAIN, f"run.dir={run}", f"policy.encoder_weights={weights}", "run.total_env_steps=16")
        one_line_exit_2(proc, f"policy.encoder_weights={weights}")
        assert says in proc.stderr.strip().splitlines()[-1]
        assert not run.exists() or not any(run.iterdir())


def test_bench_encoders_runs_and_writes_its_figures(tmp_path):
    vision_library("timm")
    out = tmp_path / "encoders.json"
    proc = ddppo("bench", "encoders", "--encoder", "timm:test_vit", "--size", "16", "--envs", "2", "--steps", "2",
                 "--epochs", "1", "--minibatches", "1", "--rounds", "1", "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    figures = json.loads(out.read_text())
    assert set(figures["median_s"]) == {"trained", "frozen", "features kept", "encode once"}
    assert all(v > 0 for v in figures["median_s"].values())
