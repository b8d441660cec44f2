"""A short seeded learning run on a small gridnav map that fails if learning breaks.

Trains with the real CLI (~30 k env steps), then measures the success rate of the trained
policy and of an untrained one (same architecture, fresh initialisation) on the same held-out
episodes (a different seed: different maps and goals), sampling actions as in training.
"""

import json

import numpy as np
import pytest
import torch

from ddppo import checkpoint as ckpt
from ddppo.config import from_yaml_text
from ddppo.model.policy import Policy
from ddppo.envs.registry import make_vec_env
from ddppo.envs.base import EnvSpec

GRIDNAV = "configs/gridnav.yaml"
LEARN = {
    "run.seed": 0,
    "run.total_env_steps": 30720,  # 60 updates of 16 envs x 32 steps
    "env.num_envs": 16,
    "rollout.num_steps": 32,
    "ppo.num_mini_batch": 2,
    "ppo.epochs": 4,
    "ppo.lr": 1e-3,
    "ppo.lr_schedule": "constant",
    "policy.hidden_size": 64,
    "env.gridnav.map_size": 7,
    "env.gridnav.max_room_splits": 1,
    "env.gridnav.num_maps": 16,
    "env.gridnav.max_episode_steps": 24,
    "checkpoint.interval_updates": 1000,
    "log.window": 1,
    "log.interval_s": 5,
    "run.torch_threads": 1,
}


def success_rate(cfg, policy, episodes=160, seed=12345):
    """Fraction of successful episodes among the first `episodes` finished ones (16 envs)."""
    torch.manual_seed(seed)
    env = make_vec_env(cfg.env.name, cfg.env_options, EnvSpec(num_envs=16, seed=seed))
    try:
        obs = env.reset()
        hidden = policy.initial_memory(16)
        start = torch.ones(16)
        results = []
        while len(results) < episodes:
            x = {k: torch.from_numpy(np.asarray(v)) for k, v in obs.items()}
            action, _, _, hidden = policy.act(x, hidden, start)
            step = env.step(action.numpy())
            results += [ep.metrics["success"] for ep in step.episodes]
            obs, start = step.obs, torch.from_numpy(step.done.astype(np.float32))
        return float(np.mean(results[:episodes]))
    finally:
        env.close()


@pytest.mark.parametrize("overlap_learning", ["false", "true"], ids=["serial", "overlap_learning"])
def test_short_gridnav_run_learns(tmp_path, cli, overlap_learning):
    """Also with rollout.overlap_learning (one update of policy lag): the same thresholds."""
    run = tmp_path / "run"
    res = cli("train", GRIDNAV, f"run.dir={run}", *[f"{k}={v}" for k, v in LEARN.items()],
              f"rollout.overlap_learning={overlap_learning}")
    assert res.returncode == 0, res

    cfg = from_yaml_text((run / "config.yaml").read_text(), "config.yaml")
    _, data = ckpt.newest_valid(run)
    assert data["counters"]["env_steps"] == LEARN["run.total_env_steps"]
    env = make_vec_env(cfg.env.name, cfg.env_options, EnvSpec(num_envs=1, seed=0))
    obs_space, action_space = env.observation_space, env.action_space
    env.close()
    torch.manual_seed(7)
    untrained = Policy(obs_space, action_space, cfg.policy)
    trained = Policy(obs_space, action_space, cfg.policy)
    trained.load_state_dict(data["model"])
    before, after = success_rate(cfg, untrained), success_rate(cfg, trained)
    print(f"held-out success: untrained {before:.3f}, trained {after:.3f}")
    assert after >= 0.5 and after >= before + 0.35, (before, after)

    # the training log tells the same story: success rises from the first updates to the last ones
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    first = np.mean([r["train/success"] for r in rows[:3]])
    last = np.mean([r["train/success"] for r in rows[-5:]])
    print(f"train/success: first 3 updates {first:.3f}, last 5 updates {last:.3f}")
    assert last >= first + 0.3, (first, last)
