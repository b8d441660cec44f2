"""Preemption bias (issue 44): per-scene success and throughput with straggler preemption off, on, and on with
each correction, on the real trainer (2 gloo ranks under torchrun) and the real evaluator.

    ddppo bench preemption-bias [--seeds 1 2 3 4 5] [--variants off on rank ...] [--steps 16384]
                                [--out benchmarks/results/preemption_bias.json]
    ddppo bench preemption-bias --out FILE --markdown      # the results page's tables from FILE

The task: the synthetic env with 2 scenes, each its own reward mapping (a one-hot of the scene in the
observation: one policy must learn a skill per scene), scene 1's steps 3x slower than scene 0's. Scenes are
placed whole (`contiguous`, in every variant but `default`, `measured` and the placement ones): rank 0 plays the
fast scene, rank 1 the slow one, so preemption (preemption.sync_frac=0.5: one finished rank of two cuts the other)
cuts the slow scene's rollouts. `measured` (the shipped default) starts that way and moves the scenes once the
trainer has timed them (after the first update); `placement` spreads them by the known step factors from the start. Each run
trains for --steps env steps, then `ddppo eval` plays --episodes greedy episodes on one rank holding both scenes:
a scene's success is the fraction of its steps with the rewarded action (greedy accuracy).

Figures per run: per-scene greedy success, the gap (fast - slow), each scene's share of the samples and of the
gradient weight (train/scene/*, mean over the updates after the first), fps (env steps / wall time between the
end of the first update and the last), collection fps (env steps / the updates' time less their learning phases:
the rate preemption changes, less exposed to the machine's load than the learner's CPU time) and the run's wall
time. Results are written after every run, and runs
already in --out are kept and skipped (so an interrupted matrix resumes); --fresh starts over.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ddppo.benchmarks.common import child_env
from ddppo.files import atomic_write
from ddppo.rundir import RunDir

NAME = "preemption-bias"
HELP = ("per-scene success and fps with preemption off, on and on with each correction (issue 44), 2 ranks, "
        "scenes of different speeds")

# the shared config of every variant (sleep-bound envs: two ranks fit on a shared 2-core machine)
BASE = ["env.name=synthetic", "env.num_envs=8", "rollout.num_steps=32", "env.synthetic.num_scenes=2",
        "env.synthetic.scene_step_factors=[1,3]", "env.synthetic.step_sleep_s=0.004", "env.synthetic.obs_dim=8",
        "env.synthetic.num_actions=4", "env.synthetic.episode_length=32", "ppo.epochs=4", "ppo.num_mini_batch=2",
        "ppo.lr=0.001", "ppo.gamma=0.5", "policy.hidden_size=32", "policy.rnn_type=none", "run.torch_threads=1",
        "log.tensorboard=false", "log.interval_s=60", "log.window=4", "checkpoint.interval_updates=100000",
        "dist.timeout_s=120", "dist.device=cpu", "preemption.sync_frac=0.5", "preemption.min_rollout_fraction=0.25",
        "preemption.rank_weighting=false", "env.synthetic.scene_placement=contiguous"]
VARIANTS = {
    "off": ["preemption.enabled=false"],
    "on": [],
    "rank": ["preemption.rank_weighting=true"],
    "placement": ["env.synthetic.scene_placement=cost"],
    "rank+placement": ["preemption.rank_weighting=true", "env.synthetic.scene_placement=cost"],
    "measured": ["env.synthetic.scene_placement=measured"],
    "measured+off": ["env.synthetic.scene_placement=measured", "preemption.enabled=false"],  # placement alone
    "variable": ["rollout.mode=variable", "env.num_workers=4", "env.synthetic.scene_placement=cost"],
    "variable+rank": ["rollout.mode=variable", "env.num_workers=4", "env.synthetic.scene_placement=cost",
                      "preemption.rank_weighting=true"],
    "variable+two_sided": ["rollout.mode=variable", "env.num_workers=4", "env.synthetic.scene_placement=cost",
                           "rollout.importance_weights_form=two_sided", "preemption.rank_weighting=true"],
    "default": [],  # whatever the shipped defaults are (BASE's rank_weighting and scene_placement removed)
}
SCENES = ("scene0", "scene1")  # fast, slow
# phases of an update that are learning, not collection (their slowest rank's seconds, perf/<phase>_s_max)
LEARNING = ("advantage", "reference_forward", "learn_forward_backward", "allreduce", "optimizer", "log_checkpoint")


def overrides(variant: str, seed: int, steps: int) -> list[str]:
    shipped = ("preemption.rank_weighting", "env.synthetic.scene_placement")
    base = [o for o in BASE if not (variant == "default" and o.startswith(shipped))]
    return [*base, *VARIANTS[variant], f"run.seed={seed}", f"env.synthetic.scene_seed={seed}",
            f"run.total_env_steps={steps}"]


def run_one(work: Path, variant: str, seed: int, steps: int, episodes: int, timeout_s: float) -> dict:
    """Train (torchrun, 2 ranks) then evaluate greedily; the run's figures."""
    run_dir = work / f"{variant}-{seed}"
    empty = work / "empty.yaml"
    empty.write_text("{}\n")
    torchrun = Path(sys.executable).parent / "torchrun"
    head = [str(torchrun)] if torchrun.exists() else [sys.executable, "-m", "torch.distributed.run"]
    cmd = [*head, "--standalone", "--nproc_per_node=2", "-m", "ddppo", "train", str(empty), f"run.dir={run_dir}",
           *overrides(variant, seed, steps)]
    log = run_dir.with_name(run_dir.name + ".log")
    start = time.monotonic()
    with open(log, "w") as f:
        proc = subprocess.run(cmd, env=child_env(), stdout=f, stderr=subprocess.STDOUT, timeout=timeout_s)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed (rc={proc.returncode}); log: {log}")
        train_s = time.monotonic() - start
        # evaluation steps the envs in this process: the training's rollout mode does not apply
        ev = [sys.executable, "-m", "ddppo", "eval", str(run_dir), f"eval.num_episodes={episodes}",
              "log.tensorboard=false", "rollout.mode=fixed", "env.num_workers=0"]
        proc = subprocess.run(ev, env=child_env(), stdout=f, stderr=subprocess.STDOUT, timeout=timeout_s)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(ev)} failed (rc={proc.returncode}); log: {log}")
    rows = RunDir(run_dir).metrics()
    result = json.loads(sorted((run_dir / "eval").glob("ckpt-*.json"))[-1].read_text())
    return summarize_run(rows, result, train_s)


