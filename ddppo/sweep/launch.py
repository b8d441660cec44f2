"""`ddppo sweep SPEC`: validate every run, decide what each needs, then launch locally or as a SLURM array.

Order (nothing is written or launched until every step before it passed):
  1. parse the spec, expand the runs, build and check every run's config (spec.expand)
  2. refuse when an existing run dir holds a different config than the spec now gives it
  3. plan: done -> skip, alive elsewhere (local process / queued array task) -> skip,
     has checkpoints -> resume, else new
  4. write the manifest and each run's config.yaml, then launch the runs to (re)start.
One sweep at a time per sweep dir (SWEEP_DIR/.lock, held while it runs; a second refuses at once); each run's
`ddppo train` claims its own run dir as well.

Every run trains with `ddppo train RUN_DIR/config.yaml run.dir=RUN_DIR`: the config that was validated is the
one that runs, however long an array task waits in the queue; the trainer resumes from the run dir's newest
checkpoint by itself.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import ddppo
from ddppo import signals
from ddppo.distributed.launch import without_launch_vars
from ddppo.distributed.visible import visible_gpus
from ddppo.rundir import RunDir, claim_dir
from ddppo.files import write_json
from ddppo.config import diff_keys, get_key
from ddppo.errors import ConfigError, SweepError
from ddppo.sweep import runs as disk
from ddppo.sweep.gpus import gpu_slots
from ddppo.sweep.spec import Run, SweepSpec, cli_overrides, expand, load_spec, override_list

log = logging.getLogger(__name__)

PACKAGE_ROOT = Path(ddppo.__file__).resolve().parents[1]
KILL_AFTER_S = 300.0  # after forwarding a stop signal, wait this long for checkpoints before SIGKILL


@dataclass(frozen=True)
class Planned:
    run: Run
    status: str  # runs.STATUSES
    action: str  # new | resume | skip


def check_unchanged(runs: Sequence[Run]) -> None:
    """Refuse (naming every run) when a run dir already holds a config that differs from the spec's."""
    problems = []
    for run in runs:
        try:
            stored = RunDir(run.run_dir).read_config()
        except ConfigError as err:
            problems.append(f"run {run.name!r}: its stored config cannot be read ({err})")
            continue
        if stored is None:
            continue
        changed = [k for k in diff_keys(stored, run.cfg) if k != "run.dir"]
        if changed:
            detail = ", ".join(f"{k}: {get_key(stored, k)!r} -> {get_key(run.cfg, k)!r}" for k in changed[:6])
            problems.append(f"run {run.name!r} already exists in {run.run_dir} with a different config ({detail})")
    if problems:
        raise SweepError("the sweep spec (or the command-line overrides, or the base config) changes the config of "
                         "existing runs; nothing was launched: " + "; ".join(problems) +
                         "; restore the previous values, or start a new sweep with --sweep-dir")


def plan(sweep_dir: Path, runs: Sequence[Run], queue: disk.SlurmQueue) -> list[Planned]:
    out = []
    for run in runs:
        records = disk.read_metrics(run.run_dir)
        status = disk.run_status(sweep_dir, run.name, run.run_dir, queue, records)
        if status in ("done", "unknown") or disk.is_active(disk.read_json(disk.state_path(sweep_dir, run.name)),
                                                           queue):
            action = "skip"  # unknown: launched where this machine cannot see (another host, no squeue)
        elif RunDir(run.run_dir).has_checkpoints():
            action = "resume"
        else:
            action = "new"
        out.append(Planned(run, status, action))
    return out


def describe(spec: SweepSpec, sweep_dir: Path, items: Sequence[str], planned: Sequence[Planned], launcher: str,
             parallel: int | None) -> str:
    """The plan, as shown before launching (and by --dry-run)."""
    variants = len(dict.fromkeys(p.run.variant for p in planned))
    seeds = f" x {len(spec.seeds)} seeds" if spec.seeds is not None else ""
    fixed = override_list({**spec.overrides, **cli_overrides(items)})
    lines = [f"sweep {spec.name}: {len(planned)} runs ({variants} variants{seeds}), {spec.ranks} rank(s) each, "
             f"launcher {launcher}, at most {parallel or 'all'} at a time",
             f"sweep dir: {sweep_dir}",
             f"base config: {spec.base or '(schema defaults)'}",
             f"fixed overrides: {' '.join(fixed) or '(none)'}",
             "each run: ddppo train SWEEP_DIR/runs/NAME/config.yaml run.dir=SWEEP_DIR/runs/NAME", ""]
    width = max(len(p.run.name) for p in planned)
    lines.append(f"{'#':>3}  {'run':<{width}}  {'action':<14}  overrides")
    for p in planned:
        action = f"skip ({p.status})" if p.action == "skip" else p.action
        own = override_list({k: v for k, v in p.run.overrides.items() if k in p.run.varied or k == "run.seed"
                             and p.run.seed is not None})
        lines.append(f"{p.run.index:>3}  {p.run.name:<{width}}  {action:<14}  {' '.join(own)}")
    return "\n".join(lines) + "\n"


