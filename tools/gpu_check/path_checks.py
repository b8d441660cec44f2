"""The GPU check's training-path checks: deterministic mode, overlapped learning, worker modes, the timers,
resume/eval/export and habitat (tools/gpu_check/run.py runs them in its order). Each returns its figures, or
raises CheckFailed; every PASS rests on an assertion that can fail (bit-identity, a budget reached, a phase
check, a ratio, a line expected or refused)."""

from __future__ import annotations

import re
from pathlib import Path

from gpu_check import phase_check
from gpu_check.common import (
    CUDNN_NOT_CONTIGUOUS, GRID, GRIDNAV, PY, CheckFailed, Env, expect, metrics, model_digest, reached, refuse, run,
    tail, trained,
)

SMALL_HB = ["policy.architecture=habitat_baselines", "policy.hidden_size=64", "policy.rnn_type=lstm",
            "policy.rnn_layers=1", "policy.resnet_base_width=8", "policy.resnet_layers=[2,2,2,2]",
            "policy.resnet_bottleneck=false"]
# events may cost at most this much throughput against a sync per phase (timing_overhead)
MIN_TIMING_RATIO = 0.9


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


def _twice_identical(e: Env, name: str, config: str, args: list[str]) -> tuple[Path, str, str]:
    first, text = trained(e, f"{name}_a", 1, config, *args)
    second, _ = trained(e, f"{name}_b", 1, config, *args)
    a, b = model_digest(first), model_digest(second)
    if a != b:
        raise CheckFailed(f"two deterministic runs differ: {a[:12]} vs {b[:12]}")
    return first, text, a


def deterministic_lstm(e: Env) -> str:
    """run.deterministic=true with an LSTM on the GPU: runs, and two runs end bit-identical."""
    args = [*GRID, e.steps(8192, 1024), "policy.rnn_type=lstm", "run.deterministic=true",
            "checkpoint.interval_updates=1000", *e.dev()]
    first, _, digest = _twice_identical(e, "deterministic", GRIDNAV, args)
    return f"2 runs bit-identical ({digest[:12]}); fps {metrics(first)[-1].get('perf/fps', 0):.0f}"


def overlap_learning(e: Env) -> str:
    """rollout.overlap_learning on CUDA: the learner thread's stream hand-overs (ddppo/train/overlap_learning.py). Two
    deterministic runs must end bit-identical (a missing wait between the streams shows as a difference or NaN),
    and cuDNN must not warn that the acting copy's LSTM weights are not one contiguous chunk."""
    args = [*GRID, e.steps(8192, 1024), "policy.rnn_type=lstm", "run.deterministic=true", "env.num_workers=2",
            "rollout.overlap_learning=true", "checkpoint.interval_updates=1000", *e.dev()]
    first, text, digest = _twice_identical(e, "overlap_learning", GRIDNAV, args)
    refuse(text, CUDNN_NOT_CONTIGUOUS, "cuDNN repacks the acting copy's weights")
    last = metrics(first)[-1]
    return (f"2 runs bit-identical ({digest[:12]}), no cuDNN contiguity warning; fps {last.get('perf/fps', 0):.0f}, "
            f"learner wait {last.get('perf/learner_wait_s', 0):.3f} s per update")


def bf16_compile_transformer(e: Env) -> str:
    """run.precision=bf16 with run.compile=true on CUDA, on the depth camera's CNN and the transformer core (its
    attention through SDPA's fused kernels, its KV cache kept in bf16): trains to its budget, the compiled graphs
    are compiled a bounded number of times (not once per update: dynamic shapes), and acting and learning agree
    before the first optimiser step (loss/ratio_dev_start). A dry run (CPU) leaves compile out: compiling on CI's
    CPU costs minutes."""
    budget = 1024 if e.dry else 16384
    args = ["env.num_envs=16", "rollout.num_steps=32", "checkpoint.interval_updates=100000",
            f"run.total_env_steps={budget}", "env.gridnav.camera_size=[16,32]", "policy.rnn_type=transformer",
            "policy.transformer.context=16", "ppo.minibatch_split=env", "run.precision=bf16",
            f"run.compile={'false' if e.dry else 'true'}", *e.dev()]
    run_dir, text = trained(e, "bf16_compile", 1, "configs/gridnav_depth.yaml", *args)
    last = reached(run_dir, budget)
    rows = metrics(run_dir)
    compiled = len(re.findall(r"run\.compile: \S+ compiled in", text))
    if not e.dry and not 0 < compiled <= 6:
        raise CheckFailed(f"{compiled} compilations over {len(rows)} updates (expected 1-6: acting and learning, not "
                          f"one per update): {tail(text)}")
    devs = [r["loss/ratio_dev_start"] for r in rows if "loss/ratio_dev_start" in r]
    if not devs or not max(devs) < 1e-2:
        raise CheckFailed(f"loss/ratio_dev_start {devs}: bf16 acting and bf16 learning disagree")
    return (f"{last['perf/fps']:.0f} fps, {compiled} compilations over {len(rows)} updates, ratio_dev_start max "
            f"{max(devs):.1e}{' (dry: no compile)' if e.dry else ''}")


