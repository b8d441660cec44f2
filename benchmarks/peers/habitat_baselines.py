"""`ddppo bench habitat-baselines`: ddppo and habitat-baselines' trainers side by side on the real simulator.

All trainers get the same scenes, episodes, sensors, policy and PPO settings, derived from one ddppo config
(`--case CONFIG OVERRIDE...`) and mapped to the keys of the habitat-baselines found at run time: 0.2.x (yacs keys,
habitat_baselines_config_v02.py; one side, "habitat-baselines", its DD-PPO) or 0.3.x (Hydra,
habitat_baselines_config_v03.py; two sides, "hb-ddppo" and "hb-ver": its DD-PPO and its VER with rollouts and
learning overlapped). Each run is its own process, one rank; throughput runs one after the other, learning runs
`--jobs` at a time:

- throughput: `--rounds` interleaved rounds of every side (the first side rotates) of `--updates` updates each; with
  `--ab OVERRIDE...` a third side, ddppo with those overrides as well ("ddppo+ab", e.g.
  rollout.overlap_learning=true), in every round too (the order rotates); the steady rate of one run is
  (steps at its last update - steps at its first) / (time between them), the same definition on every side
  (start-up and the first update are left out); medians over the rounds.
- learning: for each of `--seeds`, ddppo and habitat-baselines' DD-PPO to the same `--budget` env steps; success/SPL curves as each
  trainer logs them (ddppo: log.window episodes; habitat-baselines: reward_window_size updates).
- cross-evaluation: both final checkpoints evaluated by both evaluators on the held-out split (`--eval-split`
  in place of the training split's name), all its episodes, actions sampled (habitat-baselines 0.2.x's
  evaluator always samples, so ddppo's runs with eval.deterministic=false to match).

Where neither habitat-baselines 0.2.x nor 0.3.x is importable it refuses (one line, exit 2). Nothing in it is patched by this
benchmark; torch >= 2.6 cannot load habitat-baselines' own checkpoints (a pickled yacs config, `weights_only`),
so its evaluator runs with TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 in its environment. On a GPU machine the same
command runs both on the GPU (habitat-baselines picks CUDA itself; SIMULATOR_GPU_ID from env.habitat.gpu_device_id).
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ddppo.benchmarks import common
from ddppo.benchmarks.peers import habitat_baselines_config_v02 as config_v02
from ddppo.benchmarks.peers import habitat_baselines_config_v03 as config_v03
from ddppo.config import load_config
from ddppo.config.loading import shipped_config
from ddppo.errors import ConfigError

NAME = "habitat-baselines"
HELP = ("throughput, learning and cross-evaluation vs habitat-baselines' DD-PPO (and, on 0.3.x, its VER) on the "
        'real simulator (where it is importable)')

log = logging.getLogger(__name__)
# the default case's policy: habitat-baselines' PointNavBaselinePolicy as it ships (hidden 512, one GRU layer)
SIMPLE_CNN = ("policy.architecture=habitat_baselines_simple", "policy.hidden_size=512", "policy.rnn_type=gru",
              "policy.rnn_layers=1")
QUIET = {"HABITAT_SIM_LOG": "quiet", "MAGNUM_LOG": "quiet", "GLOG_minloglevel": "2"}


def habitat_baselines_home() -> tuple[str, Path | None, Path | None]:
    """(version, exp config, task config) of the installed habitat-baselines 0.2.x; (version, None, None) for
    0.3.x (its experiment config is written per run, config_v03); ConfigError otherwise."""
    from importlib import metadata

    spec = importlib.util.find_spec("habitat_baselines")
    if spec is None or spec.origin is None:
        raise ConfigError("ddppo bench habitat-baselines needs habitat-baselines importable here (0.2.x or 0.3.x, "
                          "with the habitat-sim of its release); none found in " + sys.executable)
    version = next((v for v in _versions(metadata) if v), "unknown")
    if version.startswith("0.3."):
        return version, None, None
    if not version.startswith("0.2."):
        raise ConfigError(f"habitat-baselines {version} found; this benchmark maps ddppo's config to 0.2.x's or "
                          f"0.3.x's keys: install habitat-lab/habitat-baselines 0.2.x or 0.3.x")
    package = Path(spec.origin).parent
    exp, task = package / "config/pointnav/ddppo_pointnav.yaml", package.parent / "configs/tasks/pointnav.yaml"
    missing = [str(p) for p in (exp, task) if not p.exists()]
    if missing:
        raise ConfigError(f"habitat-baselines {version} has no {' or '.join(missing)}: install habitat-lab from its "
                          f"source tree (pip install -e), which has configs/tasks/")
    return version, exp, task


def _versions(metadata: Any) -> list[str]:
    out = []
    for dist in ("habitat-baselines", "habitat_baselines", "habitat"):
        try:
            out.append(metadata.version(dist))
        except metadata.PackageNotFoundError:
            out.append("")
    return out


def _environ(threads: int, **extra: str) -> dict[str, str]:
    return {**os.environ, **QUIET, "OMP_NUM_THREADS": str(threads), **extra}


def _run(cmd: list[str], log_path: Path, cwd: Path | None = None, env: dict[str, str] | None = None) -> float:
    """Run one trainer or evaluator to the end, its output to `log_path`; wall seconds. Raises on failure."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with open(log_path, "w") as out:
        proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        tail = log_path.read_text(errors="replace").strip().splitlines()[-1:] or [""]
        raise RuntimeError(f"{cmd[1:4]} exited {proc.returncode} (log {log_path}): {tail[0][:300]}")
    return time.perf_counter() - t0


