"""The GPU check: every CUDA path of the trainer, on one machine with a GPU (1 GPU and 16 cores: < 10 min).

    python benchmarks/gpu_check.py [--dry-run] [--only NAME,...] [--work DIR]   (bash benchmarks/gpu_check.sh)

Each check runs the real CLI (torchrun, or plain processes with torchrun's variables where it needs every
rank's exit code), reads what the run wrote (logs, metrics.jsonl, checkpoints, per-rank digests) and prints a
row: the check, the defect of issue 24 it covers (d1 NCCL failures, d2 deterministic mode, d3 ranks vs GPUs,
d4 NCCL's interface, d5 phase timing, or a CUDA path), PASS/FAIL/SKIP and its figures. The first failure
prints the table so far and exits 1.

--dry-run (CI, on CPU): the same checks, commands and parsing on CPU + gloo with tiny budgets. Checks whose
subject only a GPU has run their CPU counterpart, named in the row (an explicit CUDA request without CUDA
for the refused shared GPU; gloo ranks for the lost peers), or skip saying why (habitat-sim rendering where
it does not import). Uses this Python (PYTHON=... for the .sh); installs nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run as a script from a checkout

from ddppo.benchmarks import phase_check  # noqa: E402

PY = sys.executable
BAD_EXIT = re.compile(r"core dumped|Aborted|terminate called|Fatal Python error|Watchdog caught|SIGABRT")
LOST = re.compile(r"peer rank\(s\) \[1\] lost")
SMALL_HB = ["policy.architecture=habitat_baselines", "policy.hidden_size=64", "policy.rnn_type=lstm",
            "policy.rnn_layers=1", "policy.resnet_base_width=8", "policy.resnet_layers=[2,2,2,2]",
            "policy.resnet_bottleneck=false"]


class CheckFailed(RuntimeError):
    """A check's one-line reason."""


@dataclasses.dataclass
class Env:
    dry: bool
    work: Path
    gpus: int

    def dev(self, backend: str = "nccl", device: str = "cuda") -> list[str]:
        return ["dist.device=cpu", "dist.backend=gloo"] if self.dry else [f"dist.device={device}",
                                                                           f"dist.backend={backend}"]

    def steps(self, real: int, dry: int) -> str:
        return f"run.total_env_steps={dry if self.dry else real}"


# ------------------------------------------------------------------------------------------ running things
def _env(**extra: str) -> dict[str, str]:
    from ddppo.distributed.launch import without_launch_vars

    env = without_launch_vars()
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("OMP_NUM_THREADS", "2")
    env.update(extra)
    return env


def run(cmd: list[str], log: Path, timeout_s: float = 300, **env: str) -> tuple[int, str]:
    with open(log, "w") as f:
        try:
            rc = subprocess.run(cmd, cwd=REPO, env=_env(**env), stdout=f, stderr=subprocess.STDOUT,
                                timeout=timeout_s).returncode
        except subprocess.TimeoutExpired:
            rc = 124
    return rc, log.read_text(errors="replace")


def train_cmd(nproc: int, config: str, run_dir: Path, *overrides: str, module: list[str] | None = None) -> list[str]:
    base = [f"run.dir={run_dir}", "log.tensorboard=false", "log.interval_s=5", "log.bottleneck_interval_s=1",
            "run.torch_threads=2"]
    body = module or ["-m", "ddppo", "train", config]
    return [PY, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}", *body, *base,
            *overrides]


def trained(e: Env, name: str, nproc: int, config: str, *overrides: str, **env: str) -> tuple[Path, str]:
    """Train; the run directory and the log, or CheckFailed with the log's tail."""
    run_dir = e.work / name
    rc, text = run(train_cmd(nproc, config, run_dir, *overrides), e.work / f"{name}.log", **env)
    if rc != 0:
        raise CheckFailed(f"exit {rc}: {tail(text)}")
    return run_dir, text


def tail(text: str, n: int = 3) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return " | ".join(lines[-n:])[-600:]


