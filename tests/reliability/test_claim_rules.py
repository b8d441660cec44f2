"""The claim's rules in one process (fast tier): which mounts lock per node (from mount-table lines as Linux
writes them for NFS and Lustre, which this machine cannot mount), and when a holder record is stale.
The same rules with real processes and mounts: test_rundir_claim.py."""

from __future__ import annotations

import json
import os
import time

import pytest

from ddppo.rundir import claim as claim_mod
from ddppo.rundir import holder
from ddppo.rundir.claim import claim_dir, release_dir
from ddppo.errors import DirectoryBusy

ROOT = "22 1 253:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw"
MOUNTS = {  # mount point /shared -> (mountinfo line, the scope an flock on it has, warned?)
    "nfs-local_lock=flock": ("98 22 0:51 / /shared rw,relatime shared:40 - nfs srv:/export rw,vers=3,nolock2,"
                             "local_lock=flock,addr=10.0.0.1", "node", True),
    "nfs-nolock": ("98 22 0:51 / /shared rw,relatime - nfs srv:/export rw,vers=3,nolock,local_lock=all", "node", True),
    "nfs4": ("98 22 0:51 / /shared rw,relatime - nfs4 srv:/export rw,vers=4.2,local_lock=none", "global", False),
    "lustre-localflock": ("98 22 0:51 / /shared rw,localflock - lustre 10.0.0.1@tcp:/fs rw,localflock", "node", True),
    "lustre-noflock": ("98 22 0:51 / /shared rw - lustre 10.0.0.1@tcp:/fs rw,lazystatfs", "node", True),
    "lustre-flock": ("98 22 0:51 / /shared rw - lustre 10.0.0.1@tcp:/fs rw,flock,lazystatfs", "global", False),
    "gpfs": ("98 22 0:51 / /shared rw - gpfs gpfs0 rw", "global", False),
    "fuse": ("98 22 0:51 / /shared rw - fuse.sshfs host:/x rw", "unknown", False),
    "xfs": ("98 22 0:51 / /shared rw - xfs /dev/sdb rw", "local", False),
}


@pytest.mark.parametrize("name", MOUNTS)
def test_lock_scope_from_the_mount_table(name):
    line, scope, warned = MOUNTS[name]
    found, warning = holder.lock_scope("/shared/runs/a", f"{ROOT}\n{line}\n")
    assert found == scope and bool(warning) == warned
    if warned:
        assert "/shared" in warning and "per node" in warning
    assert holder.lock_scope("/home/me/run", f"{ROOT}\n{line}\n") == ("local", None)  # the root mount holds it


def test_mount_points_with_spaces_and_the_longest_prefix():
    info = f"{ROOT}\n98 22 0:51 / /scratch\\040space rw - nfs s:/e rw,nolock\n99 98 0:52 / /scratch\\040space/x " \
           f"rw - xfs /dev/sdc rw\n"
    assert holder.lock_scope("/scratch space/run", info)[0] == "node"
    assert holder.lock_scope("/scratch space/x/run", info)[0] == "local"
    assert holder.lock_scope("/scratch spacey/run", info)[0] == "local"


def me(**over) -> dict:
    return {**holder.identity("ddppo train", 3600.0), **over}


def other_host(**over) -> dict:
    return me(host="gpu017", boot_id="another-boot", pid=4242, pid_start=17, **over)


@pytest.fixture
def squeue(monkeypatch):
    """slurm_job_gone answered by the test: {job id: True (gone) / False (runs) / None (unknown)}."""
    answers: dict = {}
    monkeypatch.setattr(holder, "slurm_job_gone", lambda job: answers.get(job))
    return answers


def test_stale_rules(squeue):
    now, mine = time.time(), me(slurm={"job_id": "9"})
    squeue.update({"555": True, "556": False})
    cases = {  # record -> stale?
        "this process (alive)": (me(), False),
        "a dead pid on this host": (me(pid=2**22 + 12345), True),
        "a live pid that started at another time": (me(pid_start=1), True),
        "this SLURM job's own earlier run": (other_host(slurm={"job_id": "9"}), True),
        "a job SLURM no longer runs": (other_host(slurm={"job_id": "555"}), True),
        "a job SLURM still runs": (other_host(slurm={"job_id": "556"}), False),
        "a job squeue cannot tell about": (other_host(slurm={"job_id": "557"}), False),
        "a heartbeat past the bound": (other_host(heartbeat=now - 3601), True),
        "a heartbeat within the bound": (other_host(heartbeat=now - 3000), False),
        "past the bound, within 3x the checkpoint interval": (other_host(heartbeat=now - 4000,
                                                                         heartbeat_interval_s=1500.0), False),
        "eval / sweep: no heartbeat promised": (other_host(heartbeat=now - 10**6, stale_after_s=None), False),
        "a live process on this host, even of this SLURM job": (me(slurm={"job_id": "9"}), False),
        "a record that does not read": ("not a record", True),
        "a record of this host without a pid": ({k: v for k, v in me().items() if k != "pid"}, True),
        "a record of this host with pid 0": (me(pid=0), True),
    }
    found = {name: holder.stale_reason(rec, mine) is not None for name, (rec, _) in cases.items()}
    assert found == {name: stale for name, (_, stale) in cases.items()}


@pytest.fixture
def per_node(monkeypatch):
    """Claims here judge as on a mount whose free flock proves nothing (tmp_path is a local disk)."""
    monkeypatch.setattr(claim_mod, "lock_scope", lambda directory: ("unknown", None))


