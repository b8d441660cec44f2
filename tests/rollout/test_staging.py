"""Observation staging: reused host buffers (pinned where a CUDA driver exists), views on CPU."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ddppo.rollout.staging import HostStaging
from rollout_testutil import NeverStop
from testutil import OneStorage, build_collector


def obs(seed: int, shape=(4, 3)) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"image": rng.integers(0, 255, (*shape, 2), dtype=np.uint8), "vec": rng.standard_normal(shape)}


def test_cpu_device_hands_out_views_of_the_env_arrays():
    s = HostStaging(torch.device("cpu"))
    assert not s.enabled
    o = obs(0)
    out = s.to_device(o)
    o["vec"][0, 0] = 123.0  # a view: the envs' array and the tensor are one memory
    assert out["vec"][0, 0] == 123.0 and out["image"].dtype == torch.uint8


def test_staging_copies_into_one_reused_buffer_per_key():
    s = HostStaging(torch.device("cpu"), pin=True)  # the CUDA path's staging, exercised on CPU
    assert s.pinned == torch.cuda.is_available()
    first = s.stage(obs(1))
    ptrs = {k: v.data_ptr() for k, v in first.items()}
    o = obs(2)
    second = s.stage(o)
    for k in o:
        assert torch.equal(second[k], torch.from_numpy(o[k])) and second[k].dtype == torch.from_numpy(o[k]).dtype
        assert second[k].data_ptr() == ptrs[k]  # reused, not reallocated
    o["vec"][0, 0] = 99.0
    assert second["vec"][0, 0] != 99.0  # a copy: the envs may reuse their arrays
    third = s.stage(obs(3, shape=(5, 3)))  # another shape: a new buffer
    assert third["vec"].shape == (5, 3) and third["vec"].data_ptr() != ptrs["vec"]
    if torch.cuda.is_available():
        assert all(b.is_pinned() for b in s.buffers.values())


def test_a_buffer_holds_the_most_rows_asked_and_smaller_batches_reuse_it():
    s = HostStaging(torch.device("cpu"), pin=True)
    big = s.stage({"reward": np.arange(8, dtype=np.float32)})["reward"]
    small = s.stage({"reward": np.arange(3, dtype=np.float32)})["reward"]  # a variable-mode batch of 3 envs
    assert small.tolist() == [0.0, 1.0, 2.0] and small.data_ptr() == big.data_ptr()


def test_pinning_follows_the_device_and_the_driver(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # a CUDA machine (nothing is allocated here)
    assert HostStaging(torch.device("cuda", 0)).pinned
    assert not HostStaging(torch.device("cpu")).enabled
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert HostStaging(torch.device("cuda", 0)).enabled and not HostStaging(torch.device("cuda", 0)).pinned


# ----------------------------------------------------- every mode's copies go through the stager
def _collector(mode: str, workers: int):
    from ddppo.config import PolicyConfig, RolloutConfig
    from ddppo.model.policy import Policy
    from ddppo.rollout.factory import storage_steps
    from ddppo.rollout.storage import RolloutStorage
    from ddppo.envs.registry import make_vec_env
    from ddppo.envs.base import EnvSpec

    cfg = RolloutConfig(num_steps=6, mode="variable" if mode == "variable" else "fixed", overlap=mode == "overlapped",
                        batch_wait_s=0.0)
    # episodes of 4 steps end by truncation: the final observations' copies are staged too
    envs = make_vec_env("synthetic", {"episode_length": 4}, EnvSpec(num_envs=4, seed=0, num_workers=workers))
    torch.manual_seed(0)
    policy = Policy(envs.observation_space, envs.action_space, PolicyConfig(hidden_size=8, rnn_type="gru"))
    storage = RolloutStorage(storage_steps(cfg), 4, envs.observation_space, envs.action_space,
                             policy.initial_memory(4), torch.device("cpu"))
    return OneStorage(build_collector(cfg, envs, policy, NeverStop()), storage), envs


@pytest.mark.parametrize("mode, workers", [("lockstep", 0), ("overlapped", 2), ("variable", 4)])
def test_every_host_to_device_copy_of_every_mode_goes_through_the_stager(monkeypatch, mode, workers):
    """The CUDA path's bookkeeping on CPU: staging forced on (as `stages` says for a CUDA device), the rows
    each key's buffer received counted. Every stored step's reward and done flag and its observation, and the
    final observations that truncations bootstrap from (and, with workers, the env indices and storage slots),
    must have passed through the stager."""
    from ddppo.rollout import staging

    monkeypatch.setattr(staging, "stages", lambda device: True)
    staged: dict[str, int] = {}
    real_stage = staging.HostStaging.stage

    def counting_stage(self, arrays):
        for k, v in arrays.items():
            staged[k] = staged.get(k, 0) + len(v)
        return real_stage(self, arrays)

    monkeypatch.setattr(staging.HostStaging, "stage", counting_stage)
    collector, envs = _collector(mode, workers)
    try:
        start = dict(staged)
        res = [collector.collect(u) for u in (1, 2)]
    finally:
        envs.close()
    steps = sum(r.env_steps for r in res)
    grew = {k: staged.get(k, 0) - start.get(k, 0) for k in staged}
    # variable mode's steps in flight at the rollout end are received (and staged) in the next rollout
    assert grew["reward"] >= steps and grew["done"] >= steps and grew["obs/obs"] >= steps, (grew, steps)
    assert grew.get("final/obs", 0) > 0 and grew["final_rows"] == grew["final/obs"]  # truncations' bootstraps
    if mode != "lockstep":  # which envs a batch holds and their storage slots cross with the step
        assert grew["env"] >= steps and grew["slot"] >= steps, grew
    assert collector.actor.staging.enabled


def test_staged_lockstep_collection_equals_the_unstaged_one(monkeypatch):
    from ddppo.rollout import staging

    plain, envs = _collector("lockstep", 0)
    try:
        plain.collect(1)
        want = (plain.storage.rewards.clone(), plain.storage.obs["obs"].clone(), plain.storage.dones.clone())
    finally:
        envs.close()
    monkeypatch.setattr(staging, "stages", lambda device: True)
    staged, envs = _collector("lockstep", 0)
    try:
        staged.collect(1)
        got = (staged.storage.rewards, staged.storage.obs["obs"], staged.storage.dones)
    finally:
        envs.close()
    assert staged.actor.staging.enabled and not plain.actor.staging.enabled
    for a, b in zip(want, got):
        assert torch.equal(a, b)
