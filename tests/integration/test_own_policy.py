"""A policy and an encoder of your own, registered by name: the custom-policy guide's example
(docs/examples/corridor_policy.py, beside corridor.py in an empty working directory) trains and evaluates
through the real `ddppo` console script, its weights are the registered network's, and a name its module does
not register is one line naming the registered ones."""

from __future__ import annotations

import json
import shutil

from ddppo import checkpoint as ckpt
from test_own_environment import EXAMPLE, SMALL, console_script, run

POLICY = EXAMPLE.with_name("corridor_policy.py")
OWN = ["policy.architecture=corridor_policy:deep_critic", "policy.vector_encoder=corridor_policy:layernorm_mlp"]


def test_a_registered_policy_and_encoder_train_and_evaluate(tmp_path):
    for example in (EXAMPLE, POLICY):
        shutil.copy(example, tmp_path / example.name)
    ddppo = console_script()
    res = run([ddppo, "train", "cartpole", "run.dir=run", "env.name=gym:corridor:Corridor-v0",
               "run.total_env_steps=128", *SMALL, *OWN], tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    model = ckpt.load(tmp_path / "run" / "checkpoints" / "ckpt-2.pt")["model"]
    assert {"critic.2.weight", "encoders.position.2.weight", "encoders.beside.2.weight"} <= set(model)
    res = run([ddppo, "eval", "run", "eval.num_episodes=2"], tmp_path)  # the run's config.yaml names the module
    assert res.returncode == 0, res.stderr[-3000:]
    assert json.loads((tmp_path / "run" / "eval" / "ckpt-2.json").read_text())["num_episodes"] == 2

    res = run([ddppo, "train", "cartpole", "run.dir=other", "policy.architecture=corridor_policy:deep_critics"],
              tmp_path)
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("ddppo:")]
    assert res.returncode == 2 and len(errors) == 1, res.stderr[-2000:]
    assert "does not register 'deep_critics'" in errors[0] and "deep_critic" in errors[0].split("one of")[1]
    assert not (tmp_path / "other").exists()