def test_the_takeover_warning_and_refusal_name_the_holder(tmp_path, caplog, squeue, per_node):
    run = tmp_path / "run"
    run.mkdir()
    (run / ".holder.json").write_text(json.dumps(other_host(slurm={"job_id": "31", "array_job_id": "30",
                                                                   "array_task_id": "1"})))
    with pytest.raises(DirectoryBusy) as busy:
        claim_dir(run, "ddppo train", "choose another run.dir")
    message = str(busy.value)
    for part in ("pid 4242 on gpu017", "SLURM job 31, array 30_1", f"`ddppo rundir release {run}`", "another run.dir"):
        assert part in message, message
    squeue["31"] = True
    claim = claim_dir(run, "ddppo train", "choose another run.dir")
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "SLURM no longer runs its job 31" in warnings[0] and "gpu017" in warnings[0]
    assert json.loads((run / ".holder.json").read_text())["pid"] == os.getpid()
    claim.release()
    assert not (run / ".holder.json").exists() and (run / ".lock").exists()


def test_a_takeover_waits_for_another_edit_and_an_abandoned_edit_lock_is_cleared(tmp_path, monkeypatch):
    run = tmp_path / "run"
    run.mkdir()
    (run / ".holder.json").write_text(json.dumps(me(pid=2**22 + 12345)))
    (run / ".holder.json.edit").write_text("1\n")  # another process is changing the record
    monkeypatch.setattr(claim_mod, "EDIT_WAIT_S", 0.2)
    with pytest.raises(DirectoryBusy, match="another process is changing who holds it"):
        claim_dir(run, "ddppo train", "choose another run.dir")
    old = time.time() - claim_mod.EDIT_STALE_S - 1
    os.utime(run / ".holder.json.edit", (old, old))  # ... and died doing so
    claim_dir(run, "ddppo train", "choose another run.dir").release()
    assert sorted(p.name for p in run.iterdir()) == [".lock"]


def test_release_dir_frees_a_gone_holders_directory(tmp_path, per_node):
    run = tmp_path / "run"
    run.mkdir()
    assert "nothing to release" in release_dir(run)
    (run / ".holder.json").write_text(json.dumps(other_host()))
    assert "gpu017" in release_dir(run) and not (run / ".holder.json").exists()
    claim = claim_dir(run, "ddppo train", "choose another run.dir")
    with pytest.raises(DirectoryBusy, match="live process on this host"):
        release_dir(run)
    claim.release()


def test_a_record_of_this_host_without_a_live_pid_names_no_live_process(tmp_path, monkeypatch, per_node):
    """The one rule of the holder check, the edit lock and `release`: a record of this host names a live process
    only with a readable pid > 0 that is alive (before, edit locks and release read a missing pid as 0, which
    os.kill counts as alive: an edit lock that never cleared, a release refused for a process that never was)."""
    run = tmp_path / "run"
    run.mkdir()
    pidless = {k: v for k, v in me().items() if k != "pid"}
    (run / ".holder.json").write_text(json.dumps(pidless))
    assert "released" in release_dir(run) and not (run / ".holder.json").exists()
    (run / ".holder.json").write_text(json.dumps(me(pid=2**22 + 12345)))
    (run / ".holder.json.edit").write_text(json.dumps(pidless))  # an edit lock whose writer left no pid
    monkeypatch.setattr(claim_mod, "EDIT_WAIT_S", 0.2)
    claim_dir(run, "ddppo train", "choose another run.dir").release()  # cleared at once, not after EDIT_STALE_S
    assert sorted(p.name for p in run.iterdir()) == [".lock"]


def test_a_taken_over_claim_stops_at_its_heartbeat(tmp_path):
    claim = claim_dir(tmp_path / "run", "ddppo train", "choose another run.dir", stale_after_s=3600.0)
    claim.heartbeat()
    record = json.loads((tmp_path / "run" / ".holder.json").read_text())
    assert record["heartbeat_interval_s"] is not None and record["stale_after_s"] == 3600.0
    (tmp_path / "run" / ".holder.json").write_text(json.dumps(other_host()))
    with pytest.raises(DirectoryBusy, match="no longer this run's: it was taken over by `ddppo train` \\(pid 4242"):
        claim.heartbeat()
    claim.release()
    assert json.loads((tmp_path / "run" / ".holder.json").read_text())["host"] == "gpu017"  # not its to remove


def test_a_held_lock_is_never_claimed_beside(tmp_path, monkeypatch):
    """The lock's holder may not have written its record yet: no claim creates one beside a held lock (on a
    shared mount, a held lock is taken over only from a record that shows its holder gone)."""
    import fcntl

    run = tmp_path / "run"
    run.mkdir()
    fd = os.open(run / ".lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)  # another open file: conflicts with this process's own claim
    try:
        for scope in ("local", "node", "global", "unknown"):
            monkeypatch.setattr(claim_mod, "lock_scope", lambda directory, s=scope: (s, None))
            with pytest.raises(DirectoryBusy, match="in use by another ddppo process"):
                claim_dir(run, "ddppo train", "choose another run.dir")
            assert sorted(p.name for p in run.iterdir()) == [".lock"]
    finally:
        os.close(fd)


def test_an_edit_lock_of_a_dead_process_on_this_host_is_cleared_at_once(tmp_path, monkeypatch):
    """A writer killed during a heartbeat leaves .holder.json.edit: the restart need not wait EDIT_STALE_S."""
    run = tmp_path / "run"
    run.mkdir()
    (run / ".holder.json").write_text(json.dumps(me(pid=2**22 + 12345)))
    (run / ".holder.json.edit").write_text(json.dumps(me(pid=2**22 + 12345)))
    monkeypatch.setattr(claim_mod, "EDIT_WAIT_S", 0.2)
    claim_dir(run, "ddppo train", "choose another run.dir").release()
    assert sorted(p.name for p in run.iterdir()) == [".lock"]
