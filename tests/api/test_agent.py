"""ddppo.api: `Agent` acts as `ddppo eval` acts (same observations -> same actions: recurrent state, observation
normalisation, Box clipping), for a batch and for one env; `train(cfg)` writes the run directory `ddppo train`
writes. Runs are trained through the real CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from ddppo import checkpoint as ckpt
from ddppo.api import Agent, load_config
from ddppo.eval.loading import resolve_config
from ddppo.eval.runner import Evaluator
from testutil import REPO, TINY, as_overrides, cli_env, gloo_context

# recurrent, continuous actions (clipped), observations normalised (normalize.obs=auto is on for Pendulum)
PENDULUM = ["env.name=gym:Pendulum-v1", "env.num_envs=2", "rollout.num_steps=16", "ppo.num_mini_batch=1",
            "ppo.epochs=1", "policy.hidden_size=16", "policy.rnn_type=gru", "run.total_env_steps=64",
            "log.tensorboard=false", "run.torch_threads=1", "dist.device=cpu", "eval.num_episodes=4",
            "env.gym.max_episode_steps=30"]


def ddppo(*args: str, cwd: Path = REPO) -> None:
    res = subprocess.run([sys.executable, "-m", "ddppo", *args], cwd=cwd, env=cli_env(), capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]


@pytest.fixture(scope="module")
def pendulum_run(tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("api") / "pendulum"
    ddppo("train", "cartpole", f"run.dir={run}", *PENDULUM)
    return run


def eval_steps(run: Path, overrides: tuple[str, ...] = ()
               ) -> tuple[list[dict], list[np.ndarray], list[np.ndarray]]:
    """What `ddppo eval` plays on `run`'s newest checkpoint: the observations its policy saw, the episode-start
    flags with them, and the actions the envs got."""
    cfg = resolve_config(str(run), list(overrides))
    ctx = gloo_context(seed=cfg.run.seed)
    seen, starts, actions = [], [], []
    try:
        ev = Evaluator(cfg, ctx, run / "eval", {})
        reset, step = ev.envs.reset, ev.envs.step

        def recording_reset(*a, **k):
            obs = reset(*a, **k)
            seen.append({k: v.copy() for k, v in obs.items()})
            starts.append(np.ones(ev.envs.num_envs, bool))
            return obs

        def recording_step(env_action):
            actions.append(np.array(env_action))
            res = step(env_action)
            seen.append({k: v.copy() for k, v in res.obs.items()})
            starts.append(res.done.copy())
            return res

        ev.envs.reset, ev.envs.step = recording_reset, recording_step
        try:
            assert ev.evaluate(ckpt.newest_valid(run)[0], 0) is not None
        finally:
            ev.close()
    finally:
        ctx.close()
    return seen[:len(actions)], starts[:len(actions)], actions


def test_agent_takes_the_actions_ddppo_eval_takes(pendulum_run):
    seen, starts, taken = eval_steps(pendulum_run)
    assert len(taken) == 60 and bool(np.any(starts[1:]))  # episodes ended and restarted within the record
    agent = Agent.from_checkpoint(pendulum_run)
    assert agent.policy.obs_norm is not None and agent.policy.core is not None  # normalised, recurrent
    state = None
    for obs, start, action in zip(seen, starts, taken):
        mine, state = agent.act(obs, state, episode_start=start)
        assert mine.shape == action.shape and np.array_equal(mine, action)
    assert np.abs(np.concatenate(taken)).max() <= 2.0  # Pendulum's bounds: clipped like eval's


def test_agent_acts_in_the_run_s_precision_as_ddppo_eval_does(pendulum_run, monkeypatch, caplog):
    from ddppo.model import precision

    if precision.bf16_problem(torch.device("cpu")) is not None:
        pytest.skip("this CPU has no native bf16")
    seen, starts, taken = eval_steps(pendulum_run, ("run.precision=bf16",))
    agent = Agent.from_checkpoint(pendulum_run, overrides=["run.precision=bf16"])
    assert agent.precision == "bf16"
    state = None
    for obs, start, action in zip(seen, starts, taken):
        mine, state = agent.act(obs, state, episode_start=start)
        assert np.array_equal(mine, action)
    fp32 = Agent.from_checkpoint(pendulum_run)
    state, differ = None, False
    for obs, start, action in zip(seen, starts, taken):
        mine, state = fp32.act(obs, state, episode_start=start)
        differ |= not np.array_equal(mine, action)
    assert differ  # bf16 and fp32 act a little differently: the agreement above is not by accident
    monkeypatch.setattr(precision, "bf16_problem", lambda device: "run.precision=bf16: no bf16 here; set fp32")
    import ddppo.eval.loading as loading

    monkeypatch.setattr(loading, "bf16_problem", precision.bf16_problem)
    with caplog.at_level("WARNING"):
        assert Agent.from_checkpoint(pendulum_run, overrides=["run.precision=bf16"]).precision == "fp32"
    assert "run.precision=bf16: no bf16 here: acting in fp32 instead" in caplog.text


def test_one_env_at_a_time_follows_its_own_episodes(pendulum_run):
    seen, starts, taken = eval_steps(pendulum_run)
    agent = Agent.from_checkpoint(pendulum_run / "checkpoints" / "ckpt-2.pt")  # a file: its stored config
    for env in range(2):
        state = None
        for obs, start, action in zip(seen, starts, taken):
            mine, state = agent.act({k: v[env] for k, v in obs.items()}, state, episode_start=bool(start[env]))
            assert mine.shape == (1,)
            np.testing.assert_allclose(mine, action[env], rtol=1e-5, atol=1e-5)  # batch of 1: other kernels


def test_act_names_what_is_wrong_with_an_observation(pendulum_run):
    agent = Agent.from_checkpoint(pendulum_run, observation_space=None)
    with pytest.raises(ValueError, match="lacks the keys"):
        agent.act({"other": np.zeros(3, np.float32)})
    with pytest.raises(ValueError, match=r"expected \(3,\)"):
        agent.act({"state": np.zeros((2, 4), np.float32)})
    action, state = agent.act(np.zeros(3, np.float32))  # one key: the bare array
    assert action.shape == (1,) and state["rnn"].shape == (1, 1, 16)  # the policy's memory: its GRU state, per env


def test_train_from_python_writes_what_the_cli_writes(tmp_path):
    overrides = as_overrides({**TINY, "run.total_env_steps": 256, "log.tensorboard": "false"})
    ddppo("train", "gridnav", f"run.dir={tmp_path / 'cli'}", *overrides)
    script = ("import sys; from ddppo.api import load_config, train; "
              "sys.exit(train(load_config('gridnav', sys.argv[1:])))")
    res = subprocess.run([sys.executable, "-c", script, f"run.dir={tmp_path / 'api'}", *overrides], cwd=tmp_path,
                         env=cli_env(), capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]

    def files(run: Path) -> list[str]:
        return sorted(str(p.relative_to(run)) for p in run.rglob("*") if p.is_file())

    cli, api = tmp_path / "cli", tmp_path / "api"
    assert files(cli) == files(api)
    strip = lambda text, run: text.replace(str(run), "RUN")  # noqa: E731
    assert strip((cli / "config.yaml").read_text(), cli) == strip((api / "config.yaml").read_text(), api)
    for a, b in zip(ckpt.list_checkpoints(cli), ckpt.list_checkpoints(api)):
        ma, mb = ckpt.load(a)["model"], ckpt.load(b)["model"]
        assert ma.keys() == mb.keys() and all(torch.equal(ma[k], mb[k]) for k in ma)
    rows = [[json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()] for run in (cli, api)]
    learnt = lambda row: {k: v for k, v in row.items() if k.startswith(("loss/", "train/"))}  # noqa: E731
    assert [learnt(r) for r in rows[0]] == [learnt(r) for r in rows[1]] and len(rows[0]) == 2
    assert load_config(api / "config.yaml").run.dir == str(api)


@pytest.mark.parametrize("native, expected", [(True, "bf16"), (False, "fp32")])
def test_agent_resolves_auto_as_a_run_would(pendulum_run, monkeypatch, native, expected):
    from ddppo.model import precision

    monkeypatch.setattr(precision, "cpu_has_bf16", lambda: native)
    assert Agent.from_checkpoint(pendulum_run, overrides=["run.precision=auto"]).precision == expected
