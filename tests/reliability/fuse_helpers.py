"""Shared file systems for the claim tests, as FUSE mounts of one backing folder (fuse_fs.py), and processes on
other "hosts" (a UTS namespace with its own host name).

This kernel has no NFS client or server (no nfs/nfsd in /proc/filesystems, no modules to load), so the NFS and
Lustre behaviours the claim must handle are reproduced with FUSE, in the kernel's own lock code:
  nolock   flock fails with ENOSYS (Lustre without `flock`)
  local    every mount keeps its own flock locks: two mounts of one folder are two nodes of a per-node locking
           mount (NFS `local_lock=flock` or `nolock`, Lustre `localflock`)
Needs root, /dev/fuse, libfuse 2 (apt-get installed here when missing, as tests/multihost does for iproute2) and
mfusepy (the dev extra). Where one is missing the tests skip with the reason, or fail under DDPPO_REQUIRE_FUSE=1.
"""

from __future__ import annotations

import contextlib
import ctypes.util
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Iterator

import testutil

HERE = Path(__file__).resolve().parent
MOUNT_WAIT_S = 30


def _install_libfuse() -> None:
    if ctypes.util.find_library("fuse") or os.geteuid() != 0 or not shutil.which("apt-get"):
        return
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    lock = ["-o", "DPkg::Lock::Timeout=120"]
    for cmd in (["apt-get", *lock, "update", "-qq"],
                ["apt-get", *lock, "install", "-y", "-qq", "--no-install-recommends", "libfuse2"]):
        subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)


def why_unavailable() -> str | None:
    """Why FUSE mounts cannot be made here (None: they can)."""
    if sys.platform != "linux" or os.geteuid() != 0:
        return "FUSE mounts need Linux and root"
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse"
    _install_libfuse()
    if not ctypes.util.find_library("fuse"):
        return "no libfuse 2 (apt-get install libfuse2)"
    try:
        import mfusepy  # noqa: F401
    except (ImportError, OSError) as err:
        return f"mfusepy does not import ({err}): pip install -e '.[dev]'"
    return None


def require_fuse() -> None:
    reason = why_unavailable()
    if reason:
        testutil.unavailable("DDPPO_REQUIRE_FUSE", "no FUSE", reason)


@contextlib.contextmanager
def fuse_mount(backing: Path, parent: Path, mode: str) -> Iterator[Path]:
    """`backing` mounted through fuse_fs.py in `mode` under `parent` (unmounted on the way out)."""
    point = parent / f"{mode}-{uuid.uuid4().hex[:6]}"
    point.mkdir()
    log = open(parent / f"{point.name}.log", "w")
    proc = subprocess.Popen([sys.executable, str(HERE / "fuse_fs.py"), str(backing), str(point), mode],
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + MOUNT_WAIT_S
    while not os.path.ismount(point):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            log.close()
            raise AssertionError(f"fuse_fs.py {mode} did not mount: {(parent / f'{point.name}.log').read_text()}")
        time.sleep(0.05)
    try:
        yield point
    finally:
        if subprocess.run(["umount", str(point)], capture_output=True, timeout=30).returncode != 0:
            subprocess.run(["umount", "-l", str(point)], capture_output=True, timeout=30)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def on_host(name: str, argv: list[str]) -> list[str]:
    """`argv` run on another "host": its own UTS namespace named `name` (same kernel, so the same boot id)."""
    return ["unshare", "--uts", "sh", "-c", f'hostname "$0" && exec "$@"', name, *argv]


def can_unshare() -> bool:
    return bool(shutil.which("unshare")) and subprocess.run(
        ["unshare", "--uts", "true"], capture_output=True, timeout=30).returncode == 0
