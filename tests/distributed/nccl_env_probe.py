"""One rank, as a launcher starts it (by hand, torchrun, srun): joins with `dist.device=auto dist.backend=auto`
on a pretended GPU of its own (a distinct UUID per rank, so the ranks choose NCCL), and writes
`OUT_DIR/rank<r>.json`: the backend, the environment the NCCL group would be created under (recorded where
`init_process_group` is called; the group itself is then made with gloo, as NCCL has no CPU build) and the
warnings ddppo logged. Usage: python nccl_env_probe.py OUT_DIR"""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path
from types import SimpleNamespace

NCCL_VARS = ("TORCH_NCCL_BLOCKING_WAIT", "NCCL_BLOCKING_WAIT", "TORCH_NCCL_ASYNC_ERROR_HANDLING",
             "NCCL_ASYNC_ERROR_HANDLING", "TORCH_NCCL_DUMP_ON_TIMEOUT")


class Warnings(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def main(out_dir: Path) -> int:
    import torch
    import torch.distributed as dist

    from ddppo.distributed import init_distributed, read_launch

    launch = read_launch()
    torch.cuda.is_available = lambda: True
    torch.cuda.device_count = lambda: 1
    torch.cuda.set_device = lambda d: None
    torch.cuda.get_device_properties = lambda d: SimpleNamespace(uuid=f"GPU-of-rank-{launch.rank}")
    warnings = Warnings()
    logging.getLogger("ddppo").addHandler(warnings)
    seen: dict = {"launcher_env": {n: os.environ.get(n) for n in NCCL_VARS}}
    real_init = dist.init_process_group

    def init_group(backend, **kwargs):
        seen.update(backend=backend, env={n: os.environ.get(n) for n in NCCL_VARS})
        kwargs.pop("device_id", None)
        real_init("gloo", **kwargs)

    dist.init_process_group = init_group
    ctx = init_distributed("auto", "auto", 30, 60, 0, launch)
    seen.update(rank=ctx.rank, world=ctx.world_size, source=launch.source, warnings=warnings.lines)
    ctx.close()
    (out_dir / f"rank{launch.rank}.json").write_text(json.dumps(seen))
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