class Bench:
    """The two trainers on one config: `train(side, seed, steps)` and `evaluate(evaluator, checkpoint)`."""

    def __init__(self, config: str, overrides: list[str], work: Path, eval_split: str, ab: list[str] | None = None):
        self.version, self.exp, self.task = habitat_baselines_home()
        self.v03 = self.exp is None  # habitat-baselines 0.3.x: its DD-PPO and its VER, Hydra keys
        self.hb_sides = list(config_v03.TRAINERS) if self.v03 else ["habitat-baselines"]
        self.config, self.overrides, self.work = config, list(overrides), work
        self.ab = list(ab or [])  # the "ddppo+ab" side's further overrides
        self.cfg = load_config(config, self.overrides)
        load_config(config, self.overrides + self.ab)  # a bad --ab override fails here, before any run
        bad = (config_v03 if self.v03 else config_v02).unmappable(self.cfg)
        if bad:
            raise ConfigError("cannot run habitat-baselines with this config: " + "; ".join(bad))
        self.per_update = self.cfg.env.num_envs * self.cfg.rollout.num_steps
        template, _ = config_v02.dataset_template(self.cfg.env.habitat.dataset)
        self.eval_split = eval_split
        self.eval_dataset = template.replace("{split}", eval_split)
        if not Path(self.eval_dataset).exists():
            raise ConfigError(f"--eval-split {eval_split}: {self.eval_dataset} does not exist (held-out episodes "
                              f"beside the training split's folder)")
        self.threads = self.cfg.run.torch_threads or 1

    def _hb(self, run_type: str, opts: list[str], log_path: Path, **env: str) -> float:
        cmd = [sys.executable, "-m", "habitat_baselines.run", "--exp-config", str(self.exp), "--run-type", run_type,
               "BASE_TASK_CONFIG_PATH", str(self.task), *opts]
        return _run(cmd, log_path, cwd=self.task.parents[2], env=_environ(self.threads, **env))

    def train(self, side: str, seed: int, updates: int, log_interval: int = 1) -> dict[str, Any]:
        """One training run: its per-update records, steady rate, checkpoint and profile."""
        steps = updates * self.per_update
        out = self.work / f"{side}-s{seed}-{steps}-{time.time_ns()}"
        if side.startswith("ddppo"):
            extra = self.ab if side == "ddppo+ab" else []
            wall = _run([sys.executable, "-m", "ddppo", "train", self.config, *self.overrides, *extra, f"run.dir={out}",
                         f"run.seed={seed}", f"run.total_env_steps={steps}", "log.tensorboard=false",
                         f"checkpoint.interval_updates={updates}"], out / "stdout.log", env=_environ(self.threads))
            from ddppo.files import read_jsonl

            records = read_jsonl(out / "metrics.jsonl")
            ckpt = sorted((out / "checkpoints").glob("ckpt-*.pt"), key=lambda p: p.stat().st_mtime)[-1]
            profile = _ddppo_profile(records)
        elif self.v03:
            seeded = load_config(self.config, [*self.overrides, f"run.seed={seed}"])
            exp = config_v03.write_exp_config(seeded, side, out, updates, log_interval)
            wall = _run(config_v03.command(sys.executable, exp), out / "stdout.log", cwd=out,
                        env=_environ(self.threads))
            records = config_v03.read_train_log(out / "stdout.log")  # VER logs from another process: stdout
            ckpt = sorted((out / "ckpt").glob("ckpt.*.pth"), key=lambda p: p.stat().st_mtime)[-1]
            profile = config_v03.profile(out / "stdout.log")
        else:
            seeded = load_config(self.config, [*self.overrides, f"run.seed={seed}"])
            out.mkdir(parents=True)
            wall = self._hb("train", config_v02.options(seeded, out, steps, log_interval), out / "stdout.log")
            records = config_v02.read_train_log(out / "train.log")
            ckpt = sorted((out / "ckpt").glob("ckpt.*.pth"), key=lambda p: p.stat().st_mtime)[-1]
            profile = _hb_profile(out / "train.log")
        return {"side": side, "seed": seed, "env_steps": steps, "wall_s": wall, "dir": str(out),
                "checkpoint": str(ckpt), "steady_steps_per_s": steady_rate(records), "profile": profile,
                "curve": [{k: r.get(k) for k in ("env_steps", "success", "spl", "train/success", "train/spl")
                           if r.get(k) is not None} for r in records]}

    def evaluate(self, evaluator: str, run: dict[str, Any]) -> dict[str, Any]:
        """`evaluator` (ddppo | habitat-baselines) on the held-out split with `run`'s final checkpoint."""
        out = self.work / f"eval-{evaluator}-of-{Path(run['dir']).name}"
        if evaluator == "ddppo":
            _run([sys.executable, "-m", "ddppo", "eval", self.config, *self.overrides, f"run.dir={out}/run",
                  f"env.habitat.dataset={self.eval_dataset}", "eval.deterministic=false", "log.tensorboard=false",
                  "--checkpoint", run["checkpoint"], "--out", str(out)], out / "stdout.log",
                 env=_environ(self.threads))
            from ddppo.files import read_json

            result = read_json(next(out.glob("*.json")))
            summary = {k: result["metrics"][k]["mean"] for k in ("success", "spl", "distance_to_goal")}
            per_episode = {k: [e["metrics"][k] for e in result["episodes"]] for k in ("success", "spl")}
            return {**summary, "episodes": result["num_episodes"], "per_episode": per_episode}
        ckpt = run["checkpoint"]
        if run["side"] == "ddppo":  # its run's checkpoint in the release's layout, through ddppo's own export
            ckpt = str(out / "ckpt.0.pth")
            _run([sys.executable, "-m", "ddppo", "export", run["dir"], "--format", "habitat-baselines", "-o", ckpt,
                  "--habitat-version", "0.3" if self.v03 else "0.2", "--checkpoint", run["checkpoint"]],
                 out / "export.log")
        episodes = _count_episodes(self.eval_dataset)
        cfg = load_config(self.config, [*self.overrides, f"env.habitat.dataset={self.eval_dataset}",
                                        "env.num_envs=1", "env.num_workers=0", "ppo.num_mini_batch=1"])
        if self.v03:
            exp = config_v03.write_exp_config(cfg, "hb-ddppo", out, 1, 1, config_v03.eval_keys(
                ckpt, self.eval_split, episodes))
            _run(config_v03.command(sys.executable, exp, evaluate=True), out / "stdout.log", cwd=out,
                 env=_environ(self.threads, TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD="1"))
            return {**{k: config_v02.read_eval_log(out / "stdout.log").get(k)
                       for k in ("success", "spl", "distance_to_goal")}, "episodes": episodes}
        opts = config_v02.options(cfg, out, self.per_update, 1) + [
            "EVAL_CKPT_PATH_DIR", ckpt, "EVAL.SPLIT", self.eval_split, "EVAL.USE_CKPT_CONFIG", "False",
            "TEST_EPISODE_COUNT", str(episodes)]
        self._hb("eval", opts, out / "stdout.log", TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD="1")
        found = config_v02.read_eval_log(out / "stdout.log")
        return {"success": found.get("success"), "spl": found.get("spl"),
                "distance_to_goal": found.get("distance_to_goal"), "episodes": episodes}


