"""The run directory's lifecycle with real processes (the real CLI, tiny gridnav runs), table-driven.

Surfaces, and what each case must show (every process is a real `python -m ddppo`; a refusal is exit 2 with one
`ddppo:` line naming the culprit and the fix, at once; nothing another process wrote is lost or overwritten):

TWO PROCESSES AT ONCE (PAIRS): with a `ddppo train` running in RUN,
  train + train      a second train on RUN (through a symlink to it, with another ppo.lr) refuses, naming the
                     first (its pid) and the fix; RUN's config and metrics stay the first one's
  train + eval       `eval --watch` evaluates checkpoints while training writes and prunes them (a reader)
  eval + eval        a second eval into the same folder refuses (--out names the fix)
  with a `ddppo sweep` running in SWEEP,
  sweep + sweep      a second sweep on SWEEP refuses; the run's state file stays the first sweep's
  sweep + summary    two `sweep summary` at once, while the sweep runs: both whole (atomic files)
  sweep + train      a `ddppo train` of the sweep's running run refuses (the run's own claim)
  export + export    four processes creating one new -o at once (export's exclusive atomic write): one
                     writes it whole, the others refuse (never a replace)
CRASHES (CRASH_CHAINS): SIGKILL at each point of tests/reliability/crash_at.py (checkpoint half written, before
  its rename, after it; a torn metrics row; config.yaml before its first rename; a changed config between keeping
  the old one and writing the new), each followed by a restart that resumes: config.yaml always there and
  readable, every metrics row whole and each update once, every checkpoint loadable, no temp file left.
A FINISHED RUN: `ddppo train` (and the same under torchrun) of a run that reached its budget says so and how to
  train more, exit 0, and writes nothing (no config.<time>.yaml per no-op); a raised budget trains on.
ODD PATHS (ODD_PATHS, and the chains' run dirs): spaces and non-ASCII in run.dir, a symlinked run.dir, a
  read-only run dir (eval without --out refuses, with --out works), a file where a directory belongs (run.dir,
  RUN/checkpoints, RUN/eval) and a directory where a file belongs (RUN/metrics.jsonl).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

from rel_util import REPO, snapshot, tmpfs
from testutil import TINY, as_overrides, cli_env

HERE = Path(__file__).resolve().parent
GRIDNAV = str(REPO / "configs" / "gridnav.yaml")
STEPS = TINY["env.num_envs"] * TINY["rollout.num_steps"]  # env steps per update
WAIT_S = 120  # bound of every wait for another process (a loaded machine starts torch slowly)


# ------------------------------------------------------------------------------ processes
def run_dir_args(run_dir: Path, updates: int, **extra) -> list[str]:
    values = {**TINY, "run.dir": run_dir, "run.total_env_steps": updates * STEPS, "checkpoint.interval_updates": 1,
              "log.tensorboard": "false", **extra}
    return ["train", GRIDNAV, *as_overrides(values)]


# the long-lived trainers of the two-process cases: mostly asleep (a synthetic env that sleeps each step), so the
# processes racing them get the CPU; 4 envs x 8 steps per update, episodes of 8 steps
SLOW = {**TINY, "env.name": "synthetic", "rollout.num_steps": 8, "env.synthetic.step_sleep_s": 0.05,
        "env.synthetic.episode_length": 8, "run.total_env_steps": 10**6, "checkpoint.interval_updates": 1,
        "log.tensorboard": "false"}
SLOW = {k: v for k, v in SLOW.items() if not k.startswith("env.gridnav.")}


def slow_train_args(run_dir: Path, **extra) -> list[str]:
    return ["train", str(REPO / "tests" / "distributed" / "empty.yaml"), *as_overrides({**SLOW, "run.dir": run_dir,
                                                                                      **extra})]


def start(*args: str, crash_at: str = "") -> subprocess.Popen:
    """`python -m ddppo ARGS` (with `crash_at`: through crash_at.py), started in its own session."""
    cmd = [sys.executable, str(HERE / "crash_at.py"), crash_at] if crash_at else [sys.executable, "-m", "ddppo"]
    return subprocess.Popen([*cmd, *map(str, args)], cwd=REPO, env=cli_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def finish(proc: subprocess.Popen, timeout: float = 240) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise AssertionError(f"{proc.args} still ran after {timeout} s\n{err[-3000:]}")
    return proc.returncode, out, err


def cli(*args: str, crash_at: str = "") -> tuple[int, str, str]:
    return finish(start(*args, crash_at=crash_at))


@contextlib.contextmanager
def running(*args: str):
    """A long-lived CLI process, stopped (SIGTERM, then SIGKILL) and reaped on the way out."""
    proc = start(*args)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()


def wait_until(what: str, check, proc: subprocess.Popen | None = None) -> None:
    """Poll `check()` until true; fails naming `what` (with `proc`'s output if it ended first)."""
    deadline = time.monotonic() + WAIT_S
    while not check():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"{what}: the process ended first (rc {proc.returncode})\n{proc.stderr.read()[-3000:]}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {WAIT_S} s")
        time.sleep(0.1)


