"""A throwaway SLURM cluster on this machine, for the slurm tests.

Debian's ``slurm-wlm`` and ``munge`` are installed with apt if missing. Nothing
system-wide is touched besides that install: munged runs with its own key and
socket in a private directory, slurmctld and one slurmd per simulated node run in
the foreground as children of this process, every port is picked free, and client
commands find the cluster through ``SLURM_CONF`` (``cluster.env``), which sbatch
passes on to the jobs (so ``scontrol requeue`` inside a job reaches it too).

Simulated nodes are several slurmd processes on this host, each with its own
``NodeName``, ``Port`` and spool dir and ``NodeAddr=127.0.0.1``. Their CPU count is
declared (``SlurmdParameters=config_overrides``), not probed, so a two-core machine
can host two nodes of two CPUs each.

Timing knobs that matter (SLURM's defaults are minutes):
``AuthInfo=cred_expire=5`` and ``sched_interval=2``: a requeued job becomes
eligible ~6 s after it ended and is started on the next scheduler pass;
``KillWait=10``: grace between SIGTERM and SIGKILL on requeue/cancel.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

BINARIES = ("munged", "slurmctld", "slurmd", "sbatch", "scontrol", "squeue", "scancel", "sinfo")
FINAL_STATES = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL",
                "DEADLINE", "PREEMPTED"}


class ClusterUnavailable(RuntimeError):
    """SLURM could not be installed or started here; the message says why."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(predicate, timeout: float, what: str, interval: float = 0.25):
    """Poll ``predicate`` until it returns something truthy; raise TimeoutError naming ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


def install_packages(timeout: float = 300) -> None:
    """apt-get install slurm-wlm + munge unless every binary is already on PATH."""
    if all(shutil.which(b) for b in BINARIES):
        return
    if os.geteuid() != 0:
        raise ClusterUnavailable("slurm-wlm/munge are not installed and installing them needs root")
    if not shutil.which("apt-get"):
        raise ClusterUnavailable("slurm-wlm/munge are not installed and apt-get is not available")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    lock = ["-o", "DPkg::Lock::Timeout=120"]
    for cmd in (["apt-get", *lock, "update", "-qq"],
                # no recommends: 9 packages instead of ~40 (hdf5, rrd, ipmi, ... plugins)
                ["apt-get", *lock, "install", "-y", "-qq", "--no-install-recommends", "slurm-wlm", "munge"]):
        try:
            r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise ClusterUnavailable(f"{' '.join(cmd)} took over {timeout:.0f} s") from None
        if r.returncode != 0:
            raise ClusterUnavailable(f"{' '.join(cmd)} failed (rc={r.returncode}): {r.stderr.strip()[-800:]}")
    missing = [b for b in BINARIES if not shutil.which(b)]
    if missing:
        raise ClusterUnavailable(f"installed slurm-wlm/munge but still missing: {missing}")


@dataclass
class LocalSlurm:
    """A running (after ``start``) SLURM cluster rooted at ``root``."""

    root: Path
    nodes: tuple[str, ...] = ("n1", "n2")
    cpus_per_node: int = 2
    env: dict = field(default_factory=dict)
    _procs: dict = field(default_factory=dict)
    _munge_dir: Path | None = None
    munge_socket: Path | None = None

    @property
    def conf(self) -> Path:
        return self.root / "etc" / "slurm.conf"

    @property
    def logs(self) -> Path:
        return self.root / "log"

    # ------------------------------------------------------------------ lifecycle
    def start(self, timeout: float = 60) -> None:
        """Start munged, slurmctld and the slurmds; return once every node is idle."""
        for d in ("etc", "log", "state/ctld", *(f"state/{n}" for n in self.nodes)):
            (self.root / d).mkdir(parents=True, exist_ok=True)
        self._start_munge()
        self._write_conf()
        self.env = dict(os.environ, SLURM_CONF=str(self.conf))
        for var in [k for k in self.env if k.startswith(("SLURM_", "SBATCH_", "SRUN_"))]:
            if var != "SLURM_CONF":  # a pytest run inside a job must not leak that job's settings
                del self.env[var]
        self._spawn("slurmctld", ["slurmctld", "-D"])
        for node in self.nodes:
            self._spawn(f"slurmd-{node}", ["slurmd", "-D", "-N", node])
        try:
            wait_for(self._all_idle, timeout, f"nodes {self.nodes} to be idle")
        except TimeoutError as e:
            raise ClusterUnavailable(f"{e}; sinfo: {self._sinfo()}\n{self.log_tail()}") from None

    def stop(self) -> None:
        """Cancel every job, then stop the daemons this object started. Safe to call twice."""
        if self._procs.get("slurmctld") and self._procs["slurmctld"].poll() is None:
            try:
                ids = self.run("squeue", "-h", "-o", "%i", check=False).split()
                if ids:
                    self.run("scancel", *ids, check=False)
                    wait_for(lambda: not self.run("squeue", "-h", "-o", "%i", check=False).strip(), 30,
                             "cancelled jobs to leave the queue")
            except (TimeoutError, subprocess.TimeoutExpired, OSError):
                pass  # stop the daemons all the same
        # slurmds first (they talk to slurmctld on the way down), munged last
        names = [n for n in self._procs if n.startswith("slurmd")] + ["slurmctld", "munged"]
        for name in names:
            proc = self._procs.pop(name, None)
            if proc is None or proc.poll() is not None:
                continue
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        if self._munge_dir is not None:
            shutil.rmtree(self._munge_dir, ignore_errors=True)
            self._munge_dir = None

    def _spawn(self, name: str, argv: list[str], env: dict | None = None) -> None:
        out = open(self.logs / f"{name}.stdout", "ab")
        # own session: a Ctrl-C aimed at pytest must not kill the daemons before teardown cancels the jobs
        self._procs[name] = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                             env=env or self.env, start_new_session=True)
        out.close()
        time.sleep(0.2)
        if self._procs[name].poll() is not None:
            raise ClusterUnavailable(f"{name} exited at start (rc={self._procs[name].returncode})\n{self.log_tail()}")

    def _start_munge(self) -> None:
        # munged wants every directory up to its socket to be searchable by all, so it cannot live under
        # pytest's 0700 temp root; a short /tmp path also keeps the socket under the 108-byte limit
        self._munge_dir = Path(tempfile.mkdtemp(prefix="ddppo-munge-"))
        self._munge_dir.chmod(0o755)
        key = self._munge_dir / "munge.key"
        key.write_bytes(os.urandom(128))  # what `mungekey --create` writes: 1024 random bits
        key.chmod(0o400)
        self.munge_socket = self._munge_dir / "munge.socket"
        argv = ["munged", "--foreground", "--force", f"--socket={self.munge_socket}", f"--key-file={key}",
                f"--pid-file={self._munge_dir / 'munged.pid'}", f"--seed-file={self._munge_dir / 'munged.seed'}",
                f"--log-file={self.logs / 'munged.log'}"]
        self._spawn("munged", argv, env=dict(os.environ))
        try:
            wait_for(self.munge_socket.exists, 10, "munged's socket")
        except TimeoutError as e:
            raise ClusterUnavailable(f"{e}\n{self.log_tail()}") from None

    def _write_conf(self) -> None:
        r, host = self.root, socket.gethostname().split(".")[0]
        node_lines = "\n".join(
            f"NodeName={n} NodeAddr=127.0.0.1 Port={free_port()} CPUs={self.cpus_per_node} "
            "State=UNKNOWN" for n in self.nodes)
        self.conf.write_text(f"""\