def _count_episodes(dataset: str) -> int:
    import gzip
    import json

    path = Path(dataset)
    episodes = len(json.loads(gzip.open(path).read()).get("episodes", []))
    content = path.parent / "content"
    if content.is_dir():
        episodes += sum(len(json.loads(gzip.open(p).read()).get("episodes", [])) for p in content.glob("*.json.gz"))
    return episodes


def steady_rate(records: list[dict[str, Any]]) -> float | None:
    """(steps at the last record - at the first) / (time between them): start-up and update 1 left out."""
    timed = [r for r in records if r.get("wall_time") is not None and r.get("env_steps") is not None]
    if len(timed) < 2 or timed[-1]["wall_time"] <= timed[0]["wall_time"]:
        return None
    return (timed[-1]["env_steps"] - timed[0]["env_steps"]) / (timed[-1]["wall_time"] - timed[0]["wall_time"])


def _ddppo_profile(records: list[dict[str, Any]]) -> dict[str, float]:
    """Share of update time per phase (means over the updates after the first)."""
    later = records[1:] or records
    total = sum(r.get("perf/update_s", 0.0) for r in later) or 1.0
    phases = {"env_step": ["perf/env_step_s"], "policy_forward": ["perf/policy_forward_s"],
              "learn": ["perf/learn_forward_backward_s", "perf/optimizer_s"],
              "learner_wait": ["perf/learner_wait_s"], "other/straggler": []}
    shares = {name: sum(r.get(k, 0.0) for r in later for k in keys) / total for name, keys in phases.items()}
    # rollout.overlap_learning: learning overlaps collection, the shares may add up to more than 1
    shares["other/straggler"] = max(0.0, 1.0 - sum(shares.values()))
    return shares


