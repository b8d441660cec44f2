"""The checkpoint manager (ddppo/checkpoint/manager.py): every owner in a namespace of its own, no two owners
under one name; and today's format-1 files (tests/fixtures, written by ddppo before format 2) load and resume."""

from __future__ import annotations

import dataclasses
import shutil

import pytest
import torch

from ddppo import checkpoint as ckpt
from ddppo.checkpoint.manager import CheckpointManager
from ddppo.config import from_yaml_text
from testutil import REPO, trainer_in_process

FIXTURES = REPO / "tests" / "fixtures"


class Owner:
    def __init__(self, value=0):
        self.value = value

    def state_dict(self):
        return {"value": self.value}

    def load_state_dict(self, state):
        self.value = state["value"]


class Episodes(Owner):
    def resume(self, state):
        if state is None:
            return False
        self.load_state_dict(state)
        return True


def manager() -> CheckpointManager:
    return CheckpointManager(cfg=None, ctx=None)  # registering and (un)packing state need neither


def test_two_owners_cannot_share_a_name():
    m = manager()
    m.register("model", Owner(), shared=True)
    m.register("rng", Owner())
    for name, shared in (("rng", False), ("rng", True), ("model", False), ("model", True)):
        with pytest.raises(ValueError, match=f"saved-state owner '{name}' is registered twice"):
            m.register(name, Owner(), shared=shared)
    for reserved in ckpt.FILE_KEYS + ("rank",):  # nor take one of the file's own keys
        with pytest.raises(ValueError, match="registered twice"):
            m.register(reserved, Owner())
    m.register_episodes("collector", Episodes())
    with pytest.raises(ValueError, match="already have an owner"):
        m.register_episodes("other", Episodes())


def test_an_owner_named_like_another_owners_keys_keeps_both():
    """Format 1 spread the collector's keys (obs, start, hidden, env) at the top of the rank record, so an owner
    named "obs" would have overwritten the collector's observation. Now each owner has its own namespace."""
    m = manager()
    m.register_episodes("collector", Episodes({"obs": 1, "env": 2}))
    m.register("obs", Owner(7))
    state = m.state_dict()
    assert state == {"rank": {"collector": {"value": {"obs": 1, "env": 2}}, "obs": {"value": 7}}}
    twin = manager()
    twin.register_episodes("collector", Episodes())
    twin.register("obs", Owner())
    twin.load_state_dict(state)
    assert twin.state_dict() == state


def test_episodic_owners_follow_the_episodes():
    """Per-episode state (GRPO carry, reference hidden state) is restored only when the episodes continue; the
    episodes owner is asked even when its namespace is absent (it then starts fresh episodes)."""
    for saved_episodes, expected in ((None, 0), ({"value": 1}, 5)):
        m = manager()
        episodes, carry, rng = Episodes(), Owner(), Owner()
        m.register("rng", rng)
        m.register_episodes("collector", episodes)
        m.register("advantage", carry, episodic=True)
        m.load_state_dict({"rank": {"rng": {"value": 3}, "collector": saved_episodes, "advantage": {"value": 5}}})
        assert (rng.value, carry.value) == (3, expected)