def prepare(spec: SweepSpec, sweep_dir: Path, items: Sequence[str], planned: Sequence[Planned],
            launcher: str) -> None:
    """Write the manifest (runs of earlier specs that this one dropped are kept) and every new run's config."""
    old = disk.read_manifest(sweep_dir) or {}
    entries = [{"index": p.run.index, "name": p.run.name, "variant": p.run.variant, "seed": p.run.seed,
                "varied": p.run.varied, "overrides": p.run.overrides, "run_dir": f"runs/{p.run.name}"}
               for p in planned]
    names = {e["name"] for e in entries}
    entries += [dict(e, index=None) for e in old.get("runs", []) if e.get("name") not in names]
    write_json(sweep_dir / disk.MANIFEST, {
        "name": spec.name, "spec": str(spec.path), "spec_text": spec.path.read_text(),
        "command_line_overrides": list(items), "ranks": spec.ranks, "launcher": launcher,
        "updated": time.strftime("%Y-%m-%dT%H:%M:%S"), "runs": entries})
    (sweep_dir / "logs").mkdir(parents=True, exist_ok=True)
    for p in planned:
        run_dir = RunDir(p.run.run_dir)
        if not run_dir.config_path.exists():
            run_dir.write_config(p.run.cfg)


def child_env() -> dict[str, str]:
    env = without_launch_vars()  # each run is its own job (its own torchrun, or a single process)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(PACKAGE_ROOT), env.get("PYTHONPATH"))))
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def train_command(run: Run, ranks: int) -> list[str]:
    train = ["-m", "ddppo", "train", str(RunDir(run.run_dir).config_path), f"run.dir={run.run_dir}"]
    if ranks > 1:
        return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={ranks}", *train]
    return [sys.executable, *train]


class _Active:
    def __init__(self, run: Run, proc: subprocess.Popen, started: float) -> None:
        self.run, self.proc, self.started = run, proc, started
        self.slot = 0


def place_gpus(spec: SweepSpec, to_run: Sequence[Run], parallel: int, share: bool) -> list[list[str]]:
    """The GPUs of each parallel slot (sweep.gpus); nothing placed where every run is on dist.device=cpu."""
    if all(run.cfg.dist.device == "cpu" for run in to_run):
        return [[] for _ in range(parallel)]
    where = ("CUDA_VISIBLE_DEVICES=" + os.environ["CUDA_VISIBLE_DEVICES"] if "CUDA_VISIBLE_DEVICES" in os.environ
             else "nvidia-smi -L")
    return gpu_slots(visible_gpus(), parallel, spec.ranks, share, where)


def _start(sweep_dir: Path, run: Run, ranks: int, gpus: Sequence[str]) -> _Active:
    cmd = train_command(run, ranks)
    path = disk.log_path(sweep_dir, run.name)
    env = child_env()
    placed = ""
    if gpus:
        env["CUDA_VISIBLE_DEVICES"] = placed = ",".join(gpus)
        placed = f"CUDA_VISIBLE_DEVICES={placed} "
    with open(path, "ab") as logf:
        logf.write(f"[ddppo sweep {time.strftime('%Y-%m-%dT%H:%M:%S')}] {placed}{' '.join(cmd)}\n".encode())
        logf.flush()
        # own session: a Ctrl-C reaches the launcher only, which asks every run to checkpoint and stop
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
                                env=env, start_new_session=True)
    write_json(disk.state_path(sweep_dir, run.name), {**disk.local_state(proc.pid), "gpus": list(gpus)})
    return _Active(run, proc, time.monotonic())


def _finish(sweep_dir: Path, act: _Active, rc: int) -> None:
    path = disk.state_path(sweep_dir, act.run.name)
    state = disk.read_json(path) or disk.local_state(act.proc.pid)
    write_json(path, {**state, "rc": rc, "ended": time.time()})


