"""What the launcher says: who this process is (torchrun, SLURM's srun, or nobody), and the one list of
launcher variables a child process must not inherit.

Read by the distributed context (rendezvous), the sweep launcher and the benchmarks; imports nothing of ddppo
but the port rule (port.py) and its error's class (ddppo/errors.py).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Mapping

from ddppo.distributed.port import job_port
from ddppo.errors import LaunchError

# Every variable by which torchrun or srun tells a process which rank of which job it is. A child started as
# its own job (a sweep run, a benchmark, a test's CLI run) must not inherit them, or it would join its parent's
# job instead of starting one.
TORCHRUN_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT",
                 "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_USE_AGENT_STORE")
SLURM_STEP_VARS = ("SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_LOCALID")
LAUNCH_VARS = TORCHRUN_VARS + SLURM_STEP_VARS

# What torchrun's agent (torch.distributed.elastic's LocalElasticAgent) puts into every worker's environment
# besides the rank variables: `TORCH_NCCL_ASYNC_ERROR_HANDLING: os.getenv(name, "1")` (torch 2.4 to 2.13). srun
# injects nothing of the kind (it passes the submitting shell's environment on, which is the user's).
TORCHRUN_INJECTS = {"TORCH_NCCL_ASYNC_ERROR_HANDLING": "1"}


def launcher_injected(environ: Mapping[str, str] | None = None) -> set[str]:
    """The names in `environ` whose value a launcher put there, not the user.

    The rule: inside a worker of torchrun's agent (TORCHELASTIC_RUN_ID is set: the agent sets it for every
    worker), a variable of TORCHRUN_INJECTS holding exactly the value the agent injects is the agent's. The
    agent passes a value the user exported through unchanged, so any other value is the user's; a user's own
    value equal to the injected one reads the same and counts as the agent's."""
    env = os.environ if environ is None else environ
    if "TORCHELASTIC_RUN_ID" not in env:
        return set()
    return {name for name, value in TORCHRUN_INJECTS.items() if env.get(name) == value}


def without_launch_vars(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """A copy of `environ` (default os.environ) with none of LAUNCH_VARS nor what the launcher injected
    (`launcher_injected`): the environment of a new job."""
    env = os.environ if environ is None else environ
    drop = set(LAUNCH_VARS) | launcher_injected(env)
    return {k: v for k, v in env.items() if k not in drop}


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


def _int(env: Mapping[str, str], name: str, default: int | None = None, low: int = 0, high: int | None = None,
         fix: str = "") -> int:
    text = env.get(name, "").strip()
    if not text and default is not None:
        return default
    try:
        value = int(text)
    except ValueError:
        raise LaunchError(f"{name}={env.get(name, '')!r} is not a whole number: {fix}") from None
    if value < low or (high is not None and value > high):
        bound = f"in [{low}, {high}]" if high is not None else f">= {low}"
        raise LaunchError(f"{name}={value} must be {bound}: {fix}")
    return value


def _check_below(name: str, value: int, limit_name: str, limit: int, what: str, fix: str) -> None:
    if value >= limit:
        raise LaunchError(f"{name}={value} with {limit_name}={limit}: {what} must be below it: {fix}")


def read_launch(environ: Mapping[str, str] | None = None) -> Launch:
    """torchrun's variables first, then SLURM's (inside an srun step), else a single process.

    Raises LaunchError for a variable that cannot be right (not a number, a rank beyond the world size, a port
    out of range), before anything waits on it."""
    env = os.environ if environ is None else environ
    if "RANK" in env and "WORLD_SIZE" in env:
        return _read_torchrun(env)
    if "SLURM_PROCID" in env and "SLURM_STEP_NUM_TASKS" in env:
        return _read_slurm(env)
    return Launch(0, 1, 0, 1, "127.0.0.1", 0, "single")


def _master(env: Mapping[str, str], default_addr: str, default_port: int, fix: str) -> tuple[str, int]:
    addr = env.get("MASTER_ADDR", default_addr)
    if not addr.strip():
        raise LaunchError(f"MASTER_ADDR={addr!r} is empty: set it to rank 0's host name or address, or unset it")
    return addr.strip(), _int(env, "MASTER_PORT", default_port, low=1, high=65535, fix=fix)


def _read_torchrun(env: Mapping[str, str]) -> Launch:
    fix = "start ranks with torchrun (it sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_*), or unset RANK and WORLD_SIZE"
    world = _int(env, "WORLD_SIZE", low=1, fix=fix)
    rank = _int(env, "RANK", fix=fix)
    local_world = _int(env, "LOCAL_WORLD_SIZE", world, low=1, fix=fix)
    local_rank = _int(env, "LOCAL_RANK", 0, fix=fix)
    _check_below("RANK", rank, "WORLD_SIZE", world, "a rank (no peer could ever join a rank beyond it)", fix)
    _check_below("LOCAL_RANK", local_rank, *(("LOCAL_WORLD_SIZE", local_world) if "LOCAL_WORLD_SIZE" in env
                                             else ("WORLD_SIZE", world)), "the local rank", fix)
    addr, port = _master(env, "127.0.0.1", 29500, "a TCP port in [1, 65535]")
    return Launch(rank=rank, world_size=world, local_rank=local_rank, local_world_size=local_world,
                  master_addr=addr, master_port=port, source="torchrun",
                  agent_store=env.get("TORCHELASTIC_USE_AGENT_STORE") == "True",  # as torch compares it
                  local_world_known="LOCAL_WORLD_SIZE" in env)


def _read_slurm(env: Mapping[str, str]) -> Launch:
    fix = "run ranks as tasks of an srun step (srun sets SLURM_PROCID and SLURM_STEP_NUM_TASKS), or unset them"
    world = _int(env, "SLURM_STEP_NUM_TASKS", low=1, fix=fix)
    rank = _int(env, "SLURM_PROCID", fix=fix)
    local_rank = _int(env, "SLURM_LOCALID", 0, fix=fix)
    job_id = _int(env, "SLURM_JOB_ID", 0, fix="it is set by SLURM; unset it outside a job")
    nodes = max(1, _int(env, "SLURM_STEP_NUM_NODES", _int(env, "SLURM_JOB_NUM_NODES", 1, fix=fix), fix=fix))
    local_world = max(1, world // nodes)
    _check_below("SLURM_PROCID", rank, "SLURM_STEP_NUM_TASKS", world, "a task's rank", fix)
    nodelist = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST", "127.0.0.1")
    first = env.get("MASTER_ADDR", "")
    if not first:
        try:
            first = expand_first_host(nodelist)
        except ValueError as err:
            raise LaunchError(f"{err}: SLURM sets it inside a job; or set MASTER_ADDR to rank 0's host") from None
    addr, port = _master({**env, "MASTER_ADDR": first, "MASTER_PORT": env.get("MASTER_PORT") or ""}, first,
                         job_port(job_id), "a TCP port in [1, 65535]")
    return Launch(rank=rank, world_size=world, local_rank=local_rank, local_world_size=local_world,
                  master_addr=addr, master_port=port, source="slurm")
