"""A passthrough FUSE file system for the shared-filesystem claim tests (tests/reliability/test_rundir_claim.py).

    python fuse_fs.py BACKING MOUNTPOINT MODE      (runs in the foreground until unmounted)

MODE says how it answers `flock`, standing in for the shared file systems a cluster mounts:
  nolock   flock fails with ENOSYS: Lustre mounted without `flock` or `localflock`
  local    the kernel keeps flock locks per mount (the server does not take them): two mounts of one BACKING are
           two nodes of NFS `local_lock=flock` / `nolock` or Lustre `localflock`, each seeing only its own locks

Every other operation passes through to BACKING. Needs libfuse 2 (Debian: `libfuse2`) and `mfusepy` (PyPI); the
tests install both where they can and skip otherwise (fuse_helpers.py).
"""

from __future__ import annotations

import errno
import os
import sys

import mfusepy as fuse


class Passthrough(fuse.Operations):
    use_ns = True

    def __init__(self, root: str):
        self.root = root

    def _full(self, path: str) -> str:
        return os.path.join(self.root, path.lstrip("/"))

    def access(self, path, amode):
        if not os.access(self._full(path), amode):
            raise fuse.FuseOSError(errno.EACCES)
        return 0

    def getattr(self, path, fh=None):
        st = os.fstat(fh) if fh is not None else os.lstat(self._full(path))
        return {k: getattr(st, k) for k in ("st_mode", "st_nlink", "st_uid", "st_gid", "st_size", "st_atime_ns",
                                             "st_mtime_ns", "st_ctime_ns", "st_ino")} | {
            "st_atime": st.st_atime_ns, "st_mtime": st.st_mtime_ns, "st_ctime": st.st_ctime_ns}

    def readdir(self, path, fh):
        return [".", "..", *os.listdir(self._full(path))]

    def readlink(self, path):
        return os.readlink(self._full(path))

    def mkdir(self, path, mode):
        os.mkdir(self._full(path), mode)
        return 0

    def rmdir(self, path):
        os.rmdir(self._full(path))
        return 0

    def unlink(self, path):
        os.unlink(self._full(path))
        return 0

    def symlink(self, target, source):
        os.symlink(source, self._full(target))
        return 0

    def rename(self, old, new):
        os.rename(self._full(old), self._full(new))
        return 0

    def link(self, target, source):
        os.link(self._full(source), self._full(target))
        return 0

    def chmod(self, path, mode):
        os.chmod(self._full(path), mode)
        return 0

    def chown(self, path, uid, gid):
        os.chown(self._full(path), uid, gid)
        return 0

    def utimens(self, path, times=None):
        os.utime(self._full(path), ns=times)
        return 0

    def truncate(self, path, length, fh=None):
        if fh is not None:
            os.ftruncate(fh, length)
        else:
            os.truncate(self._full(path), length)
        return 0

    def statfs(self, path):
        st = os.statvfs(self._full(path))
        return {k: getattr(st, k) for k in ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree",
                                             "f_files", "f_flag", "f_frsize", "f_namemax")}

    def open(self, path, flags):
        return os.open(self._full(path), flags)

    def create(self, path, mode, fi=None):
        return os.open(self._full(path), os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)

    def read(self, path, size, offset, fh):
        return os.pread(fh, size, offset)

    def write(self, path, data, offset, fh):
        return os.pwrite(fh, data, offset)

    def flush(self, path, fh):
        return 0

    def fsync(self, path, datasync, fh):
        os.fsync(fh)
        return 0

    def release(self, path, fh):
        os.close(fh)
        return 0


class NoLock(Passthrough):
    def flock(self, path, fh, op):
        raise fuse.FuseOSError(errno.ENOSYS)


def main() -> None:
    backing, mountpoint, mode = sys.argv[1:4]
    ops = {"nolock": NoLock, "local": Passthrough}[mode](os.path.realpath(backing))
    fuse.FUSE(ops, mountpoint, foreground=True, nothreads=False, fsname=f"ddppo-test-{mode}")


if __name__ == "__main__":
    main()
