"""The reward model between the envs and the learners (ddppo/rollout/reward_model.py), the scoring stage's local
scorer: one batched call per step on what each step produced; terminal mode scores ended episodes only; every
wrong output or exception is one RewardModelError naming the module. Its combination with the env's reward is the
stage's (tests/rollout/test_scoring.py)."""

from __future__ import annotations

import types

import numpy as np
import pytest
import torch

from ddppo.config import RewardConfig
from ddppo.envs.base import StepResult
from ddppo.errors import RewardModelError
from ddppo.rollout.reward_model import RewardModel
from ddppo.rollout.scoring import ScoredStep
from ddppo.timing import Timer


class Recorder(torch.nn.Module):
    """Reward = the first feature of the observation + 100 x done; records every call."""

    def __init__(self, out=None):
        super().__init__()
        self.calls, self.out = [], out

    def forward(self, obs, actions, episode_step, done):
        self.calls.append({"x": obs["x"].clone(), "actions": actions.clone(), "step": episode_step.clone(),
                           "done": done.clone()})
        if self.out is not None:
            return self.out(obs["x"])
        return obs["x"][:, 0] + 100.0 * done.float()


def result(x, final, terminated, truncated=None, idle=None, started=None):
    n = len(x)
    flag = (lambda f: None if f is None else np.asarray(f, bool))
    return StepResult({"x": np.asarray(x, np.float32).reshape(n, 1)}, np.ones(n, np.float32),
                      np.asarray(terminated, bool), np.zeros(n, bool) if truncated is None else np.asarray(truncated),
                      {"x": np.asarray(final, np.float32).reshape(n, 1)}, [], idle=flag(idle), started=flag(started))


def model(module, num_envs=3, **cfg):
    return RewardModel(RewardConfig(model="m:M", **cfg), num_envs, torch.device("cpu"), Timer(), module=module)


def score(rm, res, actions, env_index=None):
    """The model's rewards for the rows of `res` (row i is env env_index[i]), as the scoring stage submits them."""
    return rm.submit(ScoredStep(res, 0, actions, env_index)).result()


def test_step_mode_scores_every_env_in_one_call_on_what_its_step_produced():
    rec = Recorder()
    rm = model(rec)
    out = score(rm, result([1, 2, 3], [7, 8, 9], [False, True, False]), np.array([0, 1, 2]))
    assert len(rec.calls) == 1 and rm.calls == 1 and rm.scored == 3
    # env 1's episode ended: its final observation (8) is scored, not the next episode's first (2)
    assert rec.calls[0]["x"][:, 0].tolist() == [1.0, 8.0, 3.0]
    assert rec.calls[0]["step"].tolist() == [1, 1, 1] and rec.calls[0]["done"].tolist() == [False, True, False]
    np.testing.assert_allclose(out, [1.0, 108.0, 3.0])
    score(rm, result([1, 2, 3], [0, 0, 0], [False, False, False]), np.zeros(3))
    assert rec.calls[1]["step"].tolist() == [2, 1, 2]  # env 1 restarted its episode count


def test_terminal_mode_scores_only_ended_episodes_once():
    rec = Recorder()
    rm = model(rec, mode="terminal")
    assert score(rm, result([1, 2, 3], [0, 0, 0], [False] * 3), np.zeros(3)).tolist() == [0] * 3
    assert rec.calls == []  # no episode ended: no call at all
    out = score(rm, result([1, 2, 3], [4, 5, 6], [True, False, True]), np.zeros(3))
    assert len(rec.calls) == 1 and rec.calls[0]["x"][:, 0].tolist() == [4.0, 6.0]
    assert out.tolist() == [104.0, 0.0, 106.0]


def test_a_subset_of_envs_keeps_each_envs_own_episode_step():
    rec = Recorder()
    rm = model(rec)
    score(rm, result([1, 2], [0, 0], [False, False]), np.zeros(2), env_index=np.array([2, 0]))
    score(rm, result([1], [0], [False]), np.zeros(1), env_index=np.array([2]))
    assert rec.calls[1]["step"].tolist() == [2] and rm.episode_step.tolist() == [1, 0, 2]


