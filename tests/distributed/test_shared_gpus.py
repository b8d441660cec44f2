"""Two real ranks on one (mocked) GPU: under dist.device=auto both fall back to gloo and train-ready groups
form; an explicit NCCL request ends both ranks with the same ConfigError (exit 2 from the CLI) before any
group exists; with a GPU each, the environment NCCL's group is created under holds ddppo's failure handling and
no forced NCCL_SOCKET_IFNAME."""

from __future__ import annotations

import os
from types import SimpleNamespace

import torch

from tests.distributed.dist_harness import spawn_ranks

NCCL_VARS = ("TORCH_NCCL_BLOCKING_WAIT", "TORCH_NCCL_DUMP_ON_TIMEOUT", "NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME")


def _fake_gpus(count: int) -> None:
    torch.cuda.is_available = lambda: True
    torch.cuda.device_count = lambda: count
    torch.cuda.set_device = lambda d: None
    torch.cuda.get_device_properties = lambda d: SimpleNamespace(uuid=f"GPU-{torch.device(d).index}")


def _join(rank: int, world: int, port: int, backend: str, device: str, gpus: int | list[int]):
    """One rank joining; `gpus`: the GPUs every rank sees, or per rank (0: this build's own CUDA, none)."""
    import torch.distributed as dist

    from ddppo.errors import ConfigError
    from ddppo.distributed import Launch, init_distributed

    for name in NCCL_VARS:
        os.environ.pop(name, None)
    count = gpus[rank] if isinstance(gpus, list) else gpus
    if count:
        _fake_gpus(count)
    seen = {}
    real_init = dist.init_process_group

    def init_group(backend_name, **kwargs):  # NCCL has no CPU build: record what it would get, then gloo
        seen.update(backend=backend_name, env={n: os.environ.get(n) for n in NCCL_VARS})
        kwargs.pop("device_id", None)
        real_init("gloo", **kwargs)

    dist.init_process_group = init_group
    launch = Launch(rank, world, rank, world, "127.0.0.1", port, "torchrun", local_world_known=True)
    try:
        ctx = init_distributed(backend, device, 30, 30, 0, launch)
    except ConfigError as err:
        return {"error": str(err)}
    total = ctx.all_reduce_sums(torch.ones(1), "check") if ctx.backend == "gloo" else None
    ctx.close()
    return {"backend": ctx.backend, "device": str(ctx.device), "sum": None if total is None else float(total[0]),
            **seen}


def test_two_ranks_on_one_gpu_fall_back_to_gloo_under_auto():
    results = spawn_ranks(_join, 2, "auto", "auto", 1, timeout_s=120)
    assert [r["backend"] for r in results] == ["gloo", "gloo"], results
    assert [r["device"] for r in results] == ["cuda:0", "cuda:0"] and [r["sum"] for r in results] == [2.0, 2.0]


def test_explicit_nccl_on_a_shared_gpu_is_one_config_error_on_every_rank():
    results = spawn_ranks(_join, 2, "nccl", "auto", 1, timeout_s=120)
    assert all("dist.backend=nccl needs one GPU per rank, but ranks [0, 1] on one GPU" in r.get("error", "")
               for r in results), results


def test_ranks_with_and_without_a_gpu_are_one_config_error_on_every_rank():
    """A node whose driver failed: rank 1 sees a GPU (its published identity names one, as a real rank
    publishes it), rank 0 sees none. Each would pick its own backend (nccl / gloo) and wait on the other until
    dist.startup_timeout_s; instead every rank raises the same ConfigError naming the rank and host."""
    import socket

    results = spawn_ranks(_join, 2, "auto", "auto", [0, 1], timeout_s=120)
    errors = [r.get("error", "") for r in results]
    assert errors[0] == errors[1] and "\n" not in errors[0], results
    assert f"rank(s) 0 ({socket.gethostname()}) on host(s) {socket.gethostname()} have no GPU" in errors[0], results
    assert "dist.device=cpu" in errors[0], results


def test_nccl_group_is_created_with_blocking_waits_and_nccl_picks_its_interface():
    results = spawn_ranks(_join, 2, "auto", "auto", 2, timeout_s=120)
    for r in results:
        env = r["env"]
        assert r["backend"] == "nccl" and env["NCCL_SOCKET_IFNAME"] is None, r  # gloo's is set: auto may use it
        assert env["TORCH_NCCL_BLOCKING_WAIT"] == "1" and env["TORCH_NCCL_DUMP_ON_TIMEOUT"] == "0", r
    assert [r["device"] for r in results] == ["cuda:0", "cuda:1"]
