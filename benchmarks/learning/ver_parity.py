"""VER parity: fixed vs variable as before vs variable with habitat-baselines VER's rules, to a threshold.

    ddppo bench ver-parity [--seeds 1 2 3] [--cases skewed gridnav] [--out benchmarks/results/ver_parity.json]

Variants (rollout.* overrides):
    fixed        mode=fixed
    variable     mode=variable idle_envs=step importance_weights=false   (idle envs take an old-policy step)
    ver          mode=variable idle_envs=wait importance_weights=true    (VER: in-flight actions only, weighted)
    weighted     mode=variable idle_envs=step importance_weights=true    (VER's weights alone; --variants)
    per_minibatch  weighted + variable_weighting=per_minibatch  (each env-split minibatch its own mean)
    per_sample     weighted + variable_weighting=per_sample     (VER's sample weighting: every sample alike)

The sample-weighting table of docs/results/ver-weighting.md (issue 33), one command (from the repository root):

    nice -n 10 ddppo bench ver-parity --weighting --out benchmarks/results/ver_weighting.json
    (--weighting = --cases skewed-11 skewed-11.5 gridnav --variants fixed per_minibatch per_sample --seeds 1 2 3 4 5)

Cases: `skewed` (the synthetic env, 8 envs in 8 workers, per-env step times spread log-normally, sigma 1.0,
redrawn every episode, and slow resets; threshold windowed train/reward >= 10.5 of 32, a uniform policy gets 8)
`skewed-11` (the same, threshold 11.0, nearer where the synthetic task plateaus: each worker's env has its own
reward matrix and the observation does not say which), `skewed-11.5` (threshold 11.5; the windowed reward then
wanders between about 11.2 and 12.4) and `gridnav` (8x8 maps through 8 workers; threshold
windowed success >= 0.9 and SPL >= 0.8). Each run is
`ddppo train configs/gridnav.yaml CASE VARIANT run.seed=SEED` in its own process, one at a time (the variants
of one seed back to back, so load drift on a shared machine touches all three alike), stopped with SIGTERM at
the first update past the threshold or at its step or time cap. Per run: env steps and minutes (from the first
update's end) to the threshold, and the median windowed fps over the run. Prints a table and writes JSON;
nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ddppo.config.loading import shipped_config

NAME = "ver-parity"
HELP = "fixed vs variable vs VER's rules: env steps and minutes to a threshold"

COMMON = ["log.tensorboard=false", "log.interval_s=30", "ppo.lr_schedule=constant", "checkpoint.interval_updates=1000"]
CASES = {
    "skewed": {"overrides": ["env.name=synthetic", "env.num_envs=8", "env.num_workers=8", "rollout.num_steps=32",
                             "env.synthetic.step_sleep_s=0.002", "env.synthetic.step_sleep_sigma=1.0",
                             "env.synthetic.reset_sleep_s=0.02", "env.synthetic.episode_length=32", "ppo.epochs=4",
                             "ppo.num_mini_batch=2", "policy.hidden_size=64", "policy.rnn_type=none", "ppo.lr=3e-3",
                             "ppo.entropy_coef=0.0", "ppo.gamma=0.5", "ppo.gae_lambda=0.5",
                             "run.total_env_steps=60000"],
               "threshold": {"train/reward": 10.5}, "cap_s": 150},
    "skewed-11": {"overrides": [], "threshold": {"train/reward": 11.0}, "cap_s": 120},  # skewed's, nearer its plateau
    "gridnav": {"overrides": ["env.num_envs=16", "env.num_workers=8", "rollout.num_steps=32", "env.gridnav.map_size=8",
                              "env.gridnav.num_maps=16", "env.gridnav.max_episode_steps=40", "ppo.num_mini_batch=2",
                              "policy.hidden_size=64", "run.total_env_steps=150000"],
                "threshold": {"train/success": 0.9, "train/spl": 0.8}, "cap_s": 180},
}
CASES["skewed-11.5"] = {"overrides": [], "threshold": {"train/reward": 11.5}, "cap_s": 150}  # nearer still
CASES["skewed-11"]["overrides"] = CASES["skewed-11.5"]["overrides"] = CASES["skewed"]["overrides"]
VARIANTS = {
    "fixed": ["rollout.mode=fixed"],
    "variable": ["rollout.mode=variable", "rollout.idle_envs=step", "rollout.importance_weights=false"],
    "ver": ["rollout.mode=variable", "rollout.idle_envs=wait", "rollout.importance_weights=true",
            "rollout.importance_weights_form=one_sided"],
    "weighted": ["rollout.mode=variable", "rollout.idle_envs=step", "rollout.importance_weights=true",
                 "rollout.importance_weights_form=one_sided"],
}
VARIANTS["per_minibatch"] = [*VARIANTS["weighted"], "rollout.variable_weighting=per_minibatch"]
VARIANTS["per_sample"] = [*VARIANTS["weighted"], "rollout.variable_weighting=per_sample"]
WEIGHTING = {"cases": ["skewed-11", "skewed-11.5", "gridnav"], "variants": ["fixed", "per_minibatch", "per_sample"],
             "seeds": [1, 2, 3, 4, 5]}
DEFAULT_VARIANTS = ["fixed", "variable", "ver"]


def _rows(run_dir: Path) -> list[dict]:
    try:
        return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    except (OSError, ValueError):
        return []


def _figures(rows: list[dict], threshold: dict[str, float]) -> dict:
    hit = next((r for r in rows if all(r.get(k, float("-inf")) >= v for k, v in threshold.items())), None)
    fps = [r["perf/fps"] for r in rows if "perf/fps" in r]
    return {"env_steps": None if hit is None else int(hit["env_steps"]),
            "minutes": None if hit is None else (hit["wall_time"] - rows[0]["wall_time"]) / 60,
            "fps": statistics.median(fps) if fps else None, "updates": len(rows)}


def run_one(case: dict, variant: list[str], seed: int, run_dir: Path) -> dict:
    cmd = [sys.executable, "-m", "ddppo", "train", str(shipped_config("gridnav")),
           f"run.dir={run_dir}", *COMMON, *case["overrides"], *variant, f"run.seed={seed}"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    start = time.monotonic()
    try:
        while proc.poll() is None:
            time.sleep(1)
            if _figures(_rows(run_dir), case["threshold"])["env_steps"] is not None:
                break
            if time.monotonic() - start > case["cap_s"]:
                break
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)  # saves and exits
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return _figures(_rows(run_dir), case["threshold"])


def _spread(values: list) -> dict:
    """median, min, max and mean of the values (None if there are none)."""
    if not values:
        return {"median": None, "min": None, "max": None, "mean": None}
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "mean": statistics.mean(values)}


def summarise(runs: dict) -> dict:
    out = {}
    for name, by_variant in runs.items():
        out[name] = {}
        for variant, seeds in by_variant.items():
            vals = list(seeds.values())
            hits = [v for v in vals if v["env_steps"] is not None]
            steps, minutes = _spread([v["env_steps"] for v in hits]), _spread([v["minutes"] for v in hits])
            fps = _spread([v["fps"] for v in vals if v["fps"]])
            out[name][variant] = {
                "reached": f"{len(hits)}/{len(vals)}",
                "env_steps_median": steps["median"], "minutes_median": minutes["median"],
                "fps_median": fps["median"], "env_steps": steps, "minutes": minutes, "fps": fps}
    return out


def table(summary: dict) -> list[str]:
    """One line per case and variant: median [min, max] over the seeds that reached the threshold."""
    def cell(s: dict, fmt: str) -> str:
        return "-" if s["median"] is None else f"{s['median']:{fmt}} [{s['min']:{fmt}}, {s['max']:{fmt}}]"

    header = f"{'case':<12}{'variant':<15}{'reached':>8}  {'env steps':<26}{'minutes':<20}fps"
    lines = [header, "-" * (len(header) + 20)]
    for name, by_variant in summary.items():
        for variant, s in by_variant.items():
            lines.append(f"{name:<12}{variant:<15}{s['reached']:>8}  {cell(s['env_steps'], ',.0f'):<26}"
                         f"{cell(s['minutes'], '.2f'):<20}{cell(s['fps'], ',.0f')}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ddppo bench ver-parity", description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--cases", nargs="+", default=["skewed", "gridnav"], choices=list(CASES))
    parser.add_argument("--variants", nargs="+", default=DEFAULT_VARIANTS, choices=list(VARIANTS))
    parser.add_argument("--out", default=None, help="JSON output (default results/ver_parity.json, with "
                                                    "--weighting results/ver_weighting.json)")
    parser.add_argument("--weighting", action="store_true",
                        help="issue 33's sample-weighting table: cases skewed-11, skewed-11.5 and gridnav; variants "
                             "fixed, per_minibatch, per_sample; seeds 1-5")
    args = parser.parse_args(argv)
    if args.weighting:
        for key, value in WEIGHTING.items():
            setattr(args, key, value)
    args.out = args.out or ("results/ver_weighting.json" if args.weighting else "results/ver_parity.json")
    runs: dict = {c: {v: {} for v in args.variants} for c in args.cases}
    with tempfile.TemporaryDirectory(prefix="ddppo-ver-") as tmp:
        for name in args.cases:
            for seed in args.seeds:
                for variant in args.variants:
                    got = run_one(CASES[name], VARIANTS[variant], seed, Path(tmp) / f"{name}_{variant}_s{seed}")
                    runs[name][variant][str(seed)] = got
                    print(f"{name} {variant} seed {seed}: {json.dumps(got)}", flush=True)  # noqa: T201
    summary = summarise(runs)
    result = {"cases": {c: CASES[c] for c in args.cases}, "variants": {v: VARIANTS[v] for v in args.variants},
              "common": COMMON,
              "runs": runs, "summary": summary}
    print("\n".join(table(summary)))  # noqa: T201
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    return 0