def holds(directory: Path, proc: subprocess.Popen) -> bool:
    """`proc` holds its claim on `directory` (its holder record names it)."""
    with contextlib.suppress(OSError, ValueError):
        return json.loads((directory / ".holder.json").read_text())["pid"] == proc.pid
    return False


def refused(res: tuple[int, str, str], *names: str) -> None:
    """Exit 2 with one `ddppo:` line naming every one of `names`, no traceback."""
    rc, out, err = res
    lines = [line for line in err.splitlines() if line.startswith("ddppo:")]
    assert rc == 2 and len(lines) == 1 and "Traceback" not in err, f"rc={rc}\n{err[-3000:]}"
    assert all(n in lines[0] for n in names), f"{names} not all in: {lines[0]}"


# ------------------------------------------------------------------------------ what a run dir must hold
def metrics_rows(run_dir: Path) -> list[dict]:
    """Every line of metrics.jsonl (each must be a whole JSON object)."""
    text = (run_dir / "metrics.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines()]


def check_intact(run_dir: Path, finished_updates: int | None = None) -> None:
    """config.yaml readable, every metrics row whole and each update once and in order, every checkpoint loads,
    no temp file of a killed writer left in checkpoints/."""
    from ddppo.rundir import RunDir

    assert RunDir(run_dir).read_config() is not None, "config.yaml missing"
    updates = [r["update"] for r in metrics_rows(run_dir)] if (run_dir / "metrics.jsonl").exists() else []
    assert updates == list(range(1, len(updates) + 1)), updates
    if finished_updates is not None:
        assert updates[-1] == finished_updates
    for path in RunDir(run_dir).checkpoints():
        torch.load(path, map_location="cpu", weights_only=True)
    leftovers = [p.name for p in (run_dir / "checkpoints").glob(".*.tmp")]
    assert not leftovers, leftovers


# ------------------------------------------------------------------------------ crashes
# run dir name -> [(kill point, overrides of that run)]; each chain resumes after every kill, then finishes
CRASH_CHAINS = {
    "spaces and ünïcode ✓/run dir": [("config-first-write", {}), ("metrics-torn-line", {}),
                                       ("checkpoint-half-written", {})],
    "symlinked": [("checkpoint-before-rename", {}), ("checkpoint-after-rename", {}),
                  ("config-kept-before-new", {"ppo.lr": 1e-3})],
}
FINAL_UPDATES = 4


def _crash_chain(tmp_path: Path, name: str) -> Path:
    real = tmp_path / name
    run_dir = real
    if name == "symlinked":
        (tmp_path / "target").mkdir()
        run_dir = tmp_path / "symlinked"
        run_dir.symlink_to(tmp_path / "target")
    extra: dict = {}
    for point, overrides in CRASH_CHAINS[name]:
        extra.update(overrides)
        rc, _, err = cli(*run_dir_args(run_dir, FINAL_UPDATES, **extra), crash_at=point)
        assert rc == -signal.SIGKILL, f"{name}: never reached {point} (rc {rc})\n{err[-3000:]}"
        if point != "config-first-write":  # killed before anything was trained: there is no run yet
            assert (run_dir / "config.yaml").is_file(), f"{name}: config.yaml gone after a kill at {point}"
    rc, _, err = cli(*run_dir_args(run_dir, FINAL_UPDATES, **extra))
    assert rc == 0, f"{name}: the restart after the kills failed\n{err[-3000:]}"
    return run_dir


def test_sigkill_at_every_point_of_a_write_then_resume(tmp_path):
    with ThreadPoolExecutor(len(CRASH_CHAINS)) as pool:
        dirs = list(pool.map(lambda n: _crash_chain(tmp_path, n), CRASH_CHAINS))
    for run_dir in dirs:
        check_intact(run_dir, FINAL_UPDATES)
    unicode_dir, symlinked = dirs
    from ddppo.rundir import RunDir

    assert RunDir(symlinked).read_config().ppo.lr == 1e-3  # the changed config is the one in force
    assert list(symlinked.glob("config.2*.yaml"))  # and the previous one is kept
    rc, out, err = cli("eval", unicode_dir, "eval.num_episodes=2")  # an odd path all the way through eval
    assert rc == 0 and "ckpt-4" in out, err[-3000:]


# ------------------------------------------------------------------------------ two processes at once
def test_train_with_a_second_train_and_evals(tmp_path):
    """PAIRS train + train, train + eval, eval + eval."""
    run_dir, link = tmp_path / "run", tmp_path / "link"
    link.symlink_to(run_dir, target_is_directory=True)
    first = slow_train_args(run_dir, **{"checkpoint.keep_last": 2})
    with running(*first) as trainer:
        wait_until("the first train checkpoints", lambda: holds(run_dir, trainer) and
                   len(list((run_dir / "checkpoints").glob("ckpt-*.pt"))) >= 1, trainer)
        config = (run_dir / "config.yaml").read_text()
        with running("eval", run_dir, "--watch", "--poll", "1", "eval.num_episodes=2") as watcher:
            wait_until("eval --watch claims RUN/eval", lambda: holds(run_dir / "eval", watcher), watcher)
            with ThreadPoolExecutor(2) as pool:
                second = pool.submit(cli, *slow_train_args(link, **{"ppo.lr": 1e-3}))
                other_eval = pool.submit(cli, "eval", run_dir, "eval.num_episodes=2")
                refused(second.result(), str(run_dir), f"pid {trainer.pid}", "ddppo train", "another run.dir")
                refused(other_eval.result(), str(run_dir / "eval"), f"pid {watcher.pid}", "--out")
            wait_until("eval --watch writes a result", lambda: any((run_dir / "eval").glob("ckpt-*.json")), watcher)
        assert (run_dir / "config.yaml").read_text() == config  # the refused train wrote nothing
        assert not list(run_dir.glob("config.2*.yaml"))
    check_intact(run_dir)
    from ddppo.rundir import RunDir

    RunDir(run_dir).claim_writer().release()  # the claim went with the process (after a SIGKILL too: the chains)


SWEEP_SPEC = """\
base: {base}
name: lifecycle
overrides:
{overrides}
grid:
  ppo.lr: [0.0005]
"""


def test_sweep_with_a_second_sweep_summaries_and_a_train_of_its_run(tmp_path):
    """PAIRS sweep + sweep, sweep + summary (two at once), sweep + train."""
    spec = tmp_path / "spec.yaml"
    spec.write_text(SWEEP_SPEC.format(base=REPO / "tests" / "distributed" / "empty.yaml",
                                      overrides="".join(f"  {k}: {v}\n" for k, v in SLOW.items())))
    sweep_dir = tmp_path / "sweep"
    with running("sweep", spec, "--sweep-dir", sweep_dir) as sweep:
        run_dirs = lambda: list((sweep_dir / "runs").glob("*"))  # noqa: E731
        wait_until("the sweep's run trains", lambda: holds(sweep_dir, sweep) and run_dirs() and
                   (run_dirs()[0] / "metrics.jsonl").is_file() and metrics_rows(run_dirs()[0]), sweep)
        (run_dir,) = run_dirs()
        state = sweep_dir / "state" / f"{run_dir.name}.json"
        before = state.read_text()
        with ThreadPoolExecutor(4) as pool:
            again = pool.submit(cli, "sweep", spec, "--sweep-dir", sweep_dir)
            summaries = [pool.submit(cli, "sweep", "summary", sweep_dir, "--no-plots") for _ in range(2)]
            train = pool.submit(cli, "train", run_dir / "config.yaml", f"run.dir={run_dir}")
            refused(again.result(), str(sweep_dir), f"pid {sweep.pid}", "ddppo sweep", "--sweep-dir")
            refused(train.result(), str(run_dir), "ddppo train", "another run.dir")
            for s in summaries:
                rc, out, err = s.result()
                assert rc == 0 and "lifecycle" in out, err[-3000:]
        assert state.read_text() == before  # the refused sweep did not overwrite the run's state
        rows = (sweep_dir / "summary" / "runs.csv").read_text().splitlines()
        assert len(rows) == 2 and rows[1].startswith(run_dir.name), rows
        os.killpg(sweep.pid, signal.SIGTERM)  # the sweep passes it on: its run checkpoints and stops
        rc, _, err = finish(sweep)
    assert rc == 128 + signal.SIGTERM, err[-3000:]
    check_intact(run_dir)


RACER = """
import sys, time
from ddppo.files import atomic_write
while time.time() < float(sys.argv[2]):  # start together
    pass
try:
    atomic_write(sys.argv[1], sys.argv[3] * 200000, exclusive=True)
except FileExistsError:
    sys.exit(2)
"""


def test_export_and_export_to_one_new_file_one_writes_the_other_refuses(tmp_path):
    """PAIRS export + export: `ddppo export -o FILE` without --force writes through atomic_write(exclusive=True);
    four real processes racing to create one file: exactly one writes it, whole; the others are refused (they
    used to rename over each other: the last one replaced what the first had written)."""
    out, go = tmp_path / "ckpt.0.pth", time.time() + 3.0
    procs = [subprocess.Popen([sys.executable, "-c", RACER, str(out), str(go), tag], cwd=REPO, env=cli_env())
             for tag in "abcd"]
    codes = [p.wait(timeout=WAIT_S) for p in procs]
    assert sorted(codes) == [0, 2, 2, 2], codes
    winner = "abcd"[codes.index(0)]
    assert out.read_text() == winner * 200000 and sorted(p.name for p in tmp_path.iterdir()) == [out.name]


# ------------------------------------------------------------------------------ odd paths
def _file(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("in the way\n")


def _copy_with_eval_file(trained: Path, ws: Path) -> None:
    shutil.copytree(trained, ws / "run")
    _file(ws / "run" / "eval")


# (id, what is put in the way in the case's workspace {ws} (a copy of a trained run: `trained`), argv, names);
# {ro} is a copy of a trained run on a read-only file system
ODD_PATHS = [
    ("run-dir-is-a-file", lambda trained, ws: _file(ws / "run"), run_dir_args(Path("{ws}/run"), 1),
     ["run.dir={ws}/run", "is a file"]),
    ("checkpoints-is-a-file", lambda trained, ws: _file(ws / "run" / "checkpoints"), run_dir_args(Path("{ws}/run"), 1),
     ["{ws}/run/checkpoints", "not a directory"]),
    ("metrics-is-a-directory", lambda trained, ws: (ws / "run" / "metrics.jsonl").mkdir(parents=True),
     run_dir_args(Path("{ws}/run"), 1), ["{ws}/run/metrics.jsonl", "not a file"]),
    ("eval-dir-is-a-file", _copy_with_eval_file, ["eval", "{ws}/run"], ["{ws}/run/eval", "--out"]),
    ("eval-into-a-read-only-run", None, ["eval", "{ro}"], ["{ro}/eval", "writable", "--out"]),
    ("train-in-a-read-only-run", None, run_dir_args(Path("{ro}"), 2), ["run.dir={ro}", "not writable"]),
]


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("trained") / "run"
    rc, _, err = cli(*run_dir_args(run_dir, 1))
    assert rc == 0, err[-3000:]
    return run_dir


def _odd_case(case, trained: Path, root: Path, mount: Path | None):
    """Run one case; (name, result, the workspace's files before and after, the names with paths filled in)."""
    name, setup, argv, names = case
    ws = root / name
    ws.mkdir()
    if setup is not None:
        setup(trained, ws)
    fill = lambda a: str(a).replace("{ws}", str(ws)).replace("{ro}", str(mount / name if mount else ""))  # noqa: E731
    files = lambda: sorted(str(p.relative_to(ws)) for p in ws.rglob("*"))  # noqa: E731
    before = files()
    res = cli(*[fill(a) for a in argv])
    return name, res, before, files(), [fill(n) for n in names]


def test_odd_paths(trained, tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    with contextlib.ExitStack() as stack:
        try:
            mount = stack.enter_context(tmpfs("64m", tmp_path))
        except pytest.skip.Exception:
            mount = None
        cases = [c for c in ODD_PATHS if mount is not None or "{ro}" not in " ".join(map(str, c[2]))]
        if mount is not None:
            for case in cases:
                if "{ro}" in " ".join(map(str, case[2])):
                    shutil.copytree(trained, mount / case[0])
            subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True, capture_output=True)
        with ThreadPoolExecutor(3) as pool:
            results = list(pool.map(lambda c: _odd_case(c, trained, root, mount), cases))
        for name, res, before, after, names in results:
            refused(res, *names)
            assert before == after, f"{name}: the refusal wrote {set(after) - set(before)}"
        if mount is not None:  # read-only: a reader still works, writing elsewhere
            rc, out, err = cli("eval", mount / "eval-into-a-read-only-run", "--out", tmp_path / "out",
                               "eval.num_episodes=2")
            assert rc == 0 and "ckpt-1" in out, err[-3000:]
    if len(cases) < len(ODD_PATHS):
        pytest.skip("no tmpfs could be mounted: the read-only cases did not run")


# ------------------------------------------------------------------------------ a finished run
def test_a_finished_run_says_so_and_writes_nothing(trained, tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(trained, run_dir)
    before = snapshot(run_dir)
    torchrun = [str(Path(sys.executable).parent / "torchrun"), "--standalone", "--nproc_per_node=2", "-m", "ddppo"]
    again = [[sys.executable, "-m", "ddppo", *map(str, run_dir_args(run_dir, 1))],  # the same command
             [sys.executable, "-m", "ddppo", *map(str, run_dir_args(run_dir, 1, **{"ppo.lr": 1e-3}))],  # a changed key
             [*torchrun, *map(str, run_dir_args(run_dir, 1))]]  # the README's torchrun line on a one-rank run
    for argv in again:
        res = subprocess.run(argv, cwd=REPO, env=cli_env(), capture_output=True, text=True, timeout=240)
        lines = [line for line in res.stderr.splitlines() if "is already finished" in line]
        assert res.returncode == 0 and len(lines) == 1, f"{argv}: rc={res.returncode}\n{res.stderr[-3000:]}"
        for part in (f"run.dir={run_dir}", "nothing to train", f"run.total_env_steps={2 * STEPS}", "another run.dir"):
            assert part in lines[0], lines[0]
    assert snapshot(run_dir) == before  # no config.<time>.yaml, nothing touched
    rc, _, err = cli(*run_dir_args(run_dir, 2))  # the fix it names: a raised budget trains on
    assert rc == 0 and [r["update"] for r in metrics_rows(run_dir)] == [1, 2], err[-3000:]