def summarize_run(rows: list[dict], result: dict, train_s: float) -> dict:
    first, last = rows[0], rows[-1]
    later = rows[1:] or rows
    fps = (last["env_steps"] - first["env_steps"]) / max(last["wall_time"] - first["wall_time"], 1e-9)
    collect_s = sum(r["perf/update_s"] - sum(r.get(f"perf/{p}_s_max", 0.0) for p in LEARNING) for r in later)
    collected = sum(b["env_steps"] - a["env_steps"] for a, b in zip(rows, rows[1:])) if len(rows) > 1 else 0
    out = {"fps": fps, "collect_fps": collected / max(collect_s, 1e-9), "train_s": train_s, "updates": len(rows),
           "env_steps": last["env_steps"],
           "steps_fraction_min_mean": statistics.mean(r["preempt/steps_fraction_min"] for r in later),
           "scenes": {}}
    for scene in SCENES:
        ev = result["scenes"].get(scene, {})
        share = [r.get(f"train/scene/{scene}/sample_share") for r in later]
        weight = [r.get(f"train/scene/{scene}/weight_share") for r in later]
        out["scenes"][scene] = {
            "success": ev.get("success", {}).get("mean"),
            "episodes": ev.get("success", {}).get("count"),
            "sample_share": statistics.mean(v for v in share if v is not None),
            "weight_share": statistics.mean(v for v in weight if v is not None),
            "train_success": last.get(f"train/scene/{scene}/success"),
        }
    s = out["scenes"]
    out["gap"] = s["scene0"]["success"] - s["scene1"]["success"]
    return out


def aggregate(runs: dict[str, dict[str, dict]]) -> dict[str, dict]:
    """Per variant: mean gap, per-scene mean success, shares, fps (medians for fps) over its seeds."""
    out = {}
    for variant, by_seed in runs.items():
        rs = list(by_seed.values())
        if not rs:
            continue
        out[variant] = {
            "seeds": len(rs), "gap_mean": statistics.mean(r["gap"] for r in rs),
            "fps_median": statistics.median(r["fps"] for r in rs), "fps_mean": statistics.mean(r["fps"] for r in rs),
            "collect_fps_median": statistics.median(r.get("collect_fps", math.nan) for r in rs),
            "steps_fraction_min": statistics.mean(r["steps_fraction_min_mean"] for r in rs),
            **{f"{sc}_{k}": statistics.mean(r["scenes"][sc][k] for r in rs)
               for sc in SCENES for k in ("success", "sample_share", "weight_share")},
        }
    off, on = out.get("off"), out.get("on")
    for variant, a in out.items():
        if off:
            a["gap_minus_off"] = a["gap_mean"] - off["gap_mean"]
            a.update(paired_gap(runs[variant], runs["off"]))
        if off and on:
            for key in ("fps", "collect_fps"):
                gain = on[f"{key}_median"] - off[f"{key}_median"]
                a[f"{key}_gain_fraction"] = (a[f"{key}_median"] - off[f"{key}_median"]) / gain if gain else None
    return out


