"""Resume with environments that cannot restore their state, or with a changed number of them.

gymnasium envs cannot be put back into a saved state: on resume they start fresh episodes, and the
collector must act on THOSE observations, marked as episode starts with a zeroed recurrent state (not on
the saved observation of a state the env is no longer in, without a start mark, which makes GAE bootstrap
across an unmarked boundary), seeded from the resumed update so the run-start episodes are not replayed.
A changed `env.num_envs` (or `env.num_workers`) starts fresh environments, as a changed world size does,
for gym and for gridnav with GRPO (whose per-env carried returns no longer fit).
"""

import json

import numpy as np
import pytest
import torch

from ddppo.config import load_config
from ddppo.envs.registry import make_vec_env
from ddppo.envs.base import EnvSpec

CARTPOLE = "configs/cartpole.yaml"
GRIDNAV = "configs/gridnav.yaml"
GYM = ["env.num_envs=4", "rollout.num_steps=16", "ppo.epochs=2", "policy.hidden_size=16", "policy.rnn_type=gru",
       "log.tensorboard=false", "log.interval_s=0.1", "checkpoint.interval_updates=1"]


def _rows(run):
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def test_gym_resume_acts_on_fresh_marked_episodes_not_the_saved_observation(tmp_path, cli):
    from testutil import trainer_in_process

    run = tmp_path / "run"
    res = cli("train", CARTPOLE, f"run.dir={run}", *GYM, "run.total_env_steps=128")
    assert res.returncode == 0, res
    cfg = load_config(CARTPOLE, [f"run.dir={run}", *GYM, "run.total_env_steps=192"])
    with trainer_in_process(cfg) as trainer:
        assert trainer.progress.update == 2
        col = trainer.collector
        actual = np.array([e.unwrapped.state for e in trainer.envs._env.envs], np.float32)
        np.testing.assert_array_equal(col.obs["state"].numpy(), actual)  # the state the envs are in
        assert torch.equal(col.start, torch.ones(4))
        assert not col.memory["rnn"].any()
        run_start = make_vec_env(cfg.env.name, cfg.env_options, EnvSpec(num_envs=4, seed=trainer.ctx.seed))
        first = run_start.reset()["state"]
        run_start.close()
        assert not np.isclose(first, actual).all(axis=1).any()  # no env replays its run-start episode
        assert trainer.train() == 0
        assert torch.equal(trainer.learning.storage.episode_start[0], torch.ones(4))
    assert [r["update"] for r in _rows(run)] == [1, 2, 3]


@pytest.mark.parametrize("workers", [0, 2])
def test_gym_resume_with_more_envs_starts_them_fresh(tmp_path, cli, workers):
    run = tmp_path / "run"
    common = [f"run.dir={run}", *GYM[1:], f"env.num_workers={workers}"]
    res = cli("train", CARTPOLE, *common, "env.num_envs=4", "run.total_env_steps=128")
    assert res.returncode == 0, res
    res = cli("train", CARTPOLE, *common, "env.num_envs=8", "run.total_env_steps=256")
    assert res.returncode == 0, res
    assert "Traceback" not in res.stderr, res
    assert "env.num_envs changed from 4 to 8" in res.stderr, res
    assert [r["env_steps"] for r in _rows(run)] == [64, 128, 256]


def test_grpo_resume_with_more_envs_starts_fresh_groups(tmp_path, cli):
    run = tmp_path / "run"
    common = [f"run.dir={run}", "ppo.advantage=grpo", "ppo.group_size=4", "ppo.num_mini_batch=1",
              "rollout.num_steps=16", "ppo.epochs=1", "policy.hidden_size=16", "env.gridnav.map_size=7",
              "env.gridnav.num_maps=4", "env.gridnav.max_episode_steps=12", "log.tensorboard=false",
              "checkpoint.interval_updates=1"]
    res = cli("train", GRIDNAV, *common, "env.num_envs=4", "run.total_env_steps=128")
    assert res.returncode == 0, res
    res = cli("train", GRIDNAV, *common, "env.num_envs=8", "run.total_env_steps=256")
    assert res.returncode == 0 and "Traceback" not in res.stderr, res
    assert "env.num_envs changed from 4 to 8" in res.stderr, res
    assert [r["update"] for r in _rows(run)] == [1, 2, 3]
    for r in _rows(run):  # what is optimised: returns normalised in groups of 4 (population std: |z| <= sqrt(3))
        assert 0.0 < r["train/grpo_return_abs"] <= 3 ** 0.5 + 1e-6 and 0.0 <= r["train/grpo_return_zero_share"] <= 1.0