def run_local(sweep_dir: Path, to_run: Sequence[Run], ranks: int, slots: Sequence[Sequence[str]]) -> int:
    """Run `to_run`, one per slot at a time (`slots`: each slot's GPUs, place_gpus). A stop signal (Ctrl-C, SIGTERM) is passed on to every running run
    (each checkpoints and exits; re-running the sweep resumes them); a second one kills them.
    Returns 0 when every run exited 0, 1 when one failed, 128+signal when stopped."""
    waiting, active, failed = list(to_run), [], []
    parallel = len(slots)
    stopping, stop_sig, kill_at = False, 0, 0.0
    total = len(waiting)
    while waiting or active:
        sig = signals.pending()
        if sig:
            signals.clear()
            if not stopping:
                stopping, stop_sig, kill_at = True, sig, time.monotonic() + KILL_AFTER_S
                log.warning("got %s: stopping %d running run(s) (each checkpoints first), not starting %d more; "
                            "a second signal kills them", signal.Signals(sig).name, len(active), len(waiting))
                waiting.clear()
                for act in active:
                    act.proc.send_signal(signal.SIGTERM)
            else:
                kill_at = 0.0
        if stopping and time.monotonic() >= kill_at:
            for act in active:
                with contextlib.suppress(OSError):
                    os.killpg(act.proc.pid, signal.SIGKILL)
        while waiting and len(active) < parallel:
            run = waiting.pop(0)
            slot = min(set(range(parallel)) - {a.slot for a in active})
            active.append(_start(sweep_dir, run, ranks, slots[slot]))
            active[-1].slot = slot
            log.info("[%d/%d] started %s%s (log: %s)", total - len(waiting), total, run.name,
                     f" on GPU(s) {','.join(slots[slot])}" if slots[slot] else "", disk.log_path(sweep_dir, run.name))
        for act in list(active):
            rc = act.proc.poll()
            if rc is None:
                continue
            active.remove(act)
            _finish(sweep_dir, act, rc)
            took = time.monotonic() - act.started
            if rc != 0:
                failed.append(act.run.name)
                log.error("run %s failed (exit %d after %.0f s); see %s", act.run.name, rc, took,
                          disk.log_path(sweep_dir, act.run.name))
            else:
                log.info("run %s exited 0 after %.0f s", act.run.name, took)
        time.sleep(0.2)
    if stopping:
        return 128 + stop_sig
    return 1 if failed else 0


def slurm_paths() -> tuple[Path, Path]:
    """(directory to submit from: the working directory, the shipped slurm/ scripts: `ddppo.slurm`)."""
    from ddppo import slurm

    if not ((slurm.HOME / "sweep_array.sbatch").is_file() and (slurm.HOME / "train.sbatch").is_file()):
        raise SweepError(f"slurm/sweep_array.sbatch and slurm/train.sbatch are missing from {slurm.HOME}; "
                         f"reinstall ddppo")
    return Path.cwd(), slurm.HOME


def sbatch_options(spec: SweepSpec, sweep_dir: Path, count: int, parallel: int | None,
                   extra: Sequence[str]) -> list[str]:
    user = [*spec.slurm, *extra]
    opts = [f"--array=0-{count - 1}" + (f"%{parallel}" if parallel else ""), f"--job-name={spec.name}",
            f"--output={sweep_dir}/logs/slurm-%A_%a.out", "--nodes=1", f"--ntasks-per-node={spec.ranks}"]
    if not any(o.startswith(("--gres", "--gpus", "-G")) for o in user):
        opts.append(f"--gres=gpu:{spec.ranks}")  # one rank per GPU, as slurm/train.sbatch; --gres=none on CPUs
    return opts + user  # the user's options come last and win


def submit_slurm(spec: SweepSpec, sweep_dir: Path, to_run: Sequence[Run], parallel: int | None,
                 extra: Sequence[str]) -> str:
    """One job array over `to_run` (task i = line i+1 of the list file); returns the array job id."""
    if not shutil.which("sbatch"):
        raise SweepError("--launcher slurm needs `sbatch` on PATH (run on a SLURM login node), or use "
                         "--launcher local")
    submit_dir, slurm_dir = slurm_paths()
    listfile = sweep_dir / "slurm" / f"array-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.tsv"
    listfile.parent.mkdir(parents=True, exist_ok=True)
    listfile.write_text("".join(f"{r.run_dir}\t{disk.log_path(sweep_dir, r.name)}\n" for r in to_run))
    env = child_env()
    env.setdefault("DDPPO_PYTHON", sys.executable)
    env["DDPPO_TRAIN_SBATCH"] = str(slurm_dir / "train.sbatch")
    cmd = ["sbatch", "--parsable", *sbatch_options(spec, sweep_dir, len(to_run), parallel, extra),
           str(slurm_dir / "sweep_array.sbatch"), str(listfile)]
    res = subprocess.run(cmd, cwd=submit_dir, env=env, capture_output=True, text=True, timeout=120)
    if res.returncode != 0:
        raise SweepError(f"sbatch failed (exit {res.returncode}): {res.stderr.strip()}\ncommand: {' '.join(cmd)}")
    job = res.stdout.strip().split(";")[0]
    for i, run in enumerate(to_run):
        write_json(disk.state_path(sweep_dir, run.name),
                        {"launcher": "slurm", "job": f"{job}_{i}", "array_job": job, "task": i,
                         "list": str(listfile), "submitted": time.time()})
    return job


