"""One live writer per directory: the claim, right on a local disk and on shared file systems alike.

A claim on DIR is two files:
  DIR/.lock          an flock target (kept: removing it while held would let two processes lock two files)
  DIR/.holder.json   the holder record (holder.py): who holds DIR, with a heartbeat; created exclusively (a link,
                     which never replaces), so of two claimers exactly one creates it, on NFS as on a local disk;
                     removed on release
Claiming: flock .lock where the file system supports it, then create the record. When a record is already there,
the flock says whether its holder ended, where it can tell: a free lock on a local disk or a file system that locks
cluster-wide means the holder is gone; a held lock on a local disk, or on a mount that locks per node, means it is
alive. Everywhere else (a mount that locks per node or an unknown one, no flock at all: ENOSYS, ENOLCK, EOPNOTSUPP,
EINVAL, or a lock a dead node still holds on NFS or Lustre) the record decides (holder.stale_reason). A gone
holder is taken over with one warning: the record replaced (rename over it, then read back to confirm); a live
one is refused (DirectoryBusy, exit 2) naming it and `ddppo rundir release DIR`, the one command that frees DIR.
Every change of an existing record (takeover, heartbeat, release) happens under DIR/.holder.json.edit, a lock
file created exclusively and removed at once; one a process killed meanwhile left is cleared at once where
that process ran on this host, else after `EDIT_STALE_S`.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import shlex
import socket
import time
from pathlib import Path
from typing import Any, Callable, Iterator

from ddppo.errors import ConfigError, DirectoryBusy
from ddppo.rundir.holder import (boot_id, describe, identity, live_here, lock_scope, process_start, same_node,
                                 stale_reason, warn_once)

try:
    import fcntl
except ImportError:  # not POSIX: the holder record alone
    fcntl = None

log = logging.getLogger(__name__)

LOCK = ".lock"
RECORD = ".holder.json"
EDIT = ".holder.json.edit"
EDIT_STALE_S = 60.0  # an edit lock older than this was left by a process that died while editing
EDIT_WAIT_S = 5.0  # how long to wait for another process's edit (it takes milliseconds)
ATTEMPTS = 5
NO_FLOCK = {errno.ENOSYS, errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL}
_MISSING = object()


# ------------------------------------------------------------------------------ the record's file
def _read(path: Path) -> Any:
    """The record in `path`: a dict, None when it does not read (not JSON), _MISSING when there is none."""
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return _MISSING
    except (OSError, ValueError):
        return None


def _temp(path: Path, record: dict) -> Path:
    """`record` written whole to a temp file beside `path` (removed again if that fails: a full disk)."""
    tmp = path.with_name(f"{path.name}.{record['host']}.{record['pid']}.{record['token'][:8]}.tmp")
    try:
        with open(tmp, "w") as f:
            f.write(json.dumps(record) + "\n")
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp


def _create(path: Path, record: dict) -> bool:
    """Create `path` holding `record`, whole, unless it exists (then False)."""
    tmp = _temp(path, record)
    try:
        os.link(tmp, path)
        return True
    except FileExistsError:
        return False
    except OSError:  # no hard links on this file system: an exclusive create (the record is briefly empty)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return False
        with os.fdopen(fd, "w") as f:
            f.write(tmp.read_text())
        return True
    finally:
        tmp.unlink(missing_ok=True)


def _replace(path: Path, record: dict) -> None:
    os.replace(_temp(path, record), path)


@contextlib.contextmanager
def _editing(directory: Path) -> Iterator[None]:
    """Hold DIR/.holder.json.edit while changing an existing record (DirectoryBusy if another process holds it
    for longer than EDIT_WAIT_S)."""
    edit, deadline = directory / EDIT, time.monotonic() + EDIT_WAIT_S
    while True:
        try:
            fd = os.open(edit, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            break
        except FileExistsError:
            with contextlib.suppress(FileNotFoundError):
                if time.time() - edit.stat().st_mtime > EDIT_STALE_S or _editor_gone(edit):
                    log.warning("removing %s, left by a process that died while changing the holder record", edit)
                    edit.unlink()
                    continue
            if time.monotonic() > deadline:
                raise DirectoryBusy(f"{directory}: another process is changing who holds it ({edit} exists): try "
                                    f"again; if no ddppo process starts or stops there, remove that file") from None
            time.sleep(0.05)
    try:
        os.write(fd, json.dumps({"host": socket.gethostname(), "boot_id": boot_id(), "pid": os.getpid(),
                                 "pid_start": process_start(os.getpid())}).encode())
        os.close(fd)
        yield
    finally:
        edit.unlink(missing_ok=True)


def _editor_gone(edit: Path) -> bool:
    """The edit lock's process ran on this host and is dead (killed while it edited)."""
    editor = _read(edit)
    here = {"host": socket.gethostname(), "boot_id": boot_id()}
    return isinstance(editor, dict) and same_node(editor, here) and not live_here(editor, here)