def metrics(run_dir: Path) -> list[dict]:
    path = run_dir / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def phases(e: Env, run_dir: Path, world: int = 1) -> str:
    """fps and the three largest phase shares; CheckFailed when phase_check finds the timings implausible (on
    a GPU: its thresholds are a GPU's; a dry run on CPU, where the learner dwarfs the copies, only reports)."""
    rows = metrics(run_dir)
    found = phase_check.problems(rows, world)
    if found and (not e.dry or len(rows) < 2):
        raise CheckFailed("; ".join(found))
    share, covered = phase_check.shares(rows[1:])
    top = ", ".join(f"{p} {100 * v:.0f}%" for p, v in sorted(share.items(), key=lambda kv: -kv[1])[:3])
    note = f" (CPU, not enforced: {'; '.join(found)})" if found else ""
    return f"fps {rows[-1].get('perf/fps', 0):.0f}; phases cover {100 * covered:.0f}%: {top}{note}"


def expect(text: str, pattern: str, what: str) -> re.Match:
    found = re.search(pattern, text)
    if not found:
        raise CheckFailed(f"{what}: no line matching {pattern!r}: {tail(text)}")
    return found


def model_digest(run_dir: Path) -> str:
    from ddppo.benchmarks.gpu_ranks import digest
    from ddppo import checkpoint

    newest = max((run_dir / "checkpoints").glob("ckpt-*.pt"), key=lambda p: int(p.stem.split("-")[1]))
    return digest(checkpoint.load(newest)["model"])


GRID = ["env.num_envs=16", "rollout.num_steps=32", "checkpoint.interval_updates=100000"]
GRIDNAV = "configs/gridnav.yaml"


# ---------------------------------------------------------------------------------------------- the checks
def nccl_1rank(e: Env) -> str:
    run_dir, text = trained(e, "nccl_1rank", 1, GRIDNAV, e.steps(40960, 4096), "checkpoint.interval_updates=1000",
                            *e.dev())
    expect(text, r"backend=gloo device=cpu" if e.dry else r"backend=nccl device=cuda:0", "start-up")
    return phases(e, run_dir)


def two_ranks_one_gpu(e: Env) -> str:
    """dist.device=auto on one visible GPU: both ranks fall back to gloo on cuda:0 and stay identical."""
    out = e.work / "digests"
    out.mkdir(exist_ok=True)
    cmd = train_cmd(2, GRIDNAV, e.work / "two_ranks", *GRID, e.steps(16384, 2048), "dist.bucket_mb=0.01",
                    "checkpoint.interval_updates=4", *(e.dev() if e.dry else ["dist.device=auto",
                                                                             "dist.backend=auto"]),
                    module=["benchmarks/gpu_ranks.py", "digest", GRIDNAV, str(out)])
    rc, text = run(cmd, e.work / "two_ranks.log", **({} if e.dry else {"CUDA_VISIBLE_DEVICES": "0"}))
    if rc != 0:
        raise CheckFailed(f"exit {rc}: {tail(text)}")
    rows = [json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)]
    device = "cpu" if e.dry else "cuda:0"
    for r in rows:
        if (r["backend"], r["device"], r["grad_devices"]) != ("gloo", device, [device]):
            raise CheckFailed(f"rank {r['rank']} ran {r['backend']} on {r['device']}, gradients on "
                              f"{r['grad_devices']} (expected gloo on {device})")
    if rows[0]["model"] != rows[1]["model"] or rows[0]["optimizer"] != rows[1]["optimizer"]:
        raise CheckFailed(f"parameters or Adam state differ across ranks after {rows[0]['update']} updates")
    return f"gloo on {device} x2, {rows[0]['update']} updates, digests equal ({rows[0]['model'][:12]})"


