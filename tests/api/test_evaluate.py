"""ddppo.api.evaluate: an agent played in a gymnasium env, summarised with `ddppo eval`'s statistics and names;
a real checkpoint's Agent in gridnav's gymnasium id."""

from __future__ import annotations

import gymnasium
import pytest

import ddppo.envs  # noqa: F401  (registers gridnav's gymnasium ids)
from ddppo.api import Agent, evaluate
from ddppo.eval.stats import summarize
from testutil import REPO, TINY, as_overrides


class Expert:
    """Acts as gridnav's shortest-path expert (success 1, SPL 1), through Agent's `act` signature."""

    def __init__(self, env):
        self.env = env.unwrapped.env

    def act(self, obs, state=None, deterministic=True):
        return self.env.oracle_actions()[0], state


def test_the_expert_s_statistics_are_ddppo_eval_s():
    env = gymnasium.make("GridNav-v0")
    got = evaluate(Expert(env), env, episodes=5, seed=0)
    assert {"reward", "episode_length", "success", "spl"} <= set(got)
    assert got["success"]["mean"] == 1.0 and got["success"]["ci_method"] == "wilson" and got["success"]["count"] == 5
    assert got["success"]["ci95"] == pytest.approx(summarize([1.0] * 5, binary=True)["ci95"])
    assert got["spl"]["mean"] == pytest.approx(1.0)
    again = evaluate(Expert(env), env, episodes=5, seed=0)  # seeded resets: the same episodes
    assert again["reward"] == got["reward"] and got["reward"]["ci_method"] == "student-t"
    with pytest.raises(ValueError, match="episodes=0 must be >= 1"):
        evaluate(Expert(env), env, episodes=0)


def test_a_trained_agent_is_evaluated_in_gridnav_s_gymnasium_id(tmp_path, cli):
    run = tmp_path / "run"
    res = cli("train", str(REPO / "configs" / "gridnav.yaml"),
              *as_overrides({**TINY, "run.dir": run, "run.total_env_steps": 128, "log.tensorboard": False}))
    assert res.returncode == 0, res
    agent = Agent.from_checkpoint(run)
    env = gymnasium.make("GridNav-v0", map_size=TINY["env.gridnav.map_size"])
    got = evaluate(agent, env, episodes=3, seed=0)
    assert got["episode_length"]["count"] == 3 and got["episode_length"]["mean"] <= 100  # gridnav's own limit
    assert 0.0 <= got["success"]["mean"] <= 1.0
