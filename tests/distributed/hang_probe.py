"""A real rank (gloo, started by hand: RANK, WORLD_SIZE, MASTER_*) through run_in_process_group, as `ddppo train`
runs one, where rank 1's native call of MODE never returns (it sleeps for an hour):

- destroy: the body raises (an error other than a lost peer), then `destroy_process_group` in close() hangs;
- wait:    a collective's work.wait() hangs (as NCCL's abort inside a timed-out wait can);
- split:   the creation of the training group in mark_started hangs (NCCL's communicator split).

Usage: python hang_probe.py MODE TIMEOUT_S"""

from __future__ import annotations

import logging
import sys
import time
from types import SimpleNamespace

HOUR = 3600.0


class HungWork:
    def wait(self, timeout=None):
        time.sleep(HOUR)


def main(mode: str, timeout_s: float) -> int:
    import torch
    import torch.distributed as dist

    from ddppo.config import PlacementConfig
    from ddppo.distributed import read_launch, run_in_process_group

    logging.basicConfig(level=logging.INFO)
    launch = read_launch()
    cfg = SimpleNamespace(run=SimpleNamespace(torch_threads=1, deterministic=False, seed=0),
                          dist=SimpleNamespace(backend="gloo", device="cpu", timeout_s=timeout_s,
                                               startup_timeout_s=60), placement=PlacementConfig())
    hangs = launch.rank == 1
    if hangs and mode == "destroy":
        dist.destroy_process_group = lambda *a, **k: time.sleep(HOUR)
    if hangs and mode == "wait":
        dist.all_reduce = lambda *a, **k: HungWork()
    if hangs and mode == "split":
        dist.new_group = lambda *a, **k: time.sleep(HOUR)

    def body(ctx) -> int:
        if mode == "destroy":
            raise RuntimeError("an error other than a lost peer")
        ctx.mark_started()
        ctx.all_reduce_sums(torch.ones(1), "a collective")
        return 0

    return run_in_process_group(cfg, launch, body)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], float(sys.argv[2])))