def _flock(fd: int, what: str, directory: Path) -> str:
    """"held" (this process holds DIR/.lock), "busy" (another does) or "none" (the file system has no flock)."""
    if fcntl is None:
        return "none"
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return "held"
    except BlockingIOError:
        return "busy"
    except OSError as err:
        if err.errno not in NO_FLOCK:
            raise
        if warn_once(f"noflock:{directory}"):
            log.warning("%s: %s has no flock (%s): claiming it with its holder record (%s) alone", what,
                        directory, err.strerror or err, RECORD)
        return "none"


def _fresh_lock(directory: Path, fd: int) -> int:
    """Replace DIR/.lock by a new file this process locks: a dead node's lock on the old one no longer counts."""
    tmp = directory / f"{LOCK}.{os.getpid()}.tmp"
    new = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    with contextlib.suppress(OSError):
        fcntl.flock(new, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.replace(tmp, directory / LOCK)
    os.close(fd)
    return new


# ------------------------------------------------------------------------------ the claim
class Claim:
    """This process's claim on a directory, until `release` or the process ends (an empty one: fd None)."""

    def __init__(self, directory: Path, fd: int | None, created: list[Path], record: dict | None = None,
                 lock_created: bool = False):
        self.directory, self.fd, self.created = Path(directory), fd, created
        self.record, self.lock_created = record, lock_created

    def heartbeat(self) -> None:
        """Refresh the record's heartbeat (train: at every checkpoint, before writing it). DirectoryBusy when
        another process has taken the directory over meanwhile (it judged this one gone): nothing more may be
        written."""
        if self.record is None:
            return
        now, path = time.time(), self.directory / RECORD
        try:
            with _editing(self.directory):
                current = _read(path)
                if not isinstance(current, dict) or current.get("token") != self.record["token"]:
                    self.record = None
                    raise DirectoryBusy(f"{self.directory} is no longer this run's: it was taken over by "
                                        f"{describe(current) if current is not _MISSING else 'nobody (released)'}; "
                                        f"this process stops without writing to it")
                record = {**self.record, "heartbeat": now, "heartbeat_interval_s": now - self.record["heartbeat"]}
                _replace(path, record)
                self.record = record
        except OSError as err:  # a full disk, say: the checkpoint's own write reports it
            log.warning("could not refresh the heartbeat in %s (%s)", path, err.strerror or err)

    def release(self, failed_start: bool = False) -> None:
        """Give the claim up: the record goes; directories the claim created that hold nothing else are removed
        again, and with `failed_start` (the command refused before writing anything) a lock file this claim
        created too: a command that fails before writing leaves nothing behind."""
        if self.record is not None:
            path = self.directory / RECORD
            with contextlib.suppress(OSError, DirectoryBusy), _editing(self.directory):
                current = _read(path)
                if isinstance(current, dict) and current.get("token") == self.record["token"]:
                    path.unlink()
            self.record = None
        if self.fd is None:
            return
        with contextlib.suppress(OSError):  # removed meanwhile, or no longer empty: left as it is
            if failed_start and self.lock_created:
                (self.directory / LOCK).unlink()
            if self.created and [p.name for p in self.directory.iterdir()] == [LOCK]:
                (self.directory / LOCK).unlink()
            if self.created and not any(self.directory.iterdir()):
                for d in reversed(self.created):
                    d.rmdir()
        os.close(self.fd)
        self.fd = None

    def __enter__(self) -> "Claim":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()


def claim_dir(directory: str | Path, what: str, elsewhere: str, wait: str = "wait for it to finish",
              stale_after_s: float | None = None) -> Claim:
    """Claim `directory` for `what` (e.g. "ddppo eval"), creating it: DirectoryBusy naming the holder, `wait`,
    `elsewhere` (how to pick another folder) and the release command while another live process holds it;
    ConfigError naming the folder and `elsewhere` when it cannot be made or written (a file in the way, a
    read-only disk). `stale_after_s`: how long this holder may go without a heartbeat before others take it as
    gone (None: it writes none)."""
    directory = Path(directory)
    created = [p for p in [directory, *directory.parents] if not p.exists()][::-1]
    try:
        directory.mkdir(parents=True, exist_ok=True)
        lock_created = not (directory / LOCK).exists()
        fd = os.open(directory / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as err:
        raise ConfigError(f"{what} cannot write into {directory} ({err.strerror or err}): make it writable, "
                          f"or {elsewhere}") from None
    claim = Claim(directory, fd, created, None, lock_created)
    try:
        scope, warning = lock_scope(directory)
        if warning and warn_once(warning):
            log.warning("%s", warning)
        state = _flock(fd, what, directory)
        me = identity(what, stale_after_s)

        def judge(record: Any) -> str | None:
            if state == "held" and scope in ("local", "global"):
                return "its lock is free, so its process ended"
            return stale_reason(record, me)

        def busy(record: Any) -> DirectoryBusy:
            real = directory.resolve()
            shown = f"{directory}" if real == directory.absolute() else f"{directory} (that is {real})"
            return DirectoryBusy(f"{shown} is in use by {describe(record)}: {wait}, or {elsewhere}; if that process "
                                 f"is gone (its node lost), `ddppo rundir release {shlex.quote(str(directory))}` "
                                 f"frees the directory")

        if state == "busy" and scope in ("local", "node"):  # the lock's holder is a live process of this node
            raise busy(_read(directory / RECORD))
        _take_record(directory, me, judge, busy, create=state != "busy")
        claim.record = me
        if state == "busy":  # the lock of a holder found gone: a dead node's, still kept by NFS or Lustre
            claim.fd = _fresh_lock(directory, fd)
    except BaseException:
        claim.release(failed_start=True)
        raise
    return claim


def _take_record(directory: Path, me: dict, judge: Callable[[Any], str | None],
                 busy: Callable[[Any], DirectoryBusy], create: bool = True) -> None:
    """Create DIR/.holder.json as `me` (unless not `create`: the lock is held, so only a holder found gone may
    be taken over), or take it over from a holder `judge` finds gone; `busy(record)` for a live one."""
    path = directory / RECORD
    for attempt in range(ATTEMPTS):
        if create and _create(path, me):
            return
        record = _read(path)
        if record is _MISSING and create:  # released meanwhile
            continue
        if (record is None or record is _MISSING) and attempt < ATTEMPTS - 1:  # being written: look again
            time.sleep(0.2)
            continue
        if record is _MISSING:  # a held lock, and no record to judge its holder by
            raise busy(None)
        reason = judge(record)
        if reason is None:
            raise busy(record)
        with _editing(directory):
            if _read(path) != record:  # changed meanwhile (a heartbeat, another claimer): judge again
                continue
            _replace(path, me)
        confirmed = _read(path)
        if isinstance(confirmed, dict) and confirmed.get("token") == me["token"]:
            log.warning("%s: %s was held by %s, which is gone (%s): taking it over", me["command"], directory,
                        describe(record), reason)
            return
    raise busy(_read(path))


def release_dir(directory: str | Path) -> str:
    """`ddppo rundir release DIR`: free a directory whose holder is gone but cannot be found so from here (a
    node lost, without SLURM to tell); refused while the holder is a live process on this host. What was done,
    as a line for the user."""
    directory = Path(directory)
    if not directory.is_dir():
        raise ConfigError(f"{directory} is not a directory: name the run dir (run.dir), eval output or sweep dir")
    record, state, fd = _read(directory / RECORD), "none", None
    with contextlib.suppress(OSError):
        fd = os.open(directory / LOCK, os.O_RDWR)
        state = _flock(fd, "ddppo rundir release", directory)
    try:
        me = identity("ddppo rundir release", None)
        if live_here(record, me) or (state == "busy" and lock_scope(directory)[0] in ("local", "node")):
            raise DirectoryBusy(f"{directory} is held by {describe(record)}, a live process on this host: stop it "
                                f"(it releases the directory as it ends); release is for holders that are gone")
        if record is _MISSING and state != "busy":
            return f"{directory} has no holder: nothing to release"
        with _editing(directory):
            (directory / RECORD).unlink(missing_ok=True)
            if state == "busy" and fcntl is not None:  # a dead node's lock: a new lock file
                fd = _fresh_lock(directory, fd)
        return (f"released {directory}, held by {describe(record)}; were that process still running, it would "
                f"stop at its next checkpoint")
    finally:
        if fd is not None:
            os.close(fd)
