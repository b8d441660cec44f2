"""What the launcher says: who this process is (torchrun, SLURM's srun, or nobody), and the one list of
launcher variables a child process must not inherit.

Read by the distributed context (rendezvous), the sweep launcher and the benchmarks; imports nothing of ddppo.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Mapping

# Every variable by which torchrun or srun tells a process which rank of which job it is. A child started as
# its own job (a sweep run, a benchmark, a test's CLI run) must not inherit them, or it would join its parent's
# job instead of starting one.
TORCHRUN_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT",
                 "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_USE_AGENT_STORE")
SLURM_STEP_VARS = ("SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_LOCALID")
LAUNCH_VARS = TORCHRUN_VARS + SLURM_STEP_VARS


def without_launch_vars(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """A copy of `environ` (default os.environ) with none of LAUNCH_VARS: the environment of a new job."""
    env = os.environ if environ is None else environ
    return {k: v for k, v in env.items() if k not in LAUNCH_VARS}


@dataclass(frozen=True)
class Launch:
    """Who this process is and where to rendezvous, read from the launcher's environment."""

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    master_addr: str
    master_port: int
    source: str  # torchrun | slurm | single
    agent_store: bool = False  # torchrun's agent hosts the TCP store; every rank connects as a client
    local_world_known: bool = True  # False: set by hand without LOCAL_WORLD_SIZE (ranks may be on other hosts)

    @property
    def single_node(self) -> bool:
        """Every rank on this host, as the launcher said (never assumed)."""
        return self.local_world_known and self.local_world_size >= self.world_size


def expand_first_host(nodelist: str) -> str:
    """First host of a SLURM nodelist: 'gpu[03-05,07],cpu1' -> 'gpu03', 'r[1-2]-n[01-04]' -> 'r1-n01'."""
    text = nodelist.strip()
    depth, end = 0, len(text)
    for i, ch in enumerate(text):  # the first top-level entry: commas inside brackets do not split
        depth += {"[": 1, "]": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            end = i
            break
    host = re.sub(r"\[([^\[\]]*)\]", lambda m: m.group(1).split(",")[0].split("-")[0], text[:end])
    if not host or "[" in host or "]" in host:
        raise ValueError(f"cannot parse SLURM_JOB_NODELIST={nodelist!r}")
    return host


def read_launch(environ: dict[str, str] | None = None) -> Launch:
    """torchrun's variables first, then SLURM's (inside an srun step), else a single process."""
    env = os.environ if environ is None else environ
    if "RANK" in env and "WORLD_SIZE" in env:
        return Launch(
            rank=int(env["RANK"]),
            world_size=int(env["WORLD_SIZE"]),
            local_rank=int(env.get("LOCAL_RANK", 0)),
            local_world_size=int(env.get("LOCAL_WORLD_SIZE", env["WORLD_SIZE"])),
            master_addr=env.get("MASTER_ADDR", "127.0.0.1"),
            master_port=int(env.get("MASTER_PORT", 29500)),
            source="torchrun",
            agent_store=env.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() == "true",
            local_world_known="LOCAL_WORLD_SIZE" in env,
        )
    if "SLURM_PROCID" in env and "SLURM_STEP_NUM_TASKS" in env:
        job_id = int(env.get("SLURM_JOB_ID", 0))
        nodelist = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST", "127.0.0.1")
        world = int(env["SLURM_STEP_NUM_TASKS"])
        nodes = max(1, int(env.get("SLURM_STEP_NUM_NODES", env.get("SLURM_JOB_NUM_NODES", 1))))
        return Launch(
            rank=int(env["SLURM_PROCID"]),
            world_size=world,
            local_rank=int(env.get("SLURM_LOCALID", 0)),
            local_world_size=max(1, world // nodes),
            master_addr=env.get("MASTER_ADDR") or expand_first_host(nodelist),
            master_port=int(env.get("MASTER_PORT") or 20000 + job_id % 20000),
            source="slurm",
        )
    return Launch(0, 1, 0, 1, "127.0.0.1", 0, "single")