def paired_gap(runs: dict[str, dict], off: dict[str, dict]) -> dict:
    """The gap minus no preemption's, seed by seed (a seed fixes the policy's start and the scenes' mappings, so
    pairing takes out what the seeds share): mean and standard error over the seeds both have run."""
    diffs = [runs[s]["gap"] - off[s]["gap"] for s in runs if s in off]
    if not diffs:
        return {}
    se = statistics.stdev(diffs) / math.sqrt(len(diffs)) if len(diffs) > 1 else math.nan
    return {"paired_seeds": len(diffs), "gap_minus_off_paired": statistics.mean(diffs), "gap_minus_off_se": se}


def markdown(report: dict) -> str:
    """The results page's two tables (docs/results/preemption-bias.md): per variant, then per seed."""
    head = ("| variant | seeds | fast scene success | slow scene success | gap, mean [min, max] | gap - off's gap, "
            "paired (s.e.) | slow scene's samples | its gradient weight | fps | of the gain | collection fps | "
            "of the gain |")
    lines = [head, "| --- |" + " ---: |" * 11]
    for variant, a in report["summary"].items():
        gaps = [r["gap"] for r in report["runs"][variant].values()]
        frac = [a.get(f"{k}_gain_fraction") for k in ("fps", "collect_fps")]
        paired = (f"{a['gap_minus_off_paired']:+.3f} ({a['gap_minus_off_se']:.3f})"
                  if a.get("paired_seeds", 0) > 1 and variant != "off" else "0")
        lines.append(f"| `{variant}` | {a['seeds']} | {a['scene0_success']:.3f} | {a['scene1_success']:.3f} | "
                     f"{a['gap_mean']:+.3f} [{min(gaps):+.3f}, {max(gaps):+.3f}] | {paired} | "
                     f"{a['scene1_sample_share']:.3f} | {a['scene1_weight_share']:.3f} | {a['fps_median']:,.0f} | "
                     + " | ".join("" if f is None else f"{f:.2f}" for f in frac[:1]) + f" | "
                     f"{a['collect_fps_median']:,.0f} | " + ("" if frac[1] is None else f"{frac[1]:.2f}") + " |")
    lines += ["", "| variant | seed | fast scene | slow scene | gap | slow scene's samples | its weight | fps | "
                  "collection fps | training s |", "| --- |" + " ---: |" * 9]
    for variant, by_seed in report["runs"].items():
        for seed, r in sorted(by_seed.items(), key=lambda kv: int(kv[0])):
            f, sl = r["scenes"]["scene0"], r["scenes"]["scene1"]
            lines.append(f"| `{variant}` | {seed} | {f['success']:.3f} | {sl['success']:.3f} | {r['gap']:+.3f} | "
                         f"{sl['sample_share']:.3f} | {sl['weight_share']:.3f} | {r['fps']:,.0f} | "
                         f"{r['collect_fps']:,.0f} | {r['train_s']:.0f} |")
    return "\n".join(lines) + "\n"


