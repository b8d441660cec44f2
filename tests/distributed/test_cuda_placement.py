"""Ranks on GPUs without a GPU: the device map for N ranks on M GPUs (a mocked torch.cuda), the backend every
rank agrees on (shared GPUs: NCCL refuses them) and what a rank hands NCCL's failure handling (set before the
first NCCL group; the multi-process side is tests/distributed/test_shared_gpus.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from ddppo.errors import ConfigError
from ddppo.distributed import cuda


@pytest.fixture
def fake_cuda(monkeypatch):
    """torch.cuda with M GPUs (set `gpus.count`); UUIDs name the physical GPU behind each visible index
    (`gpus.uuid_of(rank, index)`: all visible to every rank by default)."""
    gpus = SimpleNamespace(count=1, current=[], uuid_of=lambda rank, index: f"GPU-{index}", rank=0)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: gpus.count > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: gpus.count)
    monkeypatch.setattr(torch.cuda, "set_device", lambda d: gpus.current.append(torch.device(d)))
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda d: SimpleNamespace(uuid=gpus.uuid_of(gpus.rank, torch.device(d).index)))
    return gpus


def _place(gpus, ranks: int, backend: str, device: str) -> tuple[list[torch.device], list[str]]:
    """Every local rank's device, then the backend each decides from all ranks' published GPU identities."""
    devices, idents = [], []
    for r in range(ranks):
        gpus.rank = r
        devices.append(cuda.choose_device(device, r))
        idents.append(cuda.gpu_identity(devices[-1]))
    return devices, [cuda.decide_backend(backend, device, d, idents) for d in devices]


@pytest.mark.parametrize("ranks", [1, 2, 3, 4])
@pytest.mark.parametrize("count", [1, 2, 4])
def test_device_map_for_n_ranks_on_m_gpus(fake_cuda, ranks, count):
    fake_cuda.count = count
    devices, backends = _place(fake_cuda, ranks, "auto", "auto")
    assert [d.index for d in devices] == [r % count for r in range(ranks)]
    assert fake_cuda.current == devices  # each rank's GPU becomes its current device
    # one rank per GPU: NCCL; more ranks than GPUs: every rank falls back to gloo on the GPUs as they are
    assert set(backends) == {"nccl" if ranks <= count else "gloo"}
    if ranks > count:
        for backend, device in (("nccl", "auto"), ("auto", "cuda"), ("nccl", "cuda")):
            with pytest.raises(ConfigError, match=r"one GPU per rank, but ranks \[0, "):
                _place(fake_cuda, ranks, backend, device)
    assert set(_place(fake_cuda, ranks, "gloo", "cuda")[1]) == {"gloo"}  # sharing asked for: allowed


def test_one_gpu_per_task_is_not_shared(fake_cuda):
    """SLURM --gpus-per-task=1: every rank sees one GPU as cuda:0, a different physical one each."""
    fake_cuda.count = 1
    fake_cuda.uuid_of = lambda rank, index: f"GPU-of-task-{rank}"
    devices, backends = _place(fake_cuda, 4, "nccl", "cuda")
    assert [d.index for d in devices] == [0, 0, 0, 0] and set(backends) == {"nccl"}


def test_cpu_and_missing_cuda(fake_cuda):
    fake_cuda.count = 0
    assert _place(fake_cuda, 2, "auto", "auto") == ([torch.device("cpu")] * 2, ["gloo", "gloo"])
    with pytest.raises(ConfigError, match="dist.device=cuda but torch sees no CUDA device"):
        cuda.choose_device("cuda", 0)
    with pytest.raises(ConfigError, match="dist.backend=nccl needs CUDA devices"):
        cuda.decide_backend("nccl", "cpu", torch.device("cpu"), [""])
    fake_cuda.count = 2
    assert cuda.choose_device("cpu", 1) == torch.device("cpu") and fake_cuda.current == []


# ---------------------------------------------------------------------------- NCCL's failure handling
def test_a_rank_hands_nccl_blocking_waits_and_no_dump_on_timeout():
    settings, warning = cuda.nccl_failure_env({})
    assert settings == {"TORCH_NCCL_BLOCKING_WAIT": "1", "TORCH_NCCL_DUMP_ON_TIMEOUT": "0"} and warning is None


@pytest.mark.parametrize("user", [{"TORCH_NCCL_BLOCKING_WAIT": "0"}, {"NCCL_BLOCKING_WAIT": "false"},
                                  {"TORCH_NCCL_BLOCKING_WAIT": "0", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "3"}])
def test_a_blocking_wait_the_user_turned_off_is_kept_and_named(user):
    settings, warning = cuda.nccl_failure_env(user)
    assert settings == {}  # NCCL's own handling, dump on timeout included, as the user chose
    assert warning is not None and all(f"{k}={v}" in warning for k, v in user.items()) and "\n" not in warning


@pytest.mark.parametrize("user", [{"TORCH_NCCL_ASYNC_ERROR_HANDLING": "3"}, {"NCCL_ASYNC_ERROR_HANDLING": "1"},
                                  {"TORCH_NCCL_ASYNC_ERROR_HANDLING": "1"}])
def test_async_error_handling_the_user_set_does_not_turn_blocking_wait_off_and_is_named(user):
    settings, warning = cuda.nccl_failure_env(user)
    assert settings == {"TORCH_NCCL_BLOCKING_WAIT": "1", "TORCH_NCCL_DUMP_ON_TIMEOUT": "0"}
    assert warning is not None and "(set in your environment) is not used" in warning and next(iter(user)) in warning


def test_what_torchrun_injects_is_not_the_users_choice():
    """torchrun's agent sets TORCH_NCCL_ASYNC_ERROR_HANDLING=os.getenv(name, "1") and TORCHELASTIC_RUN_ID in
    every worker: the injected value is no choice of the user's (no warning); another value is passed through
    from the user's environment (named)."""
    agent = {"TORCHELASTIC_RUN_ID": "none", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1"}
    assert cuda.nccl_failure_env(agent) == ({"TORCH_NCCL_BLOCKING_WAIT": "1", "TORCH_NCCL_DUMP_ON_TIMEOUT": "0"},
                                            None)
    settings, warning = cuda.nccl_failure_env({**agent, "TORCH_NCCL_ASYNC_ERROR_HANDLING": "3"})
    assert settings["TORCH_NCCL_BLOCKING_WAIT"] == "1" and "TORCH_NCCL_ASYNC_ERROR_HANDLING=3" in warning
    settings, warning = cuda.nccl_failure_env({**agent, "TORCH_NCCL_BLOCKING_WAIT": "0"})
    assert settings == {} and "TORCH_NCCL_ASYNC_ERROR_HANDLING" not in warning  # only what the user set is named


def test_a_child_job_does_not_inherit_what_torchrun_injected():
    from ddppo.distributed.launch import without_launch_vars

    agent = {"TORCHELASTIC_RUN_ID": "x", "RANK": "0", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1", "PATH": "/bin"}
    assert without_launch_vars(agent) == {"PATH": "/bin"}
    assert without_launch_vars({**agent, "TORCH_NCCL_ASYNC_ERROR_HANDLING": "3"}) == {
        "PATH": "/bin", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "3"}  # the user's own value stays


def test_user_blocking_wait_and_dump_setting_are_kept_silently():
    settings, warning = cuda.nccl_failure_env({"TORCH_NCCL_BLOCKING_WAIT": "1", "TORCH_NCCL_DUMP_ON_TIMEOUT": "1"})
    assert settings == {} and warning is None