@pytest.mark.parametrize("advantage", ["gae", "grpo"])
def test_a_format1_checkpoint_loads_and_resumes_to_the_same_weights(tmp_path, advantage):
    """tests/fixtures/checkpoint_format1_<advantage>.pt is ckpt-1 of a tiny gridnav run written by ddppo 9eebf7e
    (format 1); *_update2.pt holds the model that run reached at update 2. Read under format 2, it resumes
    every namespace (counters, RNG, episodes, GRPO carry) and its next update reaches those weights."""
    source = FIXTURES / f"checkpoint_format1_{advantage}.pt"
    assert torch.load(source, weights_only=True)["format"] == 1
    data = ckpt.load(source)
    assert data["format"] == ckpt.FORMAT
    expected_rank = {"rng", "collector"} | ({"advantage"} if advantage == "grpo" else set())
    assert set(data["rank_states"][0]) == expected_rank
    assert set(data["rank_states"][0]["collector"]) == {"obs", "start", "hidden", "env"}
    stored = from_yaml_text(data["config_yaml"], "fixture")
    cfg = dataclasses.replace(stored, run=dataclasses.replace(stored.run, dir=str(tmp_path)))
    (tmp_path / "checkpoints").mkdir()
    shutil.copy(source, tmp_path / "checkpoints" / "ckpt-1.pt")
    after = torch.load(FIXTURES / f"checkpoint_format1_{advantage}_update2.pt", weights_only=True)
    with trainer_in_process(cfg) as trainer:
        assert (trainer.progress.update, trainer.progress.env_steps) == (1, 64)
        assert trainer.train() == 0 and trainer.progress.update == 2
        model = trainer.policy.state_dict()
    assert set(model) == set(after["model"])
    # Equal to rounding, not bit for bit: the update's sums run in an order that depends on more than the torch
    # version and the CPU capability the fixture records (this machine, AVX512 and the same torch as the fixture,
    # differs by up to 1.5e-8). A reader that misfiled any namespace (counters, RNG, episodes, carry) moves the
    # weights by orders of magnitude more. Bit-identical resume is the in-run resume tests' claim
    # (tests/integration/test_deterministic_resume.py), where one machine writes and reads.
    for key, value in after["model"].items():
        torch.testing.assert_close(model[key], value, rtol=1e-5, atol=1e-6, msg=key)
    assert ckpt.load(tmp_path / "checkpoints" / "ckpt-2.pt")["format"] == 2


def _with_reward_scaler(record: dict, num_envs: int) -> dict:
    """A rank record with the reward scaler's state as ddppo saved it per rank (format 1's record keys; format 2's
    namespaces, before the return statistics were shared)."""
    moments = {"mean": torch.tensor(0.25, dtype=torch.float64), "var": torch.tensor(9.0, dtype=torch.float64),
               "count": torch.tensor(640.0, dtype=torch.float64)}
    return {**record, "reward_scale": moments, "reward_returns": torch.arange(num_envs, dtype=torch.float64)}


@pytest.mark.parametrize("layout", ["format1", "format2-per-rank"])
def test_saved_reward_scaler_state_goes_to_its_owners(tmp_path, layout):
    """The return statistics (shared: the top-level "reward_scale") and each env's running return (the rank's
    "reward_returns") of a file that saved both per rank reach the reward scaler on resume, not the collector's
    namespace where nothing reads them (issue 44: a resumed critic saw rewards 'scaled' by count 0, var 1)."""
    raw = torch.load(FIXTURES / "checkpoint_format1_gae.pt", weights_only=True)
    num_envs = int(raw["rank_states"][0]["start"].shape[0])
    if layout == "format1":
        raw["rank_states"] = [_with_reward_scaler(r, num_envs) for r in raw["rank_states"]]
    else:  # format 2 as written before the return statistics were shared
        data = ckpt.load(FIXTURES / "checkpoint_format1_gae.pt")
        data["rank_states"] = [_with_reward_scaler(r, num_envs) for r in data["rank_states"]]
        raw = {**ckpt.to_storable(data), "format": 2}
    (tmp_path / "checkpoints").mkdir()
    torch.save(raw, tmp_path / "checkpoints" / "ckpt-1.pt")
    data = ckpt.load(tmp_path / "checkpoints" / "ckpt-1.pt")
    assert float(data["reward_scale"]["var"]) == 9.0
    assert "reward_scale" not in data["rank_states"][0]
    assert torch.equal(torch.as_tensor(data["rank_states"][0]["reward_returns"]),
                       torch.arange(num_envs, dtype=torch.float64))
    assert not {"reward_scale", "reward_returns"} & set(data["rank_states"][0]["collector"])
    stored = from_yaml_text(data["config_yaml"], "fixture")
    cfg = dataclasses.replace(stored, run=dataclasses.replace(stored.run, dir=str(tmp_path)),
                              normalize=dataclasses.replace(stored.normalize, reward="on"))
    with trainer_in_process(cfg) as trainer:
        assert trainer.progress.update == 1
        scaler = trainer.normalization.rewards
        assert (float(scaler.moments.mean), float(scaler.moments.var), float(scaler.moments.count)) == (
            0.25, 9.0, 640.0)
        assert scaler.returns.tolist() == list(range(num_envs))  # gridnav continues its episodes