def _hb_profile(train_log: Path) -> dict[str, float]:
    """habitat-baselines' own cumulative env-time / pth-time at its last logged update, as shares of both."""
    import re

    found = re.findall(r"env-time: ([\d.]+)s\tpth-time: ([\d.]+)s", train_log.read_text(errors="replace"))
    if not found:
        return {}
    env_s, pth_s = map(float, found[-1])
    return {"env_step": env_s / (env_s + pth_s), "pytorch (policy forward + learn)": pth_s / (env_s + pth_s)}


def throughput(bench: Bench, rounds: int, updates: int) -> dict[str, Any]:
    hb_sides = getattr(bench, "hb_sides", ["habitat-baselines"])
    sides = ["ddppo", *hb_sides] + (["ddppo+ab"] if bench.ab else [])
    runs: dict[str, list[dict[str, Any]]] = {side: [] for side in sides}
    for r in range(rounds):
        for side in (sides[r % len(sides):] + sides[:r % len(sides)]):  # who goes first rotates
            runs[side].append(bench.train(side, bench.cfg.run.seed, updates))
            log.warning("throughput round %d %s: %.2f steps/s", r + 1, side, runs[side][-1]["steady_steps_per_s"])
    med = {side: statistics.median(x["steady_steps_per_s"] for x in rs) for side, rs in runs.items()}
    ratios = {f"{a}/{b}": med[a] / med[b] for a in sides if a.startswith("ddppo") for b in hb_sides}
    if bench.ab:
        ratios["ddppo+ab/ddppo"] = med["ddppo+ab"] / med["ddppo"]
    if hb_sides == ["habitat-baselines"]:  # 0.2.x: the keys its results files have always had
        legacy = {"ratio_ddppo_over_hb": med["ddppo"] / med["habitat-baselines"]}
        if bench.ab:
            legacy.update(ratio_ab_over_hb=med["ddppo+ab"] / med["habitat-baselines"],
                          ratio_ab_over_ddppo=med["ddppo+ab"] / med["ddppo"])
    else:
        legacy = {}
    ab = {"ab_overrides": bench.ab} if bench.ab else {}
    return {"updates": updates, "rounds": rounds, "median_steps_per_s": med, **ab, "ratios": ratios, **legacy,
            "runs": {side: [{k: x[k] for k in ("steady_steps_per_s", "wall_s", "profile")} for x in rs]
                     for side, rs in runs.items()}}


