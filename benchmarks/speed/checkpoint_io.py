"""`ddppo bench checkpoint-io`: how large a config's checkpoint is, and how long writing it takes where you write
it (run it with --dir on your cluster's shared filesystem: that is the figure that matters there).

    ddppo bench checkpoint-io [--case CONFIG [OVERRIDE ...]] ... [--dir DIR] [--repeats N] [--out FILE]

For each case, one update of the real `ddppo train` (the rollout cut to 4 steps per env: the model, the optimiser
and the per-env state a checkpoint holds do not depend on the rollout length) writes a checkpoint; that checkpoint
is then written again N times into DIR through the trainer's own save (ddppo.checkpoint.format.save: serialised in
memory, written to a temporary file, fsynced, renamed, older ones pruned). Reported per case: parameters, file
size, and the median (min-max) seconds of the serialisation alone and of the whole save, with MB/s of the whole
save, and the bytes of each rank's own state (RNG, environments, recurrent state: a checkpoint holds one per
rank, so a run on N ranks writes about N - 1 more of them than this one-rank run). The defaults are the shipped
configs that run on any machine (gridnav, cartpole).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

NAME = "checkpoint-io"
HELP = "checkpoint size and write time of configs, written where you point it"

DEFAULT_CASES = [["gridnav"], ["cartpole"]]
ROLLOUT_STEPS = 4


def train_one_update(case: list[str], run_dir: Path) -> Path:
    """Run one update of `ddppo train` on the case; the checkpoint it wrote."""
    from ddppo.config import load_config

    config, overrides = case[0], case[1:]
    cfg = load_config(config, [*overrides, f"rollout.num_steps={ROLLOUT_STEPS}"])
    steps = cfg.env.num_envs * ROLLOUT_STEPS
    cmd = [sys.executable, "-m", "ddppo", "train", config, *overrides, f"rollout.num_steps={ROLLOUT_STEPS}",
           f"run.dir={run_dir}", f"run.total_env_steps={steps}", "log.level=WARNING"]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    written = sorted((run_dir / "checkpoints").glob("ckpt-*.pt"))
    if proc.returncode != 0 or not written:
        raise SystemExit(f"ddppo bench checkpoint-io: {' '.join(case)}: training one update failed "
                         f"(exit {proc.returncode}): {proc.stderr.strip().splitlines()[-1:] or ''}")
    return written[-1]


def time_saves(source: Path, out_dir: Path, repeats: int) -> dict:
    """Write the checkpoint `source` `repeats` times into out_dir the way the trainer does; sizes and times."""
    from ddppo.checkpoint import format as ckpt

    data = ckpt.load(source)
    payload = {k: v for k, v in data.items() if k != "format"}
    serialise, save = [], []
    for i in range(repeats):
        start = time.perf_counter()
        ckpt.to_bytes({"format": ckpt.FORMAT, **ckpt.to_storable(payload)})
        serialise.append(time.perf_counter() - start)
        start = time.perf_counter()
        path = ckpt.save(out_dir, i + 1, payload, keep_last=1)
        save.append(time.perf_counter() - start)
    size = path.stat().st_size
    params = sum(v.numel() for v in data["model"].values() if hasattr(v, "numel"))
    per_rank = [len(ckpt.to_bytes(ckpt.to_storable(r))) for r in data.get("rank_states") or []]
    return {"parameters": params, "bytes": size, "rank_state_bytes": per_rank, "serialise_s": serialise,
            "save_s": save, "save_mb_per_s": size / 1e6 / statistics.median(save)}


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="ddppo bench checkpoint-io", description=__doc__.split("\n\n")[0])
    ap.add_argument("--case", action="append", nargs="+", metavar=("CONFIG", "OVERRIDE"),
                    help="a config and overrides (repeatable); default: gridnav, cartpole")
    ap.add_argument("--dir", default="", help="where the checkpoints are written (default: a temporary folder in "
                                              "the working directory); give a folder on the filesystem to measure")
    ap.add_argument("--repeats", type=int, default=5, help="saves per case (median, min and max reported)")
    ap.add_argument("--out", default="results/checkpoint-io.json", help="JSON output path")
    args = ap.parse_args(argv)
    cases = args.case or DEFAULT_CASES
    results = []
    with tempfile.TemporaryDirectory(dir=args.dir or ".", prefix="ddppo-checkpoint-io-") as work:
        for i, case in enumerate(cases):
            source = train_one_update(case, Path(work) / f"train-{i}")
            figures = time_saves(source, Path(work) / f"save-{i}", args.repeats)
            results.append({"case": case, **figures})
            print(f"{' '.join(case)[:60]:60s} {figures['parameters']:>11,d} params {figures['bytes'] / 1e6:9.2f} MB  "
                  f"serialise {spread(figures['serialise_s'])} s  save {spread(figures['save_s'])} s  "
                  f"({figures['save_mb_per_s']:.0f} MB/s), rank state {sum(figures['rank_state_bytes']) / 1e6:.2f} MB",
                  flush=True)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"command": sys.argv, "dir": str(Path(args.dir or ".").resolve()),
                               "repeats": args.repeats, "results": results}, indent=1) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