def shared_gpu_refused(e: Env) -> str:
    """An explicit NCCL request with two ranks on one GPU: every rank exits 2 with one line."""
    overrides = ["dist.device=cuda"] if e.dry else ["dist.backend=nccl", "dist.device=cuda"]
    want = r"torch sees no CUDA device" if e.dry else r"needs one GPU per rank, but ranks \[0, 1\] on one GPU"
    procs = start_ranks(e, "refused", ["env.name=synthetic", "env.num_envs=4", *overrides],
                        CUDA_VISIBLE_DEVICES="0")
    for rank, (proc, log) in enumerate(procs):
        rc = wait(proc, 120)
        text = log.read_text(errors="replace")
        errors = [line for line in text.splitlines() if "Traceback" in line or line.startswith("ddppo:")]
        if rc != 2 or len(errors) != 1 or not re.search(want, errors[0]):
            raise CheckFailed(f"rank {rank}: exit {rc}, expected 2 and one line matching {want!r}: {tail(text)}")
    return ("CPU counterpart: dist.device=cuda without CUDA, exit 2 on both ranks" if e.dry
            else "exit 2 on both ranks, one line naming ranks [0, 1]")


def deterministic_lstm(e: Env) -> str:
    """run.deterministic=true with an LSTM on the GPU: runs, and two runs end bit-identical."""
    args = [*GRID, e.steps(8192, 1024), "policy.rnn_type=lstm", "run.deterministic=true",
            "checkpoint.interval_updates=1000", *e.dev()]
    first, _ = trained(e, "deterministic_a", 1, GRIDNAV, *args)
    second, _ = trained(e, "deterministic_b", 1, GRIDNAV, *args)
    a, b = model_digest(first), model_digest(second)
    if a != b:
        raise CheckFailed(f"two deterministic runs differ: {a[:12]} vs {b[:12]}")
    return f"2 runs bit-identical ({a[:12]}); fps {metrics(first)[-1].get('perf/fps', 0):.0f}"


def overlap_learning(e: Env) -> str:
    """rollout.overlap_learning on CUDA: the learner thread's stream hand-overs (ddppo/train/overlap.py). Two
    deterministic runs must end bit-identical: a missing wait between the streams shows as a difference (or NaN)."""
    args = [*GRID, e.steps(8192, 1024), "policy.rnn_type=lstm", "run.deterministic=true", "env.num_workers=2",
            "rollout.overlap_learning=true", "checkpoint.interval_updates=1000", *e.dev()]
    first, _ = trained(e, "overlap_learning_a", 1, GRIDNAV, *args)
    second, _ = trained(e, "overlap_learning_b", 1, GRIDNAV, *args)
    a, b = model_digest(first), model_digest(second)
    if a != b:
        raise CheckFailed(f"two deterministic overlap_learning runs differ: {a[:12]} vs {b[:12]}")
    last = metrics(first)[-1]
    return (f"2 runs bit-identical ({a[:12]}); fps {last.get('perf/fps', 0):.0f}, "
            f"learner wait {last.get('perf/learner_wait_s', 0):.3f} s per update")


def overlap_workers(e: Env) -> str:
    run_dir, _ = trained(e, "overlap", 1, GRIDNAV, *GRID, e.steps(20480, 1024), "rollout.overlap=true",
                         "env.num_workers=4", *e.dev())
    return f"fps {metrics(run_dir)[-1].get('perf/fps', 0):.0f} (4 workers, double-buffered)"


def variable_workers(e: Env) -> str:
    run_dir, _ = trained(e, "variable", 1, GRIDNAV, *GRID, e.steps(20480, 1024), "rollout.mode=variable",
                         "env.num_workers=8", *e.dev())
    return f"fps {metrics(run_dir)[-1].get('perf/fps', 0):.0f} (8 workers, variable experience)"


def habitat_data(e: Env) -> list[str]:
    """Two generated scenes, a train split (50 episodes per scene) and a val split (2 per scene, for eval)."""
    scenes, episodes, val = e.work / "scenes", e.work / "episodes" / "train", e.work / "episodes" / "val"
    if not (episodes.exists() and val.exists()):
        gen = [PY, "-m", "ddppo.envs.scenes.episode_gen", "--scenes-dir", str(scenes), "--backend", "grid", "--seed", "0"]
        for cmd in ([PY, "-m", "ddppo.envs.scenes.scene_gen", "generate", "--out", str(scenes / "gen"), "--num-scenes",
                     "2", "--seed", "0"],
                    [*gen, "--out", str(val), "--episodes-per-scene", "2"],
                    [*gen, "--out", str(episodes), "--episodes-per-scene", "50"]):
            rc, text = run(cmd, e.work / "habitat_data.log")
            if rc != 0:
                raise CheckFailed(f"habitat data: exit {rc}: {tail(text)}")
    return ["env.habitat.backend=grid", f"env.habitat.dataset={episodes}", f"env.habitat.scenes_dir={scenes}"]