def learning(bench: Bench, seeds: list[int], updates: int, jobs: int = 1) -> dict[str, Any]:
    """Both sides for each seed, each run then both evaluations; `jobs` runs at once (each is its own processes:
    a machine with cores to spare finishes the pairs sooner; the learning result does not depend on the timing)."""
    from concurrent.futures import ThreadPoolExecutor

    def one(seed: int, side: str) -> dict[str, Any]:
        run = bench.train(side, seed, updates, log_interval=max(1, updates // 50))
        run["eval"] = {ev: bench.evaluate(ev, run) for ev in ("ddppo", "habitat-baselines")}
        log.warning("learning seed %d %s: %s", seed, side, {ev: {k: v for k, v in r.items() if k != "per_episode"}
                                                            for ev, r in run["eval"].items()})
        return run

    pairs = [(seed, side) for seed in seeds for side in ("ddppo", bench.hb_sides[0])]
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        runs = list(pool.map(lambda pair: one(*pair), pairs))
    return {"env_steps": updates * bench.per_update, "seeds": seeds, "jobs": jobs, "runs": runs}


def mean_ci(values: list[float]) -> tuple[float, float, float]:
    """Mean and a normal-approximation 95% interval (t with many episodes)."""
    m = statistics.fmean(values)
    half = 1.96 * statistics.stdev(values) / len(values) ** 0.5 if len(values) > 1 else float("inf")
    return m, m - half, m + half


def parity(runs: list[dict[str, Any]], hb_side: str = "habitat-baselines") -> dict[str, Any]:
    """Per metric: each side's held-out mean over all its seeds' episodes (ddppo's evaluator, which keeps every
    episode), habitat-baselines' 95% CI, and whether ddppo is inside it or above (the goal)."""
    out: dict[str, Any] = {}
    for metric in ("success", "spl"):
        pooled = {side: [v for r in runs if r["side"] == side for v in r["eval"]["ddppo"]["per_episode"][metric]]
                  for side in ("ddppo", hb_side)}
        ours, (hb, lo, hi) = statistics.fmean(pooled["ddppo"]), mean_ci(pooled[hb_side])
        out[metric] = {"ddppo": ours, "habitat-baselines": hb, "hb_ci95": [lo, hi], "met": ours >= lo}
    return out


def table(results: dict[str, Any]) -> list[str]:
    lines = [f"habitat-baselines {results['habitat_baselines_version']} vs ddppo, {results['case']}"]
    tp = results.get("throughput")
    if tp:
        lines.append(f"\nthroughput ({tp['rounds']} interleaved rounds x {tp['updates']} updates, steady steps/s)")
        lines.append(f"{'trainer':<20}{'median':>10}  rounds                      profile (share of time)")
        for side, runs in tp["runs"].items():
            rates = " ".join(f"{x['steady_steps_per_s']:.1f}" for x in runs)
            prof = ", ".join(f"{k} {v:.0%}" for k, v in runs[-1]["profile"].items())
            lines.append(f"{side:<20}{tp['median_steps_per_s'][side]:>10.2f}  {rates:<28}{prof}")
        if "ratio_ddppo_over_hb" in tp:
            lines.append(f"ratio ddppo / habitat-baselines: {tp['ratio_ddppo_over_hb']:.2f}x")
        if "ratio_ab_over_hb" in tp:
            lines.append(f"ddppo+ab = ddppo with {' '.join(tp['ab_overrides'])}: {tp['ratio_ab_over_hb']:.2f}x "
                         f"habitat-baselines, {tp['ratio_ab_over_ddppo']:.2f}x ddppo")
        elif "ratios" in tp:
            if "ab_overrides" in tp:
                lines.append(f"ddppo+ab = ddppo with {' '.join(tp['ab_overrides'])}")
            lines.extend(f"ratio {pair.replace('/', ' / ')}: {r:.2f}x" for pair, r in tp["ratios"].items())
    ln = results.get("learning")
    if ln:
        lines.append(f"\nlearning to {ln['env_steps']:,} env steps; held-out success / SPL by each evaluator "
                     f"(actions sampled)")
        lines.append(f"{'trained by':<20}{'seed':>5}{'steps/s':>9}  {'ddppo eval':>15}  {'hb eval':>15}  "
                     f"last train window (success, spl)")
        for r in ln["runs"]:
            ev = r["eval"]
            last = r["curve"][-1] if r["curve"] else {}
            train = (last.get("train/success", last.get("success")), last.get("train/spl", last.get("spl")))
            lines.append(f"{r['side']:<20}{r['seed']:>5}{r['steady_steps_per_s'] or 0:>9.1f}  "
                         f"{_pair(ev['ddppo']):>15}  {_pair(ev['habitat-baselines']):>15}  {_pair(train)}")
        for metric, p in ln["parity"].items():
            lines.append(f"parity {metric}: ddppo {p['ddppo']:.3f}, habitat-baselines {p['habitat-baselines']:.3f} "
                         f"[{p['hb_ci95'][0]:.3f}, {p['hb_ci95'][1]:.3f}] -> {'met' if p['met'] else 'missed'}")
    return lines


def _pair(value: Any) -> str:
    if isinstance(value, dict):
        value = (value.get("success"), value.get("spl"))
    return " / ".join("-" if v is None else f"{v:.3f}" for v in value)


def _mapping(v03: bool) -> dict[str, str]:
    if v03:
        return {d: ", ".join(keys) for d, keys, _ in config_v03.MAPPING}
    return {d: h for d, h, _ in config_v02.MAPPING}


def options() -> argparse.ArgumentParser:
    bench = common.parser(NAME, HELP)
    common.add_case(bench, "the one config both trainers run, and its overrides (default: pointnav_habitat_cpu "
                           "with habitat-baselines' SimpleCNN policy)")
    bench.add_argument("--rounds", type=int, default=5, help="interleaved throughput rounds (0 = no throughput)")
    bench.add_argument("--updates", type=int, default=20, help="updates per throughput run")
    bench.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3], help="learning seeds")
    bench.add_argument("--budget", type=int, default=100_000,
                       help="env steps per learning run (0 = no learning)")
    bench.add_argument("--eval-split", default="val", help="held-out split, a folder beside the training split's")
    bench.add_argument("--ab", nargs="+", default=[], metavar="OVERRIDE",
                       help="throughput also of ddppo with these overrides (a third side, interleaved), e.g. "
                            "rollout.overlap_learning=true")
    bench.add_argument("--jobs", type=int, default=1,
                       help="learning runs at once (throughput runs are always one at a time)")
    return bench