def table(report: dict) -> str:
    lines = [f"{'variant':<20} {'seed':>4} {'fast ok':>8} {'slow ok':>8} {'gap':>7} {'slow samples':>12} "
             f"{'slow weight':>11} {'fps':>7} {'train s':>7}"]
    for variant, by_seed in report["runs"].items():
        for seed, r in sorted(by_seed.items(), key=lambda kv: int(kv[0])):
            f, s = r["scenes"]["scene0"], r["scenes"]["scene1"]
            lines.append(f"{variant:<20} {seed:>4} {f['success']:>8.3f} {s['success']:>8.3f} {r['gap']:>7.3f} "
                         f"{s['sample_share']:>12.3f} {s['weight_share']:>11.3f} {r['fps']:>7.0f} {r['train_s']:>7.1f}")
    lines.append("")
    lines.append(f"{'variant':<20} {'seeds':>5} {'gap':>7} {'gap-off':>8} {'paired':>7} {'s.e.':>6} {'fps':>7} "
                 f"{'of gain':>8} {'collect fps':>11} {'of gain':>8}")
    for variant, a in report["summary"].items():
        fracs = [a.get(f"{k}_gain_fraction") for k in ("fps", "collect_fps")]
        cells = ["" if f is None else f"{f:.2f}" for f in fracs]
        lines.append(f"{variant:<20} {a['seeds']:>5} {a['gap_mean']:>7.3f} {a.get('gap_minus_off', 0):>8.3f} "
                     f"{a.get('gap_minus_off_paired', 0):>7.3f} {a.get('gap_minus_off_se', math.nan):>6.3f} "
                     f"{a['fps_median']:>7.0f} {cells[0]:>8} {a['collect_fps_median']:>11.0f} {cells[1]:>8}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ddppo bench preemption-bias", description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    parser.add_argument("--variants", nargs="+", default=[v for v in VARIANTS if v != "default"],
                        choices=list(VARIANTS), help="default: all but `default` (the shipped defaults)")
    parser.add_argument("--steps", type=int, default=16384, help="env steps per training run (both ranks)")
    parser.add_argument("--episodes", type=int, default=128, help="greedy evaluation episodes per run")
    parser.add_argument("--timeout", type=float, default=300, help="seconds allowed per training run")
    parser.add_argument("--out", default="results/preemption_bias.json", help="JSON output (resumed if present)")
    parser.add_argument("--fresh", action="store_true", help="ignore the runs already in --out")
    parser.add_argument("--rescan", nargs="+", default=[], metavar="WORK_DIR",
                        help="recompute the figures of the runs kept in these work folders (a run's folder and its "
                             "eval/), then exit")
    parser.add_argument("--markdown", action="store_true",
                        help="print --out's tables as the results page's markdown, then exit")
    args = parser.parse_args(argv)
    if args.markdown:
        report = json.loads(Path(args.out).read_text())
        report["summary"] = aggregate(report["runs"])
        sys.stdout.write(markdown(report))
        return 0
    if args.rescan:
        return rescan(args.rescan, Path(args.out))

    out = Path(args.out)
    report = json.loads(out.read_text()) if out.exists() and not args.fresh else {}
    runs = report.setdefault("runs", {})
    report.update({"base": BASE, "variants": {v: VARIANTS[v] for v in args.variants}, "steps": args.steps,
                   "episodes": args.episodes})
    work = Path(tempfile.mkdtemp(prefix="ddppo-preemption-bias-"))
    for seed in args.seeds:  # interleaved: every variant of a seed back to back, so the machine's load hits all
        for variant in args.variants:
            if str(seed) in runs.get(variant, {}):
                continue
            try:
                r = run_one(work, variant, seed, args.steps, args.episodes, args.timeout)
            except (RuntimeError, subprocess.TimeoutExpired) as err:
                sys.stderr.write(f"preemption-bias: {variant} seed {seed}: {err}\n")
                continue
            runs.setdefault(variant, {})[str(seed)] = r
            report["summary"] = aggregate(runs)
            report["load_average"] = os.getloadavg()[0]
            report["time"] = time.strftime("%Y-%m-%dT%H:%M:%S")
            out.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(out, json.dumps(report, indent=2) + "\n")
            sys.stdout.write(f"{variant} seed {seed}: gap {r['gap']:.3f}, fps {r['fps']:.0f}, "
                             f"{r['train_s']:.0f} s\n")
            sys.stdout.flush()
    report["summary"] = aggregate(runs)
    sys.stdout.write(table(report) + f"JSON: {out}\n")
    return 0


def rescan(work_dirs: list[str], out: Path) -> int:
    """Figures recomputed from kept runs (`<variant>-<seed>/` with metrics.jsonl and eval/), into --out."""
    report = json.loads(out.read_text())
    for work in work_dirs:
        for run_dir in sorted(Path(work).iterdir()):
            results = sorted((run_dir / "eval").glob("ckpt-*.json")) if run_dir.is_dir() else []
            variant, _, seed = run_dir.name.rpartition("-")
            if not results or str(seed) not in report["runs"].get(variant, {}):
                continue  # only the runs the report holds (a run that failed part way is not one)
            old = report["runs"][variant][seed]
            report["runs"][variant][seed] = summarize_run(RunDir(run_dir).metrics(), json.loads(results[-1].read_text()),
                                                          old["train_s"])
    report["summary"] = aggregate(report["runs"])
    atomic_write(out, json.dumps(report, indent=2) + "\n")
    sys.stdout.write(table(report) + f"JSON: {out}\n")
    return 0