def hab_small(e: Env) -> list[str]:
    return [*habitat_data(e), "env.num_envs=4", "env.num_workers=0", "rollout.num_steps=16",
            "env.habitat.depth_width=64", "env.habitat.depth_height=64", "env.habitat.max_episode_steps=32",
            "ppo.num_mini_batch=2", "ppo.epochs=1",
            "checkpoint.interval_updates=1", *SMALL_HB]


def resume_gpu(e: Env) -> str:
    """Train, then resume onto the GPU: optimizer state and every RNG restored (no 'not restored')."""
    config = "configs/pointnav_habitat_cpu.yaml"
    run_dir, _ = trained(e, "resume", 1, config, *hab_small(e), "run.total_env_steps=128", *e.dev())
    _, text = trained(e, "resume", 1, config, *hab_small(e), "run.total_env_steps=256", *e.dev())
    expect(text, r"resumed from .* at update 2 ", "resume")
    if "not restored" in text:
        raise CheckFailed(f"resume: {next(line for line in text.splitlines() if 'not restored' in line)}")
    return f"resumed at update 2, ran to {metrics(run_dir)[-1]['env_steps']} env steps, nothing 'not restored'"


def eval_export(e: Env) -> str:
    run_dir = e.work / "resume"
    habitat_data(e)
    rc, text = run([PY, "-m", "ddppo", "eval", str(run_dir), f"env.habitat.dataset={e.work / 'episodes' / 'val'}",
                    "env.habitat.max_episode_steps=32", *e.dev()], e.work / "eval.log")
    if rc != 0:
        raise CheckFailed(f"eval: exit {rc}: {tail(text)}")
    found = expect(text, r"ckpt-\d+ \([\d,]+ env steps\): \d+ episodes", "eval results").group(0)
    out = e.work / "ckpt.0.pth"
    rc, text = run([PY, "-m", "ddppo", "export", str(run_dir), "--format", "habitat-baselines", "-o", str(out),
                    "--force"], e.work / "export.log")
    if rc != 0 or not out.is_file():
        raise CheckFailed(f"export: exit {rc}: {tail(text)}")
    return f"eval of the resumed run ({found}), export {out.stat().st_size // 1024} KiB"


def deterministic_cnn(e: Env) -> str:
    """run.deterministic=true with depth images through the small CNN (its pooling has a deterministic CUDA
    path, ddppo/model/pooling.py): runs, and two runs end bit-identical."""
    args = [*habitat_data(e), "env.num_envs=4", "env.num_workers=0", "rollout.num_steps=16",
            "env.habitat.depth_width=32", "env.habitat.depth_height=32", "policy.image_encoder=cnn",
            "policy.hidden_size=32", "run.deterministic=true", e.steps(1024, 128), "checkpoint.interval_updates=1000",
            *e.dev()]
    first, _ = trained(e, "deterministic_cnn_a", 1, "configs/pointnav_habitat.yaml", *args)
    second, _ = trained(e, "deterministic_cnn_b", 1, "configs/pointnav_habitat.yaml", *args)
    a, b = model_digest(first), model_digest(second)
    if a != b:
        raise CheckFailed(f"two deterministic runs differ: {a[:12]} vs {b[:12]}")
    return f"2 runs bit-identical ({a[:12]})"


def habitat_paper_policy(e: Env) -> str:
    """configs/pointnav_habitat.yaml (ResNet50 + LSTM 512) on the grid double: fps and phase shares."""
    small = ["env.num_envs=2", "env.num_workers=0", "rollout.num_steps=16", "env.habitat.depth_width=32",
             "env.habitat.depth_height=32", "policy.hidden_size=32", "policy.resnet_base_width=8"] if e.dry else []
    run_dir, _ = trained(e, "habitat_paper", 1, "configs/pointnav_habitat.yaml", *habitat_data(e), *small,
                         e.steps(6144, 96), "checkpoint.interval_updates=100000", *e.dev())
    return phases(e, run_dir)