def main(argv: list[str] | None = None) -> int:
    """Throughput (when --rounds > 0), then learning with cross-evaluation (when --budget > 0); one JSON."""
    args = options().parse_args(argv)
    config, overrides = (args.case[0][0], args.case[0][1:]) if args.case else (
        str(shipped_config("pointnav_habitat_cpu")), list(SIMPLE_CNN))
    rounds, updates, seeds, budget, out = args.rounds, args.updates, args.seeds, args.budget, args.out
    work = Path(os.environ.get("DDPPO_BENCH_WORK", "/tmp")) / f"ddppo-bench-hb-{time.strftime('%Y%m%d-%H%M%S')}"
    bench = Bench(config, overrides, work, args.eval_split, args.ab)
    results: dict[str, Any] = {"case": " ".join([config, *overrides]), "habitat_baselines_version": bench.version,
                               "python": sys.executable, "work_dir": str(work),
                               "mapping": _mapping(bench.v03),
                               "hb_options": ({side: config_v03.values(bench.cfg, side, work / side, 1, 1)
                                               for side in bench.hb_sides} if bench.v03 else
                                              config_v02.options(bench.cfg, work / "hb", bench.per_update, 1)),
                               "local_workarounds": ["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 for its evaluator "
                                                     "(torch >= 2.6 cannot load its own checkpoints)",
                                                     f"OMP_NUM_THREADS={bench.threads} for both (its "
                                                     f"FORCE_TORCH_SINGLE_THREADED acts with CUDA only)"]}
    if rounds > 0:
        results["throughput"] = throughput(bench, rounds, updates)
        common.report(table(results), results, out)  # written after each part: a long run keeps what it measured
    if budget > 0:
        total = -(-budget // bench.per_update)
        results["learning"] = learning(bench, seeds, total, args.jobs)
        results["learning"]["parity"] = parity(results["learning"]["runs"], bench.hb_sides[0])
    return common.report(table(results), results, out)
