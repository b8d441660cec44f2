"""Starting ddppo ranks on the test hosts the way launchers do (by hand / SLURM-style variables, torchrun
multi-node), and reading what they left."""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "tests" / "distributed"))

from dist_harness import subprocess_env  # noqa: E402
from netns import Network, wait_exit  # noqa: E402
from testutil import TINY, as_overrides  # noqa: E402

GRIDNAV = REPO / "configs" / "gridnav.yaml"
PER_RANK_UPDATE = TINY["env.num_envs"] * TINY["rollout.num_steps"]


def train_argv(run_dir: Path, **values) -> list[str]:
    """`python -m ddppo train configs/gridnav.yaml` with the tiny run's overrides and `values` (dotted keys)."""
    base = {**TINY, "run.dir": str(run_dir), "log.tensorboard": "false", "preemption.enabled": "false"}
    base.update(values)
    return ["-m", "ddppo", "train", str(GRIDNAV), *as_overrides(base)]


@dataclass
class Job:
    """Processes started on the hosts; their output goes to files (no pipe can fill and block them)."""

    procs: list[subprocess.Popen] = field(default_factory=list)
    logs: list[Path] = field(default_factory=list)
    exit_s: list[float | None] = field(default_factory=list)

    def wait(self, timeout: float) -> list[int | None]:
        self.exit_s = wait_exit(self.procs, timeout)
        return [p.poll() for p in self.procs]

    def output(self, i: int) -> str:
        return self.logs[i].read_text(errors="replace")

    def describe(self) -> str:
        return "\n".join(f"--- process {i} rc={p.poll()} exit after {self.exit_s[i] if self.exit_s else None} s\n"
                         f"{self.output(i)[-2500:]}" for i, p in enumerate(self.procs))


def start(net: Network, placements: Sequence[tuple[int, list[str], dict[str, str]]], logs: Path) -> Job:
    """[(host, argv after the python executable, launcher variables), ...] -> a Job."""
    logs.mkdir(parents=True, exist_ok=True)
    job = Job()
    for i, (host, argv, launcher) in enumerate(placements):
        log = logs / f"proc{i}-h{host}.log"
        with open(log, "w") as out:
            job.procs.append(net.popen(host, [sys.executable, *argv], env=subprocess_env(**launcher), stdout=out,
                                       stderr=subprocess.STDOUT))
        job.logs.append(log)
    return job


def by_hand(net: Network, hosts: Sequence[int], argv: list[str], port: int, logs: Path,
            master: str | None = None, extra: dict[str, str] | None = None) -> Job:
    """One rank per entry of `hosts` (its host), RANK/WORLD_SIZE/LOCAL_RANK set as a launcher does,
    MASTER_ADDR = the first host's address unless `master` is given."""
    world = len(hosts)
    local = {h: 0 for h in hosts}
    placements = []
    for rank, host in enumerate(hosts):
        env = {"RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_RANK": str(local[host]),
               "LOCAL_WORLD_SIZE": str(hosts.count(host)), "MASTER_ADDR": master or net.hosts[hosts[0]].addr,
               "MASTER_PORT": str(port), **(extra or {})}
        local[host] += 1
        placements.append((host, argv, env))
    return start(net, placements, logs)


def slurm_style(net: Network, hosts: Sequence[int], argv: list[str], job_id: int, logs: Path) -> Job:
    """The variables srun sets for one task per entry of `hosts` (block distribution), plus MASTER_ADDR = the
    first host's address as the SLURM guide's srun recipe (docs/guides/slurm.md) exports it; the port comes from the job id."""
    nodes = sorted(set(hosts))
    nodelist = ",".join(net.hosts[h].name for h in nodes)
    local = {h: 0 for h in hosts}
    placements = []
    for rank, host in enumerate(hosts):
        env = {"SLURM_PROCID": str(rank), "SLURM_STEP_NUM_TASKS": str(len(hosts)), "SLURM_LOCALID": str(local[host]),
               "SLURM_STEP_NUM_NODES": str(len(nodes)), "SLURM_STEP_NODELIST": nodelist, "SLURM_JOB_ID": str(job_id),
               "MASTER_ADDR": net.hosts[hosts[0]].addr}
        local[host] += 1
        placements.append((host, argv, env))
    return start(net, placements, logs)


def torchrun_multinode(net: Network, hosts: Sequence[int], nproc: int, argv: list[str], port: int, logs: Path,
                       run_id: str) -> Job:
    """`torchrun --nnodes=N --nproc-per-node=nproc --rdzv-backend=c10d --rdzv-endpoint=<first host>:port` on
    every host of `hosts`, as a cluster user types it on each node."""
    cmd = ["-m", "torch.distributed.run", f"--nnodes={len(hosts)}", f"--nproc-per-node={nproc}",
           "--rdzv-backend=c10d", f"--rdzv-endpoint={net.hosts[hosts[0]].name}:{port}", f"--rdzv-id={run_id}",
           "--max-restarts=0", *argv]
    return start(net, [(h, cmd, {}) for h in hosts], logs)


def newest_params(run_dir: Path) -> tuple[int, dict[str, torch.Tensor]]:
    from ddppo import checkpoint as ckpt

    found = ckpt.newest_valid(run_dir)
    assert found is not None, f"no valid checkpoint in {run_dir}"
    return ckpt.counters_of(found[1])["update"], found[1]["model"]


def wait_for_update(run_dir: Path, update: int, timeout: float, job: Job, poll_s: float = 0.2) -> None:
    """Wait until metrics.jsonl holds `update` (or a process of `job` ended: the caller's asserts say why)."""
    from ddppo.rundir import RunDir

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and all(p.poll() is None for p in job.procs):
        last = RunDir(run_dir).last_metrics()
        if last and last.get("update", 0) >= update:
            return
        time.sleep(poll_s)


def wait_until(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.1)


def loaded_torch(proc: subprocess.Popen) -> bool:
    """The process has imported torch (so ddppo's signal handlers, installed before, are in place)."""
    try:
        return "libtorch_cpu" in Path(f"/proc/{proc.pid}/maps").read_text()
    except OSError:
        return False


def connected_to(net: Network, host: int, port: int) -> bool:
    """Some process on host `host` has an established TCP connection to port `port` (e.g. the store)."""
    res = net.run(host, ["ss", "-tnH", "state", "established", f"( dport = :{port} )"])
    return bool(res.stdout.strip())