# throwaway test cluster written by tests/slurm/local_slurm.py
ClusterName=ddppotest
# train.sbatch derives MASTER_PORT from the job id: clusters of test sessions running side by side must not
# hand out the same ids
FirstJobId={random.SystemRandom().randrange(1000, 19000, 100)}
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# own munged socket; a requeued job may start again only cred_expire+1 s after it ended (default 120, min 5)
AuthInfo=socket={self.munge_socket},cred_expire=5
StateSaveLocation={r}/state/ctld
SlurmdSpoolDir={r}/state/%n
SlurmctldPidFile={r}/state/slurmctld.pid
SlurmdPidFile={r}/state/slurmd-%n.pid
SlurmctldLogFile={r}/log/slurmctld.log
SlurmdLogFile={r}/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
# node sizes come from this file, not from the hardware: several slurmd share this host's CPUs
SlurmdParameters=config_overrides
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
# requeued jobs become eligible by time, not by an event: schedule often (defaults 30 s / 60 s)
SchedulerParameters=bf_interval=1,sched_interval=2
MpiDefault=none
SwitchType=switch/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
# job completion records (every end of a job, a requeue included) in a file: `sacct --completion` reads them
JobCompType=jobcomp/filetxt
JobCompLoc={r}/log/jobcomp.txt
MailProg=/bin/true
ReturnToService=2
JobRequeue=1
KillWait=10
InactiveLimit=0
MinJobAge=600
{node_lines}
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
""")

    # ------------------------------------------------------------------ clients
    def run(self, *argv: str, check: bool = True, timeout: float = 30, **kw) -> str:
        r = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=timeout, **kw)
        if check and r.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed (rc={r.returncode}): {r.stderr.strip()}")
        return r.stdout

    def sbatch(self, script: str | Path, *args: str, options: tuple[str, ...] = (), env: dict | None = None,
               cwd: str | Path | None = None) -> int:
        out = subprocess.run(["sbatch", "--parsable", *options, str(script), *args], env={**self.env, **(env or {})},
                             cwd=cwd, capture_output=True, text=True, timeout=30)
        if out.returncode != 0:
            raise RuntimeError(f"sbatch failed (rc={out.returncode}): {out.stderr.strip()}")
        return int(out.stdout.strip().split(";")[0])

    def sacct(self, job_id: int) -> str:
        """`sacct --completion` lines of the job (one per end of the job: requeues and the final one)."""
        return self.run("sacct", "--completion", "-j", str(job_id), "-o",
                        "JobID,JobName%20,State,ExitCode,Start,End,NodeList", check=False)

    def job(self, job_id: int) -> dict[str, str]:
        """``scontrol show job`` as a dict (JobState, Restarts, NodeList, NumNodes, ExitCode, ...)."""
        for attempt in range(3):  # a busy slurmctld may time out now and then
            try:
                line = self.run("scontrol", "show", "job", "--oneliner", str(job_id))
                return dict(re.findall(r"(\w+)=(\S*)", line))
            except (RuntimeError, subprocess.TimeoutExpired):
                if attempt == 2:
                    raise
                time.sleep(1)
        raise AssertionError("unreachable")

    def wait_job(self, job_id: int, timeout: float, log: Path | None = None) -> dict[str, str]:
        """Poll ``scontrol show job`` until the job is in a final state; return its record."""
        try:
            info = wait_for(lambda: (i := self.job(job_id))["JobState"] in FINAL_STATES and i, timeout,
                            f"job {job_id} to end", interval=0.5)
        except TimeoutError as e:
            raise AssertionError(f"{e}: {self.job(job_id).get('JobState')}\n{self.describe(job_id, log)}") from None
        return info

    def _all_idle(self) -> bool:
        states = self._sinfo().split()
        return len(states) == len(self.nodes) and all(s == "idle" for s in states)

    def _sinfo(self) -> str:
        try:
            return self.run("sinfo", "-h", "-N", "-o", "%T", check=False, timeout=10)
        except subprocess.TimeoutExpired:
            return "(sinfo timed out)"

    # ------------------------------------------------------------------ diagnostics
    def log_tail(self, lines: int = 25) -> str:
        parts = []
        for f in sorted(self.logs.glob("*")):
            if f.suffix == ".stdout" and f.with_suffix(".log").exists():
                continue  # the daemon's stderr repeats its log file
            text = f.read_text(errors="replace").splitlines()[-lines:]
            if text:
                parts.append(f"--- {f.name}\n" + "\n".join(text))
        return "\n".join(parts)

    def describe(self, job_id: int, log: Path | None = None) -> str:
        """Everything useful when a job test fails: job record, job output, daemon logs."""
        try:
            record = self.run("scontrol", "show", "job", str(job_id), check=False)
        except Exception as e:  # noqa: BLE001 - diagnostics must not raise
            record = repr(e)
        out = log.read_text(errors="replace")[-6000:] if log and log.exists() else "(no job output)"
        return f"--- scontrol show job {job_id}\n{record}\n--- job output {log}\n{out}\n{self.log_tail(15)}"
