"""Behaviour cloning: the gridnav expert is cloned to a high action accuracy on a tiny dataset, the run writes
ordinary checkpoints and metrics, resumes exactly, and bad input is one line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from imitation_helpers import config, one_rank, record_into

from ddppo.imitation.demonstrations import inflections, pad, split_ids
from ddppo.imitation import dataset as ds


@pytest.fixture(scope="module")
def demos(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("bc") / "demos"
    record_into(out, 48, shard_episodes=16)
    return out


def run_bc(run_dir: Path, data: Path, *overrides: str) -> dict:
    from ddppo.imitation.imitate import Imitation

    cfg = config(f"imitation.data={data}", f"run.dir={run_dir}", *overrides)
    with one_rank(cfg.run.seed) as ctx:
        run = Imitation(cfg, ctx)
        try:
            assert run.run() == 0
            return {k: v.clone() for k, v in run.policy.state_dict().items()}
        finally:
            run.close()


def metrics(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_clones_the_expert_to_a_high_action_accuracy(tmp_path: Path, demos: Path):
    run_bc(tmp_path / "bc", demos, "imitation.updates=60", "imitation.lr=3e-3")
    rows = metrics(tmp_path / "bc")
    assert [r["update"] for r in rows] == list(range(1, 61))
    assert rows[0]["imitate/accuracy"] < 0.7  # an untrained policy does not already act as the expert
    assert rows[-1]["imitate/accuracy"] > 0.85 and rows[-1]["imitate/val_accuracy"] > 0.8
    assert rows[-1]["imitate/loss"] < rows[0]["imitate/loss"] / 2
    assert rows[-1]["env_steps"] == sum(r["env_steps"] - p["env_steps"] for p, r in zip([{"env_steps": 0}] + rows,
                                                                                        rows))


def test_checkpoint_is_an_ordinary_one_the_api_acts_with(tmp_path: Path, demos: Path):
    from ddppo.api import Agent

    state = run_bc(tmp_path / "bc", demos, "imitation.updates=3", "imitation.inflection_weighting=true",
                   "imitation.chunk_length=4")
    agent = Agent.from_checkpoint(tmp_path / "bc")
    assert all(torch.equal(agent.policy.state_dict()[k], v) for k, v in state.items())
    assert agent.policy.critic is not None  # a value head for fine-tuning with PPO (checkpoint.path)
    action, _ = agent.act({"pointgoal": np.zeros(3, np.float32), "depth": np.ones(config().env.gridnav.num_rays,
                                                                                   np.float32)})
    assert action.shape == ()


def test_resume_continues_exactly(tmp_path: Path, demos: Path):
    straight = run_bc(tmp_path / "a", demos, "imitation.updates=4", "checkpoint.interval_updates=2")
    run_bc(tmp_path / "b", demos, "imitation.updates=2")
    resumed = run_bc(tmp_path / "b", demos, "imitation.updates=4", "checkpoint.interval_updates=2")
    assert all(torch.equal(straight[k], resumed[k]) for k in straight)
    assert [r["update"] for r in metrics(tmp_path / "b")] == list(range(1, 5))


@pytest.mark.parametrize("core", ["gru", "transformer"])
def test_chunks_carry_the_state(tmp_path: Path, demos: Path, core: str):
    """Chunks of 2 steps give the whole-episode loss exactly on the forward pass (the policy's memory carried: a
    GRU's state, or the transformer's KV cache)."""
    from ddppo.imitation.imitate import bc_loss
    from ddppo.model.build import make_policy

    data = ds.Dataset(demos)
    eps = data.load()
    cfg = config(f"policy.rnn_type={core}", "policy.transformer.context=16")
    import gymnasium

    space = gymnasium.spaces.Dict({k: gymnasium.spaces.Box(-np.inf, np.inf, v.shape[1:], np.float32)
                                   for k, v in eps.obs.items()})
    policy = make_policy(space, gymnasium.spaces.Discrete(4), cfg.policy)
    from ddppo.imitation.demonstrations import select

    batch = pad(select(eps, np.arange(6)), 1.0, torch.device("cpu"))
    whole, w1, _ = bc_loss(policy, batch, 0)
    chunked, w2, _ = bc_loss(policy, batch, 2)
    assert float(w1) == float(w2) == float(batch.valid.sum())
    torch.testing.assert_close(whole, chunked, rtol=1e-5, atol=1e-5)
    with torch.no_grad():
        bf16, _, _ = bc_loss(policy, batch, 2, "bf16")  # run.precision=bf16: the forwards autocast, the loss float32
    assert bf16.dtype == torch.float32 and abs(bf16.item() - whole.item()) < 0.05 * abs(whole.item())


def test_inflection_weights_and_split():
    actions = np.array([1, 1, 2, 2, 0, 3, 3, 1])
    starts = np.array([0, 5])
    assert inflections(actions, starts).tolist() == [False, False, True, False, True, False, False, True]
    eps = ds.Episodes({"x": np.zeros((8, 1), np.float32)}, actions, np.zeros(8, np.float32), np.array([5, 3]),
                      np.ones(2, np.float32), np.ones(2, bool))
    weight = pad(eps, 3.0, torch.device("cpu")).weight
    assert weight[:, 0].tolist() == [1, 1, 3, 1, 3] and weight[:, 1].tolist() == [1, 1, 3, 0, 0]
    train, val = split_ids(10, 0.25)
    assert val.tolist() == [3, 7] and sorted([*train, *val]) == list(range(10))


def test_bad_dataset_is_one_line_exit_2(tmp_path: Path, demos: Path, capsys):
    from ddppo.cli import main

    assert main(["imitate", "gridnav", f"imitation.data={tmp_path}/nothing", f"run.dir={tmp_path}/r"]) == 2
    err = capsys.readouterr().err.strip()
    assert "manifest.json does not exist" in err and err.count("\n") == 0 and err.startswith("ddppo: ")
    assert main(["imitate", "gridnav", f"imitation.data={demos}", f"run.dir={tmp_path}/r",
                 "env.gridnav.num_rays=5"]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("ddppo: ")]
    assert len(errors) == 1 and "observation 'depth'" in errors[0]
    assert not (tmp_path / "r" / "checkpoints").exists()  # nothing written


def test_rank_shares_split_the_episodes(demos: Path):
    from ddppo.imitation.demonstrations import RankDemonstrations

    data = ds.Dataset(demos)
    shares = [RankDemonstrations(data, 0.25, r, 3, seed=1) for r in range(3)]
    assert sum(s.train.num_episodes for s in shares) == 36 and sum(s.val.num_episodes for s in shares) == 12
    everything = data.load()
    firsts = sorted(float(s.train.obs["depth"][i].sum()) for s in shares for i in s.train.starts)
    _, held = split_ids(48, 0.25)
    kept = [i for i in range(48) if i not in set(held)]
    assert firsts == sorted(float(everything.obs["depth"][everything.starts[i]].sum()) for i in kept)
    empty = RankDemonstrations(data, 0.0, 0, 2, seed=1)
    assert empty.val.num_episodes == 0 and empty.val_batches(4, torch.device("cpu")) == []
    order = shares[0].episode_order(1, 40)  # more than a pass: every episode once per pass
    assert sorted(order[:12].tolist()) == list(range(12))


def test_box_actions_are_cloned_by_their_log_probability():
    """Box actions: the loss is the Gaussian's negative log-likelihood of the expert's action; its mean moves to it."""
    import gymnasium

    from ddppo.imitation.imitate import bc_loss
    from ddppo.model.build import make_policy

    cfg = config("policy.rnn_type=none")
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(40, 3)).astype(np.float32)
    eps = ds.Episodes({"x": obs}, np.tanh(obs[:, :2] * 2).astype(np.float32), np.zeros(40, np.float32),
                      np.array([10, 10, 20]), np.ones(3, np.float32), np.ones(3, bool))
    space = gymnasium.spaces.Dict({"x": gymnasium.spaces.Box(-np.inf, np.inf, (3,), np.float32)})
    torch.manual_seed(0)
    policy = make_policy(space, gymnasium.spaces.Box(-1, 1, (2,), np.float32), cfg.policy)
    batch = pad(eps, 1.0, torch.device("cpu"))
    opt = torch.optim.Adam(policy.parameters(), lr=1e-2)
    first = None
    for _ in range(60):
        loss, weight, hits = bc_loss(policy, batch, 0)
        mse = float((hits * batch.valid).sum() / batch.valid.sum())
        first = mse if first is None else first
        opt.zero_grad()
        (loss / weight).backward()
        opt.step()
    assert mse < first / 4


def box_dataset(out: Path, cfg, episodes: int = 8, steps: int = 10) -> None:
    """A dataset of `cfg`'s env (a Box action space) written shard by shard as `ddppo record` writes one, its
    actions drawn at random in the action space: an expert to clone without training one first."""
    from ddppo.envs.base import EnvSpec
    from ddppo.envs.registry import make_vec_env
    from ddppo.imitation.record import RecordRequest, header

    envs = make_vec_env(cfg.env.name, cfg.env_options, EnvSpec(num_envs=1, seed=0))
    try:
        head = header(cfg, RecordRequest(episodes, str(out)), envs, 1)
        space = envs.observation_space
    finally:
        envs.close()
    rng = np.random.default_rng(0)
    n = episodes * steps
    obs = {k: rng.uniform(-1, 1, (n, *s.shape)).astype(s.dtype) for k, s in space.spaces.items()}
    actions = rng.uniform(-2, 2, (n, 1)).astype(np.float32)
    (out / ds.SHARDS).mkdir(parents=True)
    entry = ds.write_shard(out, 0, 0, ds.Episodes(obs, actions, np.zeros(n, np.float32), np.full(episodes, steps),
                                                  np.zeros(episodes, np.float32), np.zeros(episodes, bool)))
    ds.write_journal(out, 0, [entry])
    ds.write_manifest(out, head, complete=True)


def test_box_actions_log_the_action_mse(tmp_path: Path, caplog):
    """Box actions: imitate/action_mse and imitate/val_action_mse, the squared error of the mean action (>= 0), in
    metrics.jsonl and the log line, and no accuracy."""
    pendulum = ("env.name=gym:Pendulum-v1", "policy.rnn_type=none", "imitation.inflection_weighting=false",
                "imitation.updates=2", "imitation.eval_interval_updates=1")
    box_dataset(tmp_path / "demos", config(*pendulum))
    with caplog.at_level("INFO", logger="ddppo.imitation.imitate"):
        run_bc(tmp_path / "bc", tmp_path / "demos", *pendulum)
    rows = metrics(tmp_path / "bc")
    assert [r["update"] for r in rows] == [1, 2]
    for row in rows:
        assert row["imitate/action_mse"] > 0 and row["imitate/val_action_mse"] > 0
        assert "imitate/accuracy" not in row and "imitate/val_accuracy" not in row
    assert "update 2/2: loss" in caplog.text and ", action_mse " in caplog.text


@pytest.mark.parametrize("sig, requeued", [("SIGUSR1", 1), ("SIGTERM", 0)])
def test_a_signal_stops_saves_and_sigusr1_requeues(tmp_path: Path, demos: Path, monkeypatch, sig: str,
                                                   requeued: int):
    """As `ddppo train`: a signal stops every rank at the same update with a checkpoint; SLURM's time-limit notice
    (SIGUSR1) also requeues the job (rank 0's `scontrol requeue`); exit 0."""
    import signal

    from ddppo import signals

    calls = []
    monkeypatch.setattr(signals, "requeue_slurm_job", lambda: calls.append(1) or True)
    monkeypatch.setattr(signals, "_received", [int(getattr(signal, sig))])
    run_bc(tmp_path / "bc", demos, "imitation.updates=50", "checkpoint.interval_updates=100")
    assert [r["update"] for r in metrics(tmp_path / "bc")] == [1]
    assert (tmp_path / "bc" / "checkpoints" / "ckpt-1.pt").exists()
    assert len(calls) == requeued


def test_evaluating_a_clone_counts_demonstration_steps_not_env_steps(tmp_path: Path, demos: Path, capsys):
    """A BC checkpoint's step counter is the demonstration steps it learned on: `ddppo eval` says so."""
    from ddppo.cli import main

    run_bc(tmp_path / "bc", demos, "imitation.updates=2")
    assert main(["eval", str(tmp_path / "bc"), "eval.num_episodes=2", "log.tensorboard=false"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("ckpt-2 ("))
    steps = metrics(tmp_path / "bc")[-1]["env_steps"]
    assert line.startswith(f"ckpt-2 ({steps:,} demonstration steps): 2 episodes"), line