def sweep(spec_path: str | Path, items: Sequence[str] = (), launcher: str = "local", dry_run: bool = False,
          max_parallel: int | None = None, sweep_dir: str | Path | None = None, sbatch_args: Sequence[str] = (),
          out: Callable[[str], None] = lambda text: None, share_gpus: bool = False) -> int:
    """The whole `ddppo sweep SPEC` command; `out` receives the text for the user (the CLI writes it to stdout)."""
    if launcher not in ("local", "slurm"):
        raise SweepError(f"--launcher {launcher!r} must be local or slurm")
    spec = load_spec(spec_path)
    sweep_dir = Path(sweep_dir or spec.sweep_dir or Path("runs") / "sweeps" / spec.name).resolve()
    runs = expand(spec, cli_overrides(items), sweep_dir)
    check_unchanged(runs)
    if dry_run:
        return _launch(spec, sweep_dir, runs, items, launcher, True, max_parallel, sbatch_args, out, share_gpus)
    # one live sweep per sweep dir: a second one would launch the same runs and overwrite their state files
    with claim_dir(sweep_dir, "ddppo sweep", "pass --sweep-dir DIR for another sweep", "wait for it to finish, "
                   "or stop it (its runs checkpoint first; running the sweep again resumes them)"):
        return _launch(spec, sweep_dir, runs, items, launcher, False, max_parallel, sbatch_args, out, share_gpus)


def _launch(spec: SweepSpec, sweep_dir: Path, runs: Sequence[Run], items: Sequence[str], launcher: str,
            dry_run: bool, max_parallel: int | None, sbatch_args: Sequence[str], out: Callable[[str], None],
            share_gpus: bool = False) -> int:
    """Plan, show, write and launch (the sweep dir claimed unless `dry_run`)."""
    planned = plan(sweep_dir, runs, disk.SlurmQueue())
    parallel = max_parallel or spec.max_parallel or (1 if launcher == "local" else None)
    to_run = [p.run for p in planned if p.action != "skip"]
    slots: list[list[str]] = []
    if launcher == "local" and to_run:  # refused before anything is written or started
        slots = place_gpus(spec, to_run, min(parallel or 1, len(to_run)), share_gpus or spec.share_gpus)
    out(describe(spec, sweep_dir, items, planned, launcher, parallel))
    if any(slots):
        out("GPUs per parallel run: " + "; ".join(f"{i}: {','.join(g)}" for i, g in enumerate(slots)) + "\n")
    if dry_run:
        out("dry run: nothing launched or written\n")
        return 0
    unknown = [p.run.name for p in planned if p.status == "unknown"]
    if unknown:
        out(f"skipped {len(unknown)} run(s) launched where this machine cannot tell whether they still run "
            f"(another host, or no squeue here): {', '.join(unknown)}; delete {sweep_dir}/state/NAME.json to "
            f"launch one anyway\n")
    prepare(spec, sweep_dir, items, planned, launcher)
    if not to_run:
        out(f"nothing to launch: every run is done or running. Summary: ddppo sweep summary {sweep_dir}\n")
        return 0
    if launcher == "slurm":
        job = submit_slurm(spec, sweep_dir, to_run, parallel, sbatch_args)
        out(f"submitted job array {job} with {len(to_run)} task(s) (squeue -r -j {job}); logs in "
            f"{sweep_dir / 'logs'}\nsummary: ddppo sweep summary {sweep_dir}\n")
        return 0
    rc = run_local(sweep_dir, to_run, spec.ranks, slots)
    queue = disk.SlurmQueue()
    counts: dict[str, int] = {}
    for run in runs:
        status = disk.run_status(sweep_dir, run.name, run.run_dir, queue)
        counts[status] = counts.get(status, 0) + 1
    out(f"runs: {', '.join(f'{n} {s}' for s, n in counts.items())}. "
        f"Summary: ddppo sweep summary {sweep_dir}\n")
    return rc