def timing_overhead(e: Env) -> str:
    cmd = [PY, "benchmarks/gpu_ranks.py", "timing", GRIDNAV, "1" if e.dry else "4", *GRID,
           *(["ppo.epochs=1"] if e.dry else []),
           "run.torch_threads=2", "log.tensorboard=false", f"run.dir={e.work / 'timing'}", *e.dev()]
    rc, text = run(cmd, e.work / "timing.log")
    if rc != 0:
        raise CheckFailed(f"exit {rc}: {tail(text)}")
    return expect(text, r"timing: events .*", "timing").group(0)[len("timing: "):]


def habitat_sim_cuda0(e: Env) -> str:
    rc, text = run([PY, "-m", "ddppo.envs.habitat.check", "--gpu-device-id", "-1" if e.dry else "0"],
                   e.work / "habitat_sim.log")
    if rc == 2:
        return "SKIP: habitat-sim does not import here"
    if rc != 0:
        raise CheckFailed(f"exit {rc}: {tail(text)}")
    return tail(text, 2)


def start_ranks(e: Env, name: str, overrides: list[str], **env: str) -> list[tuple[subprocess.Popen, Path]]:
    """Two `python -m ddppo train` processes with torchrun's variables (rank 0 hosts the store)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = []
    for rank in (0, 1):
        log = e.work / f"{name}.rank{rank}.log"
        launch = {"RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_RANK": str(rank), "LOCAL_WORLD_SIZE": "2",
                  "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
        with open(log, "w") as f:
            out.append((subprocess.Popen([PY, "-m", "ddppo", "train", GRIDNAV, f"run.dir={e.work / name}",
                                          "log.tensorboard=false", "run.torch_threads=1", *overrides],
                                         cwd=REPO, env=_env(**launch, **env), stdout=f, stderr=subprocess.STDOUT,
                                         start_new_session=True), log))
    return out


def wait(proc: subprocess.Popen, timeout_s: float) -> int | None:
    try:
        return proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return None


def peer_lost(e: Env, sig: signal.Signals) -> str:
    """Rank 1 killed or stopped mid-update: rank 0 exits 1 within dist.timeout_s (+10 s check-in), naming it."""
    if not e.dry and e.gpus < 2:
        return "SKIP: needs 2 GPUs (NCCL refuses two ranks on one)"
    timeout_s = 10 if e.dry else 20
    procs = start_ranks(e, f"lost_{sig.name}", [
        "env.name=synthetic", "env.num_envs=4", "rollout.num_steps=16", "env.synthetic.step_sleep_s=0.005",
        "run.total_env_steps=100000000", f"dist.timeout_s={timeout_s}", "checkpoint.interval_updates=100000",
        "log.interval_s=1", *e.dev()])
    (p0, log0), (p1, _) = procs
    try:
        deadline = time.monotonic() + 180
        while len(metrics(e.work / f"lost_{sig.name}")) < 3:  # past update 1: dist.timeout_s applies
            if time.monotonic() > deadline or p0.poll() is not None or p1.poll() is not None:
                raise CheckFailed(f"no 3 updates before the fault: {tail(log0.read_text(errors='replace'))}")
            time.sleep(0.2)
        os.kill(p1.pid, sig)
        start = time.monotonic()
        rc = wait(p0, timeout_s + 60)
        took = time.monotonic() - start
    finally:
        for p, _ in procs:
            if p.poll() is None:
                os.kill(p.pid, signal.SIGKILL)
                p.wait()
    text = log0.read_text(errors="replace")
    if rc != 1 or not LOST.search(text) or BAD_EXIT.search(text) or took > timeout_s + 25:
        raise CheckFailed(f"rank 0: exit {rc} after {took:.0f} s (expected 1 within {timeout_s + 25} s naming "
                          f"rank 1, no abort): {tail(text)}")
    where = "gloo/CPU counterpart" if e.dry else "NCCL"
    return f"{where}: rank 0 exit 1 after {took:.1f} s (dist.timeout_s={timeout_s}): " + LOST.search(text).group(0)


CHECKS: list[tuple[str, str, Callable[[Env], str]]] = [
    ("nccl_1rank", "d1 d5: NCCL world 1, event timers", nccl_1rank),
    ("two_ranks_one_gpu", "d3: auto -> gloo on one GPU; buckets, staging, stats", two_ranks_one_gpu),
    ("shared_gpu_refused", "d3: explicit NCCL, 2 ranks on 1 GPU", shared_gpu_refused),
    ("deterministic_lstm", "d2: deterministic LSTM on CUDA", deterministic_lstm),
    ("deterministic_cnn", "d2: deterministic CNN pooling on CUDA", deterministic_cnn),
    ("overlap_learning", "27: learner thread + acting copy on CUDA streams", overlap_learning),
    ("overlap_workers", "d5: overlap mode with workers", overlap_workers),
    ("variable_workers", "d5: variable mode with workers", variable_workers),
    ("resume_gpu", "CUDA: resume onto the GPU", resume_gpu),
    ("eval_export", "CUDA: eval and export of that run", eval_export),
    ("habitat_paper_policy", "d5: ResNet50+LSTM512, grid double", habitat_paper_policy),
    ("timing_overhead", "d5: events vs sync per phase", timing_overhead),
    ("habitat_sim_cuda0", "CUDA: habitat-sim renders on cuda:0", habitat_sim_cuda0),
    ("peer_killed", "d1: NCCL, rank 1 SIGKILLed", lambda e: peer_lost(e, signal.SIGKILL)),
    ("peer_stopped", "d1: NCCL, rank 1 SIGSTOPped", lambda e: peer_lost(e, signal.SIGSTOP)),
]


def table(rows: list[tuple[str, str, str, str, float]]) -> str:
    head = f"{'check':<22} {'covers':<52} {'result':<6} {'s':>5}  figures"
    return "\n".join([head, "-" * len(head)] + [f"{n:<22} {c:<52} {r:<6} {t:5.0f}  {d}" for n, c, r, d, t in rows])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dry-run", action="store_true", help="the same checks on CPU + gloo, tiny budgets (CI)")
    ap.add_argument("--only", default="", help="comma-separated check names (default: all)")
    ap.add_argument("--work", default="", help="work folder (default: a new temporary one)")
    args = ap.parse_args(argv)
    import torch

    if not args.dry_run and not torch.cuda.is_available():
        sys.stderr.write("gpu_check: torch sees no CUDA device (--dry-run checks the script on CPU)\n")
        return 2
    work = Path(args.work or tempfile.mkdtemp(prefix="ddppo-gpu-check."))
    work.mkdir(parents=True, exist_ok=True)
    e = Env(args.dry_run, work, 0 if args.dry_run else torch.cuda.device_count())
    device = ("CPU (dry run)" if e.dry
              else f"{torch.cuda.get_device_name(0)} x{e.gpus}, nccl {torch.cuda.nccl.version()}")
    print(f"gpu_check: torch {torch.__version__} on {device}; work folder {work}", flush=True)  # noqa: T201
    only = {n for n in args.only.split(",") if n}
    rows: list[tuple[str, str, str, str, float]] = []
    for name, covers, check in CHECKS:
        if only and name not in only:
            continue
        start = time.monotonic()
        try:
            detail = check(e)
            result = "SKIP" if detail.startswith("SKIP") else "PASS"
        except CheckFailed as err:
            detail, result = str(err), "FAIL"
        rows.append((name, covers, result, detail.removeprefix("SKIP: ") if result == "SKIP" else detail,
                     time.monotonic() - start))
        print(f"gpu_check: {name}: {result} ({rows[-1][4]:.0f} s) {rows[-1][3]}", flush=True)  # noqa: T201
        if result == "FAIL":
            break
    print(table(rows))  # noqa: T201
    failed = [r for r in rows if r[2] == "FAIL"]
    print(f"gpu_check: {'FAILED: ' + failed[0][0] if failed else 'all checks passed'} (logs in {work})")  # noqa: T201
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
