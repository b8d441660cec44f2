"""What a rank sets up outside NCCL's own failure handling, shown without a GPU: NCCL picks its own socket
interface (only gloo's is chosen for it), and deterministic mode's cuBLAS workspace is in the environment before
anything touches CUDA (a value the user set is kept)."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest
import torch

from ddppo.config import PlacementConfig
from ddppo.distributed import rendezvous
from ddppo.distributed.launch import Launch
from testutil import DictStore


def test_nccl_socket_interface_is_left_to_nccl(monkeypatch):
    for name in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME"):
        monkeypatch.setenv(name, "")  # empty counts as unset; monkeypatch restores what was there afterwards
    launch = Launch(1, 2, 1, 2, "127.0.0.1", 29555, "torchrun", local_world_known=True)
    store = DictStore()
    rendezvous.choose_socket_interface(launch, "nccl", store)
    # gloo's is chosen (an NCCL job's pickled objects go through gloo), NCCL's is left to NCCL
    assert os.environ["GLOO_SOCKET_IFNAME"] == "lo" and os.environ["NCCL_SOCKET_IFNAME"] == ""
    assert store.data["net/source/1"] == b"127.0.0.1"  # published for the peers


def test_cublas_workspace_is_set_before_cuda_starts(monkeypatch):
    """run_in_process_group sets CUBLAS_WORKSPACE_CONFIG before the device is chosen (the first CUDA call);
    a value the user set is kept."""
    from ddppo.distributed import startup

    seen = []

    def no_group(*args, **kwargs):
        seen.append((os.environ.get("CUBLAS_WORKSPACE_CONFIG"), torch.are_deterministic_algorithms_enabled()))
        raise rendezvous.RendezvousError("stop here")

    monkeypatch.setattr(startup, "init_distributed", no_group)
    monkeypatch.setattr(startup, "_leave_during_startup", lambda launch, err: (_ for _ in ()).throw(SystemExit(1)))
    cfg = SimpleNamespace(run=SimpleNamespace(torch_threads=1, deterministic=True, seed=0),
                          dist=SimpleNamespace(backend="auto", device="cpu", timeout_s=1, startup_timeout_s=1),
                          placement=PlacementConfig())
    launch = Launch(0, 1, 0, 1, "127.0.0.1", 0, "single")
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", "")  # so that monkeypatch restores what was there afterwards
    try:
        for user in (None, ":16:8"):
            monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
            if user:
                monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", user)
            with pytest.raises(SystemExit):
                startup.run_in_process_group(cfg, launch, lambda ctx: 0)
    finally:
        torch.use_deterministic_algorithms(False)
    assert seen == [(":4096:8", True), (":16:8", True)]
