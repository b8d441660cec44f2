"""run.compile: the observation encoders compiled in place, with dynamic shapes; the same numbers as eager."""

from __future__ import annotations

import json

import pytest
import torch

from ddppo.config import load_config
from ddppo.errors import ConfigError
from ddppo.model.compiled import compile_policy, encoders


def test_a_policy_without_encoders_is_refused_naming_the_key():
    with pytest.raises(ConfigError, match=r"run\.compile=true: policy\.architecture=mine:net .*run\.compile=false"):
        compile_policy(torch.nn.Linear(2, 2), "mine:net")


@pytest.mark.slow
def test_a_compiled_run_trains_and_gives_the_eager_log_probs(tmp_path, caplog):
    from testutil import trainer_in_process
    from ddppo.model.build import make_policy

    cfg = load_config("configs/gridnav.yaml", [
        f"run.dir={tmp_path / 'run'}", "env.num_envs=4", "rollout.num_steps=16", "ppo.num_mini_batch=2",
        "policy.hidden_size=32", "run.torch_threads=1", "dist.device=cpu", "log.tensorboard=false",
        "run.total_env_steps=192", "run.compile=true", "normalize.obs=off"])
    caplog.set_level("INFO", logger="ddppo.model.compiled")
    with trainer_in_process(cfg) as trainer:
        assert trainer.train() == 0
        compiled = trainer.policy
        space, action_space = trainer.envs.observation_space, trainer.envs.action_space
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r for r in rows if "loss/total" in r] and all(r["loss/total"] == r["loss/total"] for r in rows
                                                          if "loss/total" in r)
    compiles = [r.getMessage() for r in caplog.records if "compiled in" in r.getMessage()]
    assert {m.split()[1] for m in compiles} == set(encoders(compiled))  # each encoder's compile time is logged
    eager = make_policy(space, action_space, cfg.policy)
    eager.load_state_dict(compiled.state_dict())
    torch.manual_seed(0)
    for T, N in ((2, 4), (5, 3), (9, 2)):  # batches no update had: no recompile (dynamic shapes), the same numbers
        obs = {k: torch.as_tensor(space[k].sample()).expand(T, N, *space[k].shape).float() + torch.rand(T, N, 1)
               for k in space.spaces}
        start, actions = (torch.rand(T, N) < 0.2).float(), torch.randint(0, int(action_space.n), (T, N))
        memory = {k: torch.randn_like(v) for k, v in eager.initial_memory(N).items()}
        got, want = compiled.evaluate(obs, memory, start, actions), eager.evaluate(obs, memory, start, actions)
        assert torch.allclose(got[0], want[0], atol=1e-5, rtol=0), (got[0] - want[0]).abs().max()
    assert len([r for r in caplog.records if "compiled in" in r.getMessage()]) == len(compiles)
