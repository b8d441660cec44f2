"""dist.device=cuda with a rank lacking a GPU (issue 43 item 5): every rank leaves with a ConfigError naming
the ranks without one, as soon as they have all joined, instead of the GPU-less rank leaving alone before the
rendezvous while its peers wait dist.startup_timeout_s (30 min by default) for it."""

from __future__ import annotations

import socket

from tests.distributed.dist_harness import spawn_ranks, start_ranks, synthetic
from tests.distributed.test_shared_gpus import _fake_gpus

HOST = socket.gethostname()


def _join_cuda(rank: int, world: int, port: int, gpus: list[int]):
    """One rank joining with dist.device=cuda; `gpus[rank]`: the GPUs it sees (0: this build's own CUDA, none
    on a CPU machine). A startup timeout far beyond the test's own bound: a rank left waiting fails the test."""
    from ddppo.errors import ConfigError
    from ddppo.distributed import Launch, init_distributed

    if gpus[rank]:
        _fake_gpus(gpus[rank])
    launch = Launch(rank, world, rank, world, "127.0.0.1", port, "torchrun", local_world_known=True)
    try:
        ctx = init_distributed("gloo", "cuda", 30, 600, 0, launch)
    except ConfigError as err:
        return {"error": str(err)}
    ctx.close()
    return {"backend": ctx.backend}


def test_a_rank_without_its_gpu_ends_every_rank_naming_it():
    """Rank 0 has a (mocked) GPU, rank 1 none. Before: rank 1 left at once and rank 0 waited the startup
    timeout (here 600 s, beyond the 90 s this test allows)."""
    results = spawn_ranks(_join_cuda, 2, [1, 0], timeout_s=90)
    errors = [r.get("error", "") for r in results]
    assert errors[0] == errors[1] and "\n" not in errors[0], results
    assert f"dist.device=cuda: rank(s) 1 ({HOST}) of 2 have no usable GPU" in errors[0], results
    assert "torch sees no CUDA device" in errors[0], results


def test_no_rank_with_a_gpu_every_rank_exits_2_naming_every_rank(tmp_path):
    """The real CLI, two ranks started by hand on this CPU machine with dist.device=cuda: both exit 2 with the
    same line naming both ranks."""
    with start_ranks(2, tmp_path / "run", [*synthetic(), "dist.device=cuda", "dist.startup_timeout_s=600"],
                     tmp_path) as job:
        codes = job.wait(120)
        text = job.log_text()
    assert codes == [2, 2], text
    for log in job.logs:
        lines = [ln for ln in log.read_text().splitlines() if "have no usable GPU" in ln]
        assert len(lines) == 1 and f"rank(s) 0 ({HOST}), 1 ({HOST}) of 2" in lines[0], text
