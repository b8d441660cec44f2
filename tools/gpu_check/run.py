"""The GPU check: every CUDA path of the trainer as one run on one machine with a GPU (1 H200, 16 cores: the
whole run within --budget-s, 480 s by default).

    python -m gpu_check.run [--dry-run] [--part essential|rest|models|all] [--only NAME,...] [--work DIR]
                            [--budget-s S]
    (bash tools/gpu_check/run.sh ..., which puts tools/ on PYTHONPATH; from a bare checkout without omegaconf
     or gymnasium installed: tools/gpu_check/prepare_deps.py, then tools/gpu_check/device.sh essential|rest on
     the GPU machine)

The checks run in PLAN's order, in two parts (--part; one command each on a lent machine: PART_BUDGET_S each),
the essential first: NCCL's blocking-wait timeout on one GPU, plainly and
under torchrun (a one-rank group whose all-reduce is queued behind `torch.cuda._sleep`: the wait must raise
inside the guard, the rank exit 1, no abort); world 1 under torchrun with no warning about NCCL variables;
deterministic LSTM; overlapped learning without cuDNN's contiguity warning; two ranks on one GPU; then the rest,
habitat last. Each runs the real CLI (torchrun, or plain processes with torchrun's variables where it needs
every rank's exit code), reads what the run wrote and asserts on it: every PASS rests on an assertion that can
fail, and the checks of a lost peer are judged by exit code, the named rank and the absence of an abort.

Time: every check has a planned budget (printed first) and a deadline (1.5 x its budget, within the run's);
a check that runs past its deadline is killed and FAILs; a check whose budget no longer fits what is left of
the run is not started and shows as SKIP. A failure does not stop the run (one run shows everything). The
summary line counts PASS, FAIL and SKIP and says "all checks passed" only when every check ran and passed;
the table is also written as JSON (gpu_check.json in the work folder). Exit 1 on any FAIL, else 0.

--dry-run (CI, on CPU): the same checks, commands and parsing on CPU + gloo with tiny budgets; checks whose
subject only a GPU has run a CPU counterpart, named in the row, or SKIP saying why. No run budget unless
--budget-s is given. Uses this Python (PYTHON=... for the .sh); installs nothing.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, NamedTuple

from gpu_check import nccl_checks as nccl
from gpu_check import path_checks as paths
from gpu_check.common import CheckFailed, Env

RUN_BUDGET_S = 585.0  # the three parts in one run
PART_BUDGET_S = 270.0  # one part: a command of at most 300 s, less the interpreter's start and the unpacking
DEADLINE_FACTOR = 1.5
DRY_DEADLINE_S = 600.0  # per check on CI's CPU


class Check(NamedTuple):
    name: str
    covers: str
    budget_s: float  # planned on 1 H200 + 16 cores
    run: Callable[[Env], str]


# Two parts, one command each on a lent machine (at most 300 s a command, 15 min of device time in all, its start
# included): the essential checks first, then the rest. Each part's planned total stays within PART_BUDGET_S.
PLAN: list[Check] = [
    # --- essential
    Check("blocking_wait_timeout", "NCCL timeout raises in guard, exit 1 (plain)", 30,
          lambda e: nccl.blocking_wait_timeout(e, under_torchrun=False)),
    Check("blocking_wait_torchrun", "the same under torchrun (its injected variable)", 35,
          lambda e: nccl.blocking_wait_timeout(e, under_torchrun=True)),
    Check("nccl_1rank", "NCCL world 1 under torchrun, no variable warning", 40, nccl.nccl_1rank),
    Check("overlap_learning", "learner thread + acting copy, no cuDNN repack", 50, paths.overlap_learning),
    Check("two_ranks_one_gpu", "auto -> gloo on one GPU; buckets, staging, stats", 40, nccl.two_ranks_one_gpu),
    Check("resume_gpu", "resume onto the GPU", 40, paths.resume_gpu),
    Check("eval_export", "eval and export of that run", 30, paths.eval_export),
    # --- the rest
    Check("deterministic_lstm", "deterministic LSTM on CUDA, bit-identical", 40, paths.deterministic_lstm),
    Check("backend_agreement", "a rank without a GPU: one ConfigError, exit 2", 15, nccl.backend_agreement),
    Check("shared_gpu_refused", "explicit NCCL, 2 ranks on 1 GPU: exit 2", 15, nccl.shared_gpu_refused),
    Check("peer_killed", "NCCL, rank 1 SIGKILLed: rank 0 exit 1 naming it", 30,
          lambda e: nccl.peer_lost(e, signal.SIGKILL)),
    Check("peer_stopped", "NCCL, rank 1 SIGSTOPped: rank 0 exit 1 naming it", 30,
          lambda e: nccl.peer_lost(e, signal.SIGSTOP)),
    Check("timing_overhead", "event timers vs a sync per phase", 25, paths.timing_overhead),
    Check("overlap_workers", "overlap mode with workers", 25, paths.overlap_workers),
    Check("variable_workers", "variable mode with workers", 25, paths.variable_workers),
    Check("deterministic_cnn", "deterministic CNN pooling on CUDA", 30, paths.deterministic_cnn),
    Check("habitat_paper_policy", "ResNet50+LSTM512, grid double", 25, paths.habitat_paper_policy),
    Check("habitat_sim_cuda0", "habitat-sim renders on cuda:0", 10, paths.habitat_sim_cuda0),
    # --- the models: this round's policy paths on CUDA
    Check("bf16_compile", "bf16 + torch.compile, CNN + transformer", 45, paths.bf16_compile_transformer),
]
ESSENTIAL = 7  # PLAN[:ESSENTIAL] is the first part
MODELS = 1  # PLAN[-MODELS:] is the third
PARTS = ("essential", "rest", "models", "all")


def part_plan(part: str) -> list[Check]:
    return {"essential": PLAN[:ESSENTIAL], "rest": PLAN[ESSENTIAL:-MODELS], "models": PLAN[-MODELS:],
            "all": PLAN}[part]

Row = tuple  # (name, covers, result, detail, seconds)


def table(rows: list[Row]) -> str:
    head = f"{'check':<24} {'covers':<50} {'result':<6} {'s':>5}  figures"
    return "\n".join([head, "-" * len(head)] + [f"{n:<24} {c:<50} {r:<6} {t:5.0f}  {d}" for n, c, r, d, t in rows])


def summary(rows: list[Row]) -> str:
    counts = {k: sum(1 for r in rows if r[2] == k) for k in ("PASS", "FAIL", "SKIP")}
    line = f"{counts['PASS']} PASS, {counts['FAIL']} FAIL, {counts['SKIP']} SKIP of {len(rows)}"
    if counts["FAIL"]:
        return f"FAILED: {', '.join(r[0] for r in rows if r[2] == 'FAIL')} ({line})"
    if counts["SKIP"]:
        return f"no failure, but not every check ran: SKIP {', '.join(r[0] for r in rows if r[2] == 'SKIP')} ({line})"
    return f"all checks passed ({line})"


def run_check(e: Env, check: Check, run_left: float) -> Row:
    """One check within its deadline; SKIP when its budget no longer fits what is left of the run."""
    if check.budget_s > run_left:
        return (check.name, check.covers, "SKIP", f"not started: budget {check.budget_s:g} s, {run_left:.0f} s left "
                                                  f"of the run", 0.0)
    start = time.monotonic()
    limit = DRY_DEADLINE_S if e.dry else DEADLINE_FACTOR * check.budget_s
    e.deadline = start + min(limit, run_left)
    try:
        detail = check.run(e)
        result = "SKIP" if detail.startswith("SKIP") else "PASS"
        detail = detail[len("SKIP: "):] if result == "SKIP" else detail
    except CheckFailed as err:
        detail, result = str(err), "FAIL"
        if time.monotonic() >= e.deadline:
            detail = f"over its deadline of {e.deadline - start:.0f} s: {detail}"
    return (check.name, check.covers, result, detail, time.monotonic() - start)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dry-run", action="store_true", help="the same checks on CPU + gloo, tiny budgets (CI)")
    ap.add_argument("--part", choices=PARTS, default="all",
                    help=f"essential (the first {ESSENTIAL} checks), rest, models (the last {MODELS}), or all "
                         f"(default)")
    ap.add_argument("--only", default="", help="comma-separated check names (default: all of the part)")
    ap.add_argument("--work", default="", help="work folder (default: a new temporary one)")
    ap.add_argument("--budget-s", type=float, default=None,
                    help=f"the whole run's budget (default {PART_BUDGET_S:g} s a part, {RUN_BUDGET_S:g} s for all; "
                         f"none with --dry-run)")
    args = ap.parse_args(argv)
    import torch

    if not args.dry_run and not torch.cuda.is_available():
        sys.stderr.write("gpu_check: torch sees no CUDA device (--dry-run checks the script on CPU)\n")
        return 2
    only = [n for n in args.only.split(",") if n]
    unknown = sorted(set(only) - {c.name for c in PLAN})
    if unknown:
        sys.stderr.write(f"gpu_check: --only names unknown checks {unknown}; known: {[c.name for c in PLAN]}\n")
        return 2
    work = Path(args.work or tempfile.mkdtemp(prefix="ddppo-gpu-check."))
    work.mkdir(parents=True, exist_ok=True)
    e = Env(args.dry_run, work, 0 if args.dry_run else torch.cuda.device_count())
    default = RUN_BUDGET_S if args.part == "all" else PART_BUDGET_S
    budget = args.budget_s if args.budget_s is not None else (float("inf") if e.dry else default)
    device = ("CPU (dry run)" if e.dry
              else f"{torch.cuda.get_device_name(0)} x{e.gpus}, nccl {torch.cuda.nccl.version()}")
    plan = [c for c in part_plan(args.part) if not only or c.name in only]
    shown = "none" if budget == float("inf") else f"{budget:g} s"
    print(f"gpu_check: torch {torch.__version__} on {device}; work folder {work}; run budget {shown}",
          flush=True)  # noqa: T201
    print("gpu_check: planned " + ", ".join(f"{c.name} {c.budget_s:g} s" for c in plan)
          + f" (sum {sum(c.budget_s for c in plan):g} s)", flush=True)  # noqa: T201
    start, rows = time.monotonic(), []
    for check in plan:
        rows.append(run_check(e, check, budget - (time.monotonic() - start)))
        print(f"gpu_check: {rows[-1][0]}: {rows[-1][2]} ({rows[-1][4]:.0f} s) {rows[-1][3]}", flush=True)  # noqa: T201
    print(table(rows))  # noqa: T201
    out = work / ("gpu_check.json" if args.part == "all" else f"gpu_check_{args.part}.json")
    out.write_text(json.dumps({"device": device, "torch": torch.__version__, "dry_run": e.dry, "part": args.part,
                               "planned_s": sum(c.budget_s for c in plan), "budget_s": budget
                               if budget != float("inf") else None, "total_s": round(time.monotonic() - start, 1),
                               "summary": summary(rows), "checks": [
                                   {"name": n, "covers": c, "result": r, "detail": d, "seconds": round(t, 1),
                                    "planned_s": next(p.budget_s for p in PLAN if p.name == n)}
                                   for n, c, r, d, t in rows]}, indent=2))
    print(f"gpu_check: {summary(rows)}; planned {sum(c.budget_s for c in plan):g} s, measured "
          f"{time.monotonic() - start:.0f} s; results {out}, logs in {work}")  # noqa: T201
    return 1 if any(r[2] == "FAIL" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