def overlap_workers(e: Env) -> str:
    budget = 1024 if e.dry else 10240
    run_dir, _ = trained(e, "overlap", 1, GRIDNAV, *GRID, f"run.total_env_steps={budget}", "rollout.overlap=true",
                         "env.num_workers=4", *e.dev())
    return f"{reached(run_dir, budget)['perf/fps']:.0f} fps to {budget} env steps (4 workers, double-buffered)"


def variable_workers(e: Env) -> str:
    budget = 1024 if e.dry else 10240
    run_dir, _ = trained(e, "variable", 1, GRIDNAV, *GRID, f"run.total_env_steps={budget}", "rollout.mode=variable",
                         "env.num_workers=8", *e.dev())
    return f"{reached(run_dir, budget)['perf/fps']:.0f} fps to {budget} env steps (8 workers, variable experience)"


def timing_overhead(e: Env) -> str:
    """The event timers (the default on CUDA) against a sync at the end of every phase: on a GPU they may cost
    at most 1 - MIN_TIMING_RATIO of the throughput (a dry run on CPU only reports: both are host timers)."""
    cmd = [PY, "tools/gpu_check/ranks.py", "timing", GRIDNAV, "1" if e.dry else "4", *GRID,
           *(["ppo.epochs=1"] if e.dry else []),
           "run.torch_threads=2", "log.tensorboard=false", f"run.dir={e.work / 'timing'}", *e.dev()]
    rc, text = run(e, cmd, e.work / "timing.log")
    if rc != 0:
        raise CheckFailed(f"exit {rc}: {tail(text)}")
    found = expect(text, r"timing: events (\d+) fps, per-phase sync (\d+) fps, ratio ([\d.]+).*", "timing")
    ratio = float(found.group(3))
    if not e.dry and ratio < MIN_TIMING_RATIO:
        raise CheckFailed(f"event timers cost {100 * (1 - ratio):.0f}% throughput (at most "
                          f"{100 * (1 - MIN_TIMING_RATIO):.0f}%): {found.group(0)}")
    return found.group(0)[len("timing: "):] + ("" if e.dry else f" (>= {MIN_TIMING_RATIO})")


def habitat_data(e: Env) -> list[str]:
    """Two generated scenes, a train split (50 episodes per scene) and a val split (2 per scene, for eval)."""
    scenes, episodes, val = e.work / "scenes", e.work / "episodes" / "train", e.work / "episodes" / "val"
    if not (episodes.exists() and val.exists()):
        gen = [PY, "-m", "ddppo.envs.scenes.episode_gen", "--scenes-dir", str(scenes), "--backend", "grid",
               "--seed", "0"]
        for cmd in ([PY, "-m", "ddppo.envs.scenes.scene_gen", "generate", "--out", str(scenes / "gen"),
                     "--num-scenes", "2", "--seed", "0"],
                    [*gen, "--out", str(val), "--episodes-per-scene", "2"],
                    [*gen, "--out", str(episodes), "--episodes-per-scene", "50"]):
            rc, text = run(e, cmd, e.work / "habitat_data.log")
            if rc != 0:
                raise CheckFailed(f"habitat data: exit {rc}: {tail(text)}")
    return ["env.habitat.backend=grid", f"env.habitat.dataset={episodes}", f"env.habitat.scenes_dir={scenes}"]