def test_a_grpo_group_restarts_without_a_done_and_its_idle_members_are_neither_counted_nor_scored():
    """Envs 0 and 1 share one grouped episode (GRPO): env 0 ends first and waits, idle, until env 1 ends; then the
    group starts a new episode together: env 0's start comes on an idle row, without a done."""
    rec = Recorder()
    rm = model(rec, num_envs=2)
    no, both = [False, False], [True, True]
    steps = [  # (x, final, terminated, idle, started)
        ([1, 2], [0, 0], no, no, no),
        ([3, 4], [5, 0], [True, False], no, no),  # env 0 ends at its step 2: scored on its final observation
        ([5, 6], [0, 0], no, [True, False], no),  # env 0 waits: a no-op step, not scored
        ([7, 8], [0, 9], [False, True], [True, False], both),  # env 1 ends: the group restarts (env 0 idle, no done)
        ([1, 2], [0, 0], no, no, no),  # the new episode's first step, in both envs
    ]
    for x, final, terminated, idle, started in steps:
        score(rm, result(x, final, terminated, idle=idle, started=started), np.zeros(2))
    assert [c["step"].tolist() for c in rec.calls] == [[1, 1], [2, 2], [3], [4], [1, 1]]
    assert [c["x"][:, 0].tolist() for c in rec.calls] == [[1, 2], [5, 4], [6], [9], [1, 2]]
    assert [c["done"].tolist() for c in rec.calls] == [[False] * 2, [True, False], [False], [True], [False] * 2]
    assert rm.calls == 5 and rm.scored == 8  # the 2 idle rows cost nothing
    assert rm.episode_step.tolist() == [1, 1]


def test_idle_rows_get_no_model_reward_and_a_step_of_idle_rows_makes_no_call():
    rec = Recorder()
    rm = model(rec, num_envs=2, mode="step")
    assert score(rm, result([1, 2], [0, 0], [False, False], idle=[True, True]), np.zeros(2)).tolist() == [0, 0]
    assert rec.calls == [] and rm.calls == 0 and rm.scored == 0 and rm.episode_step.tolist() == [0, 0]
    out = score(rm, result([1, 2], [0, 7], [False, True], idle=[True, False]), np.zeros(2))
    assert out.tolist() == [0.0, 107.0] and rm.scored == 1
    terminal = model(Recorder(), num_envs=2, mode="terminal")
    score(terminal, result([1, 2], [0, 7], [False, True], idle=[True, False]), np.zeros(2))
    assert terminal.scored == 1 and terminal.module.calls[0]["step"].tolist() == [1]


def test_the_step_count_restarts_where_an_episode_starts_not_where_a_life_ends():
    """An env may end a learning episode and go on (Atari: a lost life is a termination, the game goes on:
    StepResult.started False): the model's episode step is the game's."""
    rec = Recorder()
    rm = model(rec, num_envs=2)
    score(rm, result([1, 2], [3, 4], [True, True], started=[False, True]), np.zeros(2))
    score(rm, result([1, 2], [0, 0], [False, False], started=[False, False]), np.zeros(2))
    assert [c["step"].tolist() for c in rec.calls] == [[1, 1], [2, 1]]


