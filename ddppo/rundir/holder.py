"""Who holds a directory's claim, and whether that holder is gone: the holder record and the mount table.

The holder record (DIR/.holder.json, written by claim.py) says who claimed the directory:

    {"command": "ddppo train", "host": "gpu017", "boot_id": "<kernel boot id>", "pid": 41233,
     "pid_start": <the process's start time, clock ticks since boot>, "since": <unix time>,
     "slurm": {"job_id": "1234", "array_job_id": "1200", "array_task_id": "3", "restart_count": "1",
               "step_id": "0"} or null, "heartbeat": <unix time>, "heartbeat_interval_s": <s between the last
     two heartbeats> or null, "stale_after_s": <the holder's checkpoint.stale_claim_s> or null, "token": "<hex>"}

`stale_reason` decides from it whether the holder is gone, in this order:
  1. the same host and boot: gone when its pid is dead (or is another process now: a different start time);
     alive otherwise, whatever else the record says
  2. the same SLURM job id as this process: its own earlier run (a requeue, or an srun retry inside the job)
  3. a SLURM job that `squeue` no longer shows running (`SQUEUE_TIMEOUT_S`; no squeue or no answer: unknown,
     so not stale)
  4. no heartbeat for longer than max(stale_after_s, 3 x its time between heartbeats) (train refreshes it at every
     checkpoint; eval and sweep write none, so this rule never applies to them)
Anything else is a live holder elsewhere.

`lock_scope` reads the mount table (/proc/self/mountinfo): how far an flock on a path reaches. On a local disk
or a shared file system with cluster-wide locks a free flock proves its last holder ended; on a mount that locks
per node (Lustre `localflock`, NFS `local_lock=flock|all` or `nolock`) or an unknown one it does not, and the
record decides.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

SQUEUE_TIMEOUT_S = 10.0  # the most a claim waits for squeue; no answer counts as "the job may still run"
RUNNING_STATES = {"RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED", "STOPPED", "RESIZING", "SIGNALING",
                  "STAGE_OUT"}  # squeue states in which the job's processes may still exist
_SLURM_IDS = {"job_id": "SLURM_JOB_ID", "array_job_id": "SLURM_ARRAY_JOB_ID", "array_task_id": "SLURM_ARRAY_TASK_ID",
              "restart_count": "SLURM_RESTART_COUNT", "step_id": "SLURM_STEP_ID"}


# ------------------------------------------------------------------------------ this process
def boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def process_start(pid: int) -> int | None:
    """The start time of process `pid` in clock ticks since boot (field 22 of /proc/PID/stat), or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return int(stat[stat.rindex(")") + 2:].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def pid_alive(pid: int, start: int | None = None) -> bool:
    """Process `pid` exists on this host (and, given `start`, is the one that started then)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    except (OSError, OverflowError):
        return False
    now = process_start(pid)
    return start is None or now is None or now == start


def slurm_ids() -> dict[str, str] | None:
    """This process's SLURM job, array and restart ids (None outside SLURM)."""
    if not os.environ.get("SLURM_JOB_ID"):
        return None
    return {key: os.environ[var] for key, var in _SLURM_IDS.items() if os.environ.get(var)}


def identity(command: str, stale_after_s: float | None) -> dict[str, Any]:
    """The holder record of this process claiming a directory for `command`."""
    now = time.time()
    return {"command": command, "host": socket.gethostname(), "boot_id": boot_id(), "pid": os.getpid(),
            "pid_start": process_start(os.getpid()), "since": now, "slurm": slurm_ids(), "heartbeat": now,
            "heartbeat_interval_s": None, "stale_after_s": stale_after_s, "token": uuid.uuid4().hex,
            "argv": " ".join(sys.argv[1:])[:200]}


# ------------------------------------------------------------------------------ a holder
def describe(record: dict | None) -> str:
    """`ddppo train` (pid 41233 on gpu017, SLURM job 1234, since 09:14:02, heartbeat 40 s ago)."""
    if not isinstance(record, dict):
        return "another ddppo process"
    try:
        parts = [f"pid {record['pid']} on {record['host']}"]
        slurm = record.get("slurm") or {}
        if slurm.get("job_id"):
            array = (f", array {slurm['array_job_id']}_{slurm.get('array_task_id', '')}"
                     if slurm.get("array_job_id") else "")
            parts.append(f"SLURM job {slurm['job_id']}{array}")
        parts.append(f"since {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(record['since']))}")
        parts.append(f"heartbeat {time.time() - record['heartbeat']:.0f} s ago")
        return f"`{record['command']}` ({', '.join(parts)})"
    except (KeyError, TypeError, ValueError, OverflowError):
        return "another ddppo process"


def same_node(record: dict, me: dict) -> bool:
    return bool(me["boot_id"]) and record.get("host") == me["host"] and record.get("boot_id") == me["boot_id"]


def live_here(record: Any, me: dict) -> bool:
    """`record` (a holder or edit record) names a process of this host and boot that is still the one it recorded.
    A record without a readable pid names none (pid 0 would be this process group to os.kill)."""
    if not isinstance(record, dict) or not same_node(record, me):
        return False
    try:
        pid = int(record["pid"])
    except (KeyError, TypeError, ValueError, OverflowError):
        return False
    return pid > 0 and pid_alive(pid, record.get("pid_start"))


def slurm_job_gone(job_id: str) -> bool | None:
    """True when SLURM no longer runs job `job_id`, False while it may, None when squeue does not tell."""
    try:
        out = subprocess.run(["squeue", "-h", "-j", str(job_id), "-o", "%T"], capture_output=True, text=True,
                             timeout=SQUEUE_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode == 0:
        return not any(state in RUNNING_STATES for state in out.stdout.split())
    return True if "invalid job id" in out.stderr.lower() else None


def stale_bound(record: dict) -> float | None:
    """How long the holder may go without a heartbeat (None: it promises none)."""
    bound = record.get("stale_after_s")
    if bound is None:
        return None
    return max(float(bound), 3 * float(record.get("heartbeat_interval_s") or 0))


def stale_reason(record: Any, me: dict) -> str | None:
    """Why the holder of `record` is gone (a phrase for the takeover warning), or None while it may be alive."""
    if not isinstance(record, dict):
        return "its holder record does not read"
    try:
        if same_node(record, me):
            return None if live_here(record, me) else f"its process (pid {record['pid']}) is gone"
        job = (record.get("slurm") or {}).get("job_id")
        if job and job == (me.get("slurm") or {}).get("job_id"):
            return f"it is this SLURM job's own earlier run (job {job}, requeued or retried)"
        if job and slurm_job_gone(job):
            return f"SLURM no longer runs its job {job}"
        bound, age = stale_bound(record), time.time() - float(record["heartbeat"])
        if bound is not None and age > bound:
            return (f"no heartbeat for {age:.0f} s, past its bound of {bound:g} s (checkpoint.stale_claim_s, or 3x "
                    f"its time between checkpoints)")
    except (KeyError, TypeError, ValueError):
        return "its holder record does not read"
    return None


# ------------------------------------------------------------------------------ the mount table
LOCAL_FS = {"ext2", "ext3", "ext4", "xfs", "btrfs", "tmpfs", "zfs", "f2fs", "overlay", "ramfs", "jfs", "reiserfs",
            "bcachefs", "vfat", "exfat", "ntfs3", "hfsplus", "squashfs", "erofs", "devtmpfs"}
GLOBAL_LOCK_FS = {"gpfs", "ceph", "beegfs", "panfs", "wekafs"}  # shared, flock reaches every node
_warned: set[str] = set()


def _unescape(field: str) -> str:
    """A mountinfo path: space, tab, newline and backslash are written as octal escapes (\\040)."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def mount_of(path: Path, mountinfo: str) -> tuple[str, str, set[str]]:
    """(mount point, file system type, mount and super options) of the mount holding `path`."""
    real, best = os.path.realpath(path), ("/", "", set())
    for line in mountinfo.splitlines():
        fields = line.split()
        if " - " not in line or len(fields) < 6:
            continue
        point = _unescape(fields[4])
        after = line.split(" - ", 1)[1].split()
        if (real == point or real.startswith(point.rstrip("/") + "/")) and len(point) >= len(best[0]):
            options = set(fields[5].split(",")) | set((after[2] if len(after) > 2 else "").split(","))
            best = (point, after[0], options)
    return best


def lock_scope(path: Path, mountinfo: str | None = None) -> tuple[str, str | None]:
    """How far an flock on `path` reaches: "local" (a local disk), "global" (a shared file system that locks
    cluster-wide), "node" (shared, locking per node) or "unknown"; and for "node", a warning to log."""
    if mountinfo is None:
        try:
            mountinfo = Path("/proc/self/mountinfo").read_text()
        except OSError:
            return "unknown", None
    point, fstype, options = mount_of(path, mountinfo)
    kind, why = fstype.split(".")[0], None
    if kind in LOCAL_FS:
        return "local", None
    if kind in GLOBAL_LOCK_FS:
        return "global", None
    if kind in ("nfs", "nfs4"):
        local = [o for o in ("nolock", "local_lock=flock", "local_lock=all") if o in options]
        if not local:
            return "global", None
        why = f"NFS mounted with {local[0]}"
    elif kind == "lustre":
        if "flock" in options:
            return "global", None
        why = "Lustre mounted with localflock" if "localflock" in options else "Lustre mounted without flock"
    else:
        return "unknown", None
    return "node", (f"{point} is {why}: its locks hold per node only, so ddppo decides who holds a directory on it "
                    f"from its holder record (.holder.json); mount it with -o flock (Lustre) or without "
                    f"local_lock/nolock (NFS) for cluster-wide locks")


def warn_once(key: str) -> bool:
    """True the first time `key` is seen in this process."""
    if key in _warned:
        return False
    _warned.add(key)
    return True
