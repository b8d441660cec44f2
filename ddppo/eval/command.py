"""`ddppo eval`: checkpoints on held-out episodes -> metrics with 95% CIs (JSON, TensorBoard) and videos.

Which episodes
- An environment with a dataset (habitat PointNav, which has
  `assigned_episodes()`): every episode of the split exactly once. The env
  already gives each (rank, env) a disjoint part of the split; each env counts
  the first pass over its part, then idles. Parts that overlap (more envs than
  episodes) are counted once, by the lowest (rank, env). `eval.num_episodes`
  is ignored.
- Any other environment (gridnav, gym, synthetic): `eval.num_episodes` in
  total, split over ranks and then envs into fixed quotas; env i counts its
  first q_i episodes, then idles. (Counting whichever episodes finish first
  would over-represent short episodes; fixed quotas do not.) Where the env
  lets episodes be set (gridnav), the episodes are drawn once, up front, and
  each env plays its list exactly once ("planned"), so every checkpoint plays
  the same episodes whatever the policy does; otherwise each env plays what
  it draws ("quota").
Environments are seeded from `run.seed + eval.seed_offset` per rank (held
out from training; gridnav also generates other maps) and put back into their
just-built state before every checkpoint. Evaluation steps its envs in the
rank's own process (env.num_workers is ignored); torchrun ranks give
parallelism. Every episode is recorded in the JSON with a descriptor where
the env has one (gridnav: map_index, start, goal, heading, which
`GridNav.set_episode` replays; habitat: episode_id, scene_id).

Actions are greedy by default (`eval.deterministic=true`: argmax / Gaussian
mean); `eval.deterministic=false` samples like training (seeded).

Outputs, written by rank 0 into OUT (default run.dir/eval):
  ckpt-<update>.json   settings, metrics (mean, std, count, 95% CI), every episode, videos (another trainer's
                       checkpoint: its own name, e.g. ckpt.3.json for habitat-baselines' ckpt.3.pth)
                       An episode metric that is not a finite number (a NaN reward) is stored as null, left
                       out of its metric's statistics and counted: `non_finite` {metric: episodes}, a
                       warning, a line of the summary and TensorBoard eval/<metric>_non_finite.
  tb/                  TensorBoard `eval/<metric>` (+ `_ci95_low`, `_ci95_high`) at the checkpoint's env step
  videos/ckpt-<update>/episode-<k>.mp4   with --video N (GIF without an ffmpeg encoder)
A checkpoint whose JSON exists with the same settings (run.precision among them, as resolved on eval's device)
is skipped (re-run it with --force); one evaluated with other settings is refused, naming them.
One `ddppo eval` writes into OUT at a time (OUT/.lock, ddppo.rundir.claim_dir, taken
before its first evaluation): a second one refuses then, naming the first; evaluating
while training writes the run dir is fine (eval only reads it).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any, TextIO


from ddppo import checkpoint as ckpt
from ddppo import signals
from ddppo.config import Config, get_key
from ddppo.errors import CheckpointError, ConfigError
from ddppo.distributed import DistContext
from ddppo.eval.loading import resolve_config
from ddppo.eval.runner import Evaluator, result_name
from ddppo.model.precision import with_resolved_precision
from ddppo.rundir import Claim, RunDir, checkpoint_update, claim_dir
from ddppo.files import write_json
from ddppo.rollout.scenes import metric_key
from ddppo.envs.registry import section_for

log = logging.getLogger(__name__)

# run.precision as the evaluation ran it (auto resolved on eval's device): bf16 and fp32 act alike but not bit-alike
SETTING_KEYS = ("run.seed", "eval.num_episodes", "eval.deterministic", "eval.seed_offset", "run.precision")
# what a stored result that predates a setting key evaluated with (every evaluation was fp32 before run.precision)
SETTING_BEFORE = {"run.precision": "fp32"}
FINISH_GRACE_S = 120.0  # after training finished, wait this long for its final checkpoint


@dataclasses.dataclass
class EvalRequest:
    """What the user asked for on the command line."""

    target: str  # run dir or YAML config
    overrides: list[str]
    checkpoint: str = "latest"  # PATH | latest | all
    watch: bool = False
    video: int = 0
    out: str = ""  # default run.dir/eval
    force: bool = False
    poll_s: float = 30.0


# ------------------------------------------------------------------------------ config and files
def eval_settings(cfg: Config) -> dict[str, Any]:
    """What decides which episodes are played and how (a re-run with the same settings is skipped)."""
    section = section_for(cfg.env.name)
    out: dict[str, Any] = {"env.name": cfg.env.name}
    for key, value in dataclasses.asdict(getattr(cfg.env, section)).items():
        out[f"env.{section}.{key}"] = value
    out.update({k: get_key(cfg, k) for k in SETTING_KEYS})
    return json.loads(json.dumps(out))


def update_of(path: Path) -> int:
    update = checkpoint_update(path)
    return update if update is not None else int(ckpt.load(path)["counters"]["update"])


def name_of(path: Path) -> str:
    """The name of a checkpoint's eval outputs (runner.result_name), read from the file only where its name
    does not say it."""
    update = checkpoint_update(path)
    return f"ckpt-{update}" if update is not None else result_name(path, ckpt.load(path))


class Outputs:
    """Rank 0's files: OUT/ckpt-<update>.json and TensorBoard eval/* in OUT/tb at the checkpoint's env step."""

    def __init__(self, out_dir: Path, tensorboard: bool):
        self.out_dir, self.tensorboard, self.tb = out_dir, tensorboard, None

    def write(self, result: dict[str, Any]) -> Path:
        path = write_json(RunDir.eval_result_path(self.out_dir, result["name"]), result, allow_nan=False)
        if self.tensorboard:
            if self.tb is None:
                from torch.utils.tensorboard import SummaryWriter

                self.tb = SummaryWriter(str(self.out_dir / "tb"))
            step = result["env_steps"]
            for name, s in result["metrics"].items():
                self.tb.add_scalar(f"eval/{name}", s["mean"], step)
                if s["ci95"][0] is not None:
                    self.tb.add_scalar(f"eval/{name}_ci95_low", s["ci95"][0], step)
                    self.tb.add_scalar(f"eval/{name}_ci95_high", s["ci95"][1], step)
            for name, count in result.get("non_finite", {}).items():
                self.tb.add_scalar(f"eval/{name}_non_finite", count, step)
            self.tb.add_scalar("eval/episodes", result["num_episodes"], step)
            for scene, metrics in result.get("scenes", {}).items():  # eval/scene/<name>/<metric>
                for name, s in metrics.items():
                    self.tb.add_scalar(f"eval/scene/{metric_key(scene)}/{name}", s["mean"], step)
            self.tb.flush()
        return path

    def close(self) -> None:
        if self.tb is not None:
            self.tb.close()
            self.tb = None


def format_result(result: dict[str, Any], json_path: Path) -> str:
    """The console summary of one checkpoint."""
    how = "greedy" if result["deterministic"] else "sampled"
    name = result.get("name", f"ckpt-{result['update']}")  # results written before names were stored
    steps = f"{result['env_steps']:,} {result.get('steps_kind', 'env steps')}"  # demonstration steps: a BC run's
    lines = [f"{name} ({steps}): {result['num_episodes']} episodes, "
             f"{how} actions, {result['wall_time_s']:.1f} s"]
    for name, s in result["metrics"].items():
        lo, hi = s["ci95"]
        ci = f"[{lo:8.3f}, {hi:8.3f}]" if lo is not None else " " * 20
        lines.append(f"  {name:<17s}{s['mean']:9.3f}  95% CI {ci}  n={s['count']}")
    for scene, metrics in result.get("scenes", {}).items():
        lines.append(f"  scene {scene}: " + ", ".join(f"{k} {v['mean']:.3f}" for k, v in metrics.items()
                                                      if k in ("success", "spl", "reward", "episode_share")))
    bad = result.get("non_finite", {})  # results written before it was counted have none
    if bad:
        lines.append("  non-finite values left out: " + ", ".join(f"{k} in {n} episode(s)" for k, n in bad.items()))
    lines += [f"  video  {v['path']} ({v['frames']} frames)" for v in result["videos"]]
    lines.append(f"  -> {json_path}")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------ which checkpoints
class Selector:
    """Rank 0: which checkpoint to evaluate next ("eval", path), ("wait", "") or ("stop", why); ConfigError or
    CheckpointError where there is none to be had."""

    def __init__(self, cfg: Config, req: EvalRequest, out_dir: Path):
        self.cfg, self.req, self.out_dir = cfg, req, out_dir
        self.run_dir = RunDir(cfg.run.dir)
        self.settings = eval_settings(cfg)
        self.handled: set[str] = set()
        self.min_update: int | None = None
        self.finished_since: float | None = None
        self.skipped: list[tuple[dict[str, Any], Path]] = []  # stored results, to show them
        self.explicit = req.checkpoint not in ("latest", "all")  # one file: --watch does not apply
        self.claim: Claim | None = None  # OUT, claimed before the first evaluation (nothing written before)

    def _candidates(self, found: list[Path]) -> list[Path]:
        if self.req.checkpoint not in ("latest", "all"):
            path = Path(self.req.checkpoint)
            if not path.is_file():
                raise CheckpointError(f"checkpoint {str(path)!r} does not exist")
            return [path]
        if self.req.checkpoint == "all":
            return found
        if self.min_update is None and found:  # latest: the newest now, then (--watch) every newer one
            self.min_update = update_of(found[-1])
        return [p for p in found if update_of(p) >= (self.min_update or 0)] if self.req.watch else found[-1:]

    def next(self) -> tuple:
        if signals.pending():
            return ("stop", "stopped by a signal")
        found = self.run_dir.checkpoints()  # one listing: a checkpoint appearing now waits for the next look
        candidates = self._candidates(found)
        for path in candidates:
            key = str(path.resolve())
            if key in self.handled:
                continue
            self.handled.add(key)
            if not self._already_done(path):
                if self.claim is None:  # a second `ddppo eval` into OUT would replace these results: refused
                    self.claim = claim_dir(self.out_dir, "ddppo eval", "pass --out DIR to evaluate into another "
                                           "folder")
                return ("eval", str(path))
        if not self.req.watch or self.explicit:
            if not candidates and not self.handled:
                raise CheckpointError(f"no checkpoints in {str(self.run_dir.checkpoint_dir)!r}; train "
                                      f"first, or pass --watch to wait for them")
            return ("stop", "")
        last = self.run_dir.last_metrics()
        if self.run_dir.is_finished(last or {}, self.cfg.run.total_env_steps):
            last_update = int(last.get("update", 0))
            if found and update_of(found[-1]) >= last_update:
                return ("stop", "training finished")
            self.finished_since = self.finished_since or time.monotonic()
            if time.monotonic() - self.finished_since > FINISH_GRACE_S:
                log.warning("training finished at update %d but its checkpoint did not appear within %.0f s",
                            last_update, FINISH_GRACE_S)
                return ("stop", "training finished")
        return ("wait", "")

    def _already_done(self, path: Path) -> bool:
        """True (skip) if OUT/ckpt-<update>.json holds this evaluation; ConfigError if it holds another."""
        if self.req.force:
            return False
        result_path = RunDir.eval_result_path(self.out_dir, name_of(path))
        try:
            stored = json.loads(result_path.read_text())
        except FileNotFoundError:
            return False
        except (OSError, ValueError) as err:
            log.warning("%s is unreadable (%s); evaluating again", result_path, err)
            return False
        old = {**SETTING_BEFORE, **stored.get("settings", {})}
        differ = sorted(k for k in set(old) | set(self.settings) if old.get(k) != self.settings.get(k))
        if differ:
            detail = ", ".join(f"{k}: {old.get(k)!r} -> {self.settings.get(k)!r}" for k in differ[:8])
            raise ConfigError(f"{result_path} was evaluated with other settings ({detail}); pass --out DIR to keep "
                              f"both evaluations, or --force to replace it")
        if len(stored.get("videos", [])) < self.req.video:
            return False  # same settings, so the same numbers; this time with the videos
        log.info("%s already evaluated (%s); --force evaluates it again", path.name, result_path)
        self.skipped.append((stored, result_path))
        return True


# ------------------------------------------------------------------------------ driver
def run(req: EvalRequest, cfg: Config, ctx: DistContext, out: TextIO | None = None) -> int:
    """Evaluate the requested checkpoints (every rank runs this); 0 on success, 1 if interrupted."""
    cfg = with_resolved_precision(cfg, ctx.device, announce=ctx.is_main)  # auto: what this device runs
    out_dir = Path(req.out) if req.out else RunDir(cfg.run.dir).eval_dir
    selector = Selector(cfg, req, out_dir) if ctx.is_main else None
    outputs = Outputs(out_dir, cfg.log.tensorboard) if ctx.is_main else None
    evaluator: Evaluator | None = None
    try:
        while True:
            try:
                decision = ctx.decide_on_main(selector.next if selector else None, (ConfigError, CheckpointError))
            finally:
                if selector is not None and out is not None:
                    for stored, path in selector.skipped:
                        out.write("(already evaluated) " + format_result(stored, path))
                    selector.skipped.clear()
            if decision[0] == "stop":
                if decision[1]:
                    log.info("eval: %s", decision[1])
                return 0
            if decision[0] == "wait":
                deadline = time.monotonic() + req.poll_s
                while time.monotonic() < deadline and not signals.pending():
                    time.sleep(min(1.0, req.poll_s))
                continue
            if evaluator is None:
                evaluator = Evaluator(cfg, ctx, out_dir, eval_settings(cfg))
                log.info("eval: %s, %d episodes (%s mode) on %d rank(s), %s actions", cfg.env.name, evaluator.total,
                         evaluator.mode, ctx.world_size, "greedy" if cfg.eval.deterministic else "sampled")
            try:
                result = evaluator.evaluate(Path(decision[1]), req.video)
            except CheckpointError as err:
                if req.checkpoint not in ("latest", "all"):
                    raise
                log.warning("skipping an unreadable checkpoint: %s", err)  # the same decision on every rank
                continue
            if evaluator.interrupted:
                log.warning("eval interrupted by a signal: %s not evaluated, nothing written", decision[1])
                return 1
            if result is not None:
                for name, count in result["non_finite"].items():
                    log.warning("%s: %s is not a finite number in %d of %d episodes; left out of its statistics "
                                "(null in the JSON)", result["name"], name, count, result["num_episodes"])
                path = outputs.write(result)
                if out is not None:
                    out.write(format_result(result, path))
                    out.flush()
    finally:
        if outputs is not None:
            outputs.close()
        if evaluator is not None:
            evaluator.close()
        if selector is not None and selector.claim is not None:
            selector.claim.release()


def main(req: EvalRequest, setup_logging) -> int:
    """`ddppo eval`: config, logging, process group, then `run` (also under torchrun)."""
    from ddppo.distributed import read_launch, run_in_process_group

    if req.video < 0:
        raise ConfigError(f"--video {req.video} must be >= 0")
    if req.poll_s <= 0:
        raise ConfigError(f"--poll {req.poll_s} must be > 0 seconds")
    launch = read_launch()
    cfg = resolve_config(req.target, req.overrides)
    setup_logging(cfg.log.level, launch.rank)
    return run_in_process_group(cfg, launch, lambda ctx: run(req, cfg, ctx, sys.stdout if ctx.is_main else None))
