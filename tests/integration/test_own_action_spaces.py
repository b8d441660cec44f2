"""MultiDiscrete and MultiBinary actions from a user's own gymnasium module (written into the test's folder,
`env.name=gym:MODULE:ID`): `ddppo train` runs a couple of updates, `ddppo eval` plays the checkpoint, the Python
API's Agent acts in the space, and a KL reference (ppo.kl_ref) of the same action space is scored."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from testutil import cli_env

MODULE = '''
import gymnasium
import numpy as np
from gymnasium import spaces


class Match(gymnasium.Env):
    """Reward: the share of action dimensions equal to the target shown."""

    def __init__(self, kind):
        self.action_space = spaces.MultiDiscrete([3, 2], start=[1, 0]) if kind == "md" else spaces.MultiBinary(3)
        self.observation_space = spaces.Dict({"target": self.action_space, "clock": spaces.Discrete(8)})

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.target = 0, self.action_space.sample()
        return {"target": self.target, "clock": 0}, {}

    def step(self, action):
        assert self.action_space.contains(action), action
        self.t += 1
        reward = float(np.mean(np.asarray(action) == self.target))
        self.target = self.action_space.sample()
        return {"target": self.target, "clock": self.t}, reward, False, self.t >= 8, {}


gymnasium.register("Match-v0", entry_point=Match, kwargs={"kind": "md"})
gymnasium.register("MatchBits-v0", entry_point=Match, kwargs={"kind": "mb"})
'''
SMALL = ["env.num_envs=4", "rollout.num_steps=16", "ppo.num_mini_batch=1", "ppo.epochs=2", "policy.hidden_size=32",
         "log.tensorboard=false", "run.torch_threads=1", "dist.device=cpu", "run.total_env_steps=128"]


def run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    res = subprocess.run([sys.executable, "-m", "ddppo", *args], cwd=cwd, env=cli_env(), capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    return res


def rows(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "match.py").write_text(MODULE)
    return tmp_path


def test_multidiscrete_trains_evaluates_and_is_scored_against_a_reference(workdir):
    run(["train", "cartpole", "run.dir=ref", "env.name=gym:match:Match-v0", *SMALL], workdir)
    assert [r["update"] for r in rows(workdir / "ref")] == [1, 2]
    run(["eval", "ref", "eval.num_episodes=4"], workdir)
    assert json.loads((workdir / "ref" / "eval" / "ckpt-2.json").read_text())["num_episodes"] == 4
    run(["train", "cartpole", "run.dir=tuned", "env.name=gym:match:Match-v0", "ppo.lr=0.01",
         "ppo.kl_ref.checkpoint=ref/checkpoints/ckpt-2.pt", *SMALL], workdir)
    kl = [r["loss/kl_ref"] for r in rows(workdir / "tuned")]
    assert len(kl) == 2 and all(np.isfinite(kl)) and kl[-1] > 0  # a fresh policy is not the reference


def test_multibinary_trains_and_the_api_acts_in_its_space(workdir):
    run(["train", "cartpole", "run.dir=bits", "env.name=gym:match:MatchBits-v0", *SMALL], workdir)
    assert [r["update"] for r in rows(workdir / "bits")] == [1, 2]
    script = ("import json\nimport numpy as np\nfrom ddppo.api import Agent\nagent = Agent.from_checkpoint('bits')\n"
              "action, _ = agent.act({'target': np.array([1, 0, 1], np.int8), 'clock': 3})\n"
              "print(json.dumps([str(action.dtype), action.tolist(), bool(agent.action_space.contains(action))]))")
    res = subprocess.run([sys.executable, "-c", script], cwd=workdir, env=cli_env(), capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr[-3000:]
    dtype, bits, contained = json.loads(res.stdout.splitlines()[-1])
    assert dtype == "int8" and len(bits) == 3 and set(bits) <= {0, 1} and contained