def hab_small(e: Env) -> list[str]:
    return [*habitat_data(e), "env.num_envs=4", "env.num_workers=0", "rollout.num_steps=16",
            "env.habitat.depth_width=64", "env.habitat.depth_height=64", "env.habitat.max_episode_steps=32",
            "ppo.num_mini_batch=2", "ppo.epochs=1", "checkpoint.interval_updates=1", *SMALL_HB]


def resume_gpu(e: Env) -> str:
    """Train, then resume onto the GPU: optimizer state and every RNG restored (no 'not restored')."""
    config = "configs/pointnav_habitat_cpu.yaml"
    run_dir, _ = trained(e, "resume", 1, config, *hab_small(e), "run.total_env_steps=128", *e.dev())
    _, text = trained(e, "resume", 1, config, *hab_small(e), "run.total_env_steps=256", *e.dev())
    expect(text, r"resumed from .* at update 2 ", "resume")
    if "not restored" in text:
        raise CheckFailed(f"resume: {next(line for line in text.splitlines() if 'not restored' in line)}")
    return f"resumed at update 2, ran to {reached(run_dir, 256)['env_steps']} env steps, nothing 'not restored'"


def eval_export(e: Env) -> str:
    run_dir = e.work / "resume"
    if not (run_dir / "checkpoints").exists():
        raise CheckFailed("no run of resume_gpu to evaluate (it failed or did not run)")
    habitat_data(e)
    rc, text = run(e, [PY, "-m", "ddppo", "eval", str(run_dir), f"env.habitat.dataset={e.work / 'episodes' / 'val'}",
                       "env.habitat.max_episode_steps=32", *e.dev()], e.work / "eval.log")
    if rc != 0:
        raise CheckFailed(f"eval: exit {rc}: {tail(text)}")
    found = expect(text, r"ckpt-\d+ \([\d,]+ env steps\): \d+ episodes", "eval results").group(0)
    out = e.work / "ckpt.0.pth"
    rc, text = run(e, [PY, "-m", "ddppo", "export", str(run_dir), "--format", "habitat-baselines", "-o", str(out),
                       "--force"], e.work / "export.log")
    if rc != 0 or not out.is_file() or out.stat().st_size == 0:
        raise CheckFailed(f"export: exit {rc}: {tail(text)}")
    return f"eval of the resumed run ({found}), export {out.stat().st_size // 1024} KiB"


def deterministic_cnn(e: Env) -> str:
    """run.deterministic=true with depth images through the small CNN (its pooling has a deterministic CUDA
    path, ddppo/model/pooling.py): runs, and two runs end bit-identical."""
    args = [*habitat_data(e), "env.num_envs=4", "env.num_workers=0", "rollout.num_steps=16",
            "env.habitat.depth_width=32", "env.habitat.depth_height=32", "policy.image_encoder=cnn",
            "policy.hidden_size=32", "run.deterministic=true", e.steps(1024, 128), "checkpoint.interval_updates=1000",
            *e.dev()]
    _, _, digest = _twice_identical(e, "deterministic_cnn", "configs/pointnav_habitat.yaml", args)
    return f"2 runs bit-identical ({digest[:12]})"


def habitat_paper_policy(e: Env) -> str:
    """configs/pointnav_habitat.yaml (ResNet50 + LSTM 512) on the grid double: fps and phase shares."""
    small = ["env.num_envs=2", "env.num_workers=0", "rollout.num_steps=16", "env.habitat.depth_width=32",
             "env.habitat.depth_height=32", "policy.hidden_size=32", "policy.resnet_base_width=8"] if e.dry else []
    run_dir, _ = trained(e, "habitat_paper", 1, "configs/pointnav_habitat.yaml", *habitat_data(e), *small,
                         e.steps(3072, 64), "checkpoint.interval_updates=100000", *e.dev())
    return phases(e, run_dir)


def habitat_sim_cuda0(e: Env) -> str:
    rc, text = run(e, [PY, "-m", "ddppo.envs.habitat.check", "--gpu-device-id", "-1" if e.dry else "0"],
                   e.work / "habitat_sim.log")
    if rc == 2:
        return "SKIP: habitat-sim does not import here"
    if rc != 0:
        raise CheckFailed(f"exit {rc}: {tail(text)}")
    return tail(text, 2)