def test_grouped_gridnav_episodes_are_scored_at_their_own_steps():
    """The real grouped env (gridnav, GRPO's groups): every scored done row's step is the episode's length, and
    only the envs that stepped are scored."""
    import dataclasses

    from ddppo.envs.base import EnvSpec
    from ddppo.envs.gridnav.options import GridNavOptions
    from ddppo.envs.registry import make_vec_env

    n = 8
    options = dataclasses.asdict(GridNavOptions(max_episode_steps=12))
    envs = make_vec_env("gridnav", options, EnvSpec(num_envs=n, seed=5, group_size=4))
    envs.reset()
    class Steps(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.calls = []

        def forward(self, obs, actions, episode_step, done):
            self.calls.append({"step": episode_step.clone(), "done": done.clone()})
            return torch.zeros(len(done))

    rec = Steps()
    rm = RewardModel(RewardConfig(model="m:M"), n, torch.device("cpu"), Timer(), module=rec)
    rng = np.random.default_rng(0)
    ended, idle_rows = 0, 0
    for _ in range(80):
        res = envs.step(rng.integers(4, size=n))
        calls = len(rec.calls)
        rm.submit(ScoredStep(res, 0, np.zeros(n)))
        stepped = np.flatnonzero(~res.idle)
        idle_rows += n - stepped.size
        if not stepped.size:
            assert len(rec.calls) == calls
            continue
        got = rec.calls[-1]
        assert got["done"].tolist() == res.done[stepped].tolist()  # the stepped rows, in order
        lengths = {e.env_index: int(e.metrics["length"]) for e in res.episodes}
        for row, env in enumerate(stepped):
            if res.done[env]:
                assert int(got["step"][row]) == lengths[env]
                ended += 1
    assert ended >= 8 and idle_rows > 0  # the sequence ended episodes at different steps within groups


@pytest.mark.parametrize("out, message", [
    (lambda x: x.repeat(1, 2), r"returned \(3, 2\) for 3 envs: it must return one reward per env"),
    (lambda x: torch.full((3,), float("nan")), r"returned a non-finite reward \(nan\) for env 0 at its episode step 1"),
    (lambda x: [1, 2, 3], r"returned list for 3 envs"),
])
def test_a_wrong_output_is_one_line_naming_the_module(out, message):
    with pytest.raises(RewardModelError, match=r"reward.model='m:M' " + message):
        score(model(Recorder(out)), result([1, 2, 3], [0] * 3, [False] * 3), np.zeros(3))


def test_an_exception_in_the_model_is_one_line_naming_it():
    def boom(x):
        raise ValueError("bad input\nsecond line")

    with pytest.raises(RewardModelError) as err:
        score(model(Recorder(boom)), result([1, 2, 3], [0] * 3, [False] * 3), np.zeros(3))
    assert str(err.value).startswith("reward.model='m:M' raised ValueError: bad input (scoring 3 envs'")
    assert "\n" not in str(err.value)


def test_the_saved_identity_refuses_other_weights(tmp_path):
    from ddppo.files import file_sha256

    a, b = tmp_path / "a.pt", tmp_path / "b.pt"
    torch.save({"w": torch.zeros(1)}, a)
    torch.save({"w": torch.ones(1)}, b)
    saved = {"model": "m:M", "weights_sha256": file_sha256(str(a))}
    rm = RewardModel(RewardConfig(model="m:M", weights=str(b)), 3, torch.device("cpu"), Timer(),
                     module=types.SimpleNamespace())
    with pytest.raises(RewardModelError, match=r"reward.weights='.*b.pt' is not the file this run was trained with"):
        rm.shared_owners()["reward_model"].load_state_dict(saved)
    same = RewardModel(RewardConfig(model="m:M", weights=str(a)), 3, torch.device("cpu"), Timer(),
                       module=types.SimpleNamespace())
    same.shared_owners()["reward_model"].load_state_dict(saved)  # the same file: resumes


def test_a_model_that_cannot_be_built_or_frozen_is_one_line(tmp_path, monkeypatch):
    from ddppo.rollout.reward_model import build_reward_module

    (tmp_path / "rm_build_mod.py").write_text(
        "import torch\n\n\nclass Lazy(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.net = torch.nn.LazyLinear(4)\n\n\ndef broken(size):\n    raise KeyError(size)\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    cpu = torch.device("cpu")
    with pytest.raises(RewardModelError, match=r"reward.model='rm_build_mod:Lazy' cannot be frozen on cpu"):
        build_reward_module(RewardConfig(model="rm_build_mod:Lazy"), cpu)
    with pytest.raises(RewardModelError, match=r"building it with reward.kwargs=\{'size': 3\} failed: KeyError: 3"):
        build_reward_module(RewardConfig(model="rm_build_mod:broken", kwargs={"size": 3}), cpu)
    with pytest.raises(RewardModelError, match=r"'rm_build_mod:Nope'.*NAME must be a torch module class"):
        build_reward_module(RewardConfig(model="rm_build_mod:Nope"), cpu)


def test_the_model_scores_in_the_runs_precision():
    class DtypeOf(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin, self.seen = torch.nn.Linear(1, 1), []

        def forward(self, obs, actions, episode_step, done):
            out = self.lin(obs["x"].float())
            self.seen.append(out.dtype)
            return out

    for precision, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        module = DtypeOf()
        rm = RewardModel(RewardConfig(model="m:M"), 3, torch.device("cpu"), Timer(), module=module, precision=precision)
        out = score(rm, result([1, 2, 3], [0] * 3, [False] * 3), np.zeros(3))
        assert module.seen == [dtype] and out.dtype == np.float32  # the rewards the storage keeps: fp32
