"""Observation staging: reused host buffers (pinned where a CUDA driver exists), views on CPU."""

from __future__ import annotations

import numpy as np
import torch

from ddppo.rollout.staging import HostStaging


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
