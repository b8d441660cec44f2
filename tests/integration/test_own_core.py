"""A memory core of your own, `policy.rnn_type=MODULE:NAME`: the custom-core guide's example
(docs/examples/decay_core.py, in an empty working directory) trains through the real `ddppo` console script,
`ddppo eval` evaluates it from the run's config.yaml, a larger budget resumes it, and `ddppo config` prints the
sizes the core states."""

from __future__ import annotations

import json
import shutil

from ddppo import checkpoint as ckpt
from test_own_environment import REPO, console_script, metrics, run

CORE = REPO / "docs" / "examples" / "decay_core.py"
SMALL = ["env.num_envs=4", "rollout.num_steps=16", "ppo.num_mini_batch=1", "ppo.epochs=1", "policy.hidden_size=16",
         "policy.rnn_type=decay_core:decay"]


def test_a_registered_core_trains_evaluates_and_resumes(tmp_path):
    shutil.copy(CORE, tmp_path / CORE.name)
    ddppo = console_script()
    res = run([ddppo, "train", "gridnav", "run.dir=run", "run.total_env_steps=128", *SMALL], tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    model = ckpt.load(tmp_path / "run" / "checkpoints" / "ckpt-2.pt")["model"]
    assert tuple(model["core.mix.weight"].shape) == (16, 32)  # the registered core's, under the policy's `core`

    res = run([ddppo, "eval", "run", "eval.num_episodes=2"], tmp_path)  # the run's config.yaml names the module
    assert res.returncode == 0, res.stderr[-3000:]
    assert json.loads((tmp_path / "run" / "eval" / "ckpt-2.json").read_text())["num_episodes"] == 2

    res = run([ddppo, "train", "gridnav", "run.dir=run", "run.total_env_steps=192", *SMALL], tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "resumed from" in res.stderr and "ckpt-2.pt" in res.stderr
    assert [r["update"] for r in metrics(tmp_path / "run")] == [1, 2, 3]

    res = run([ddppo, "config", "gridnav", *SMALL], tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    assert f"core (decay_core:decay): {2 * 16 * 16 + 16:,} parameters" in res.stdout  # DecayCore.sizes, on meta
    assert "memory per env: 64 bytes" in res.stdout  # its initial_memory: 16 float32
