"""Continuous control side by side: ddppo against stable-baselines3 PPO, on gymnasium MuJoCo tasks (needs
`pip install mujoco` and the `bench` extra), under one of two published settings (`--settings`):

    zoo       RL Zoo's tuned hyperparameters per task (one env of 512 steps, small minibatches, ReLU 256-256,
              log-std -2, no orthogonal init)
    cleanrl   CleanRL's ppo_continuous_action.py defaults, the same for every task (one env of 2048 steps, 32
              minibatches of 64, 10 epochs, lr 3e-4 annealed to 0, Tanh 64-64, orthogonal init, log-std 0),
              with SB3's value loss on both sides: unclipped, weighted as SB3 weighs it (sb3_value_coef)

Every (task, seed, variant) is one job; jobs run in that order, `--jobs` at a time (each in a process of its own
with one torch thread, so a seed's variants run side by side under the same machine noise):

    sb3           SB3 PPO with the settings, VecNormalize on observations and rewards
    ddppo         configs/mujoco.yaml with the settings: SB3's layout (one env, minibatches of batch_size samples
                  drawn at random: ppo.minibatch_split=sample), observation and reward normalisation, a critic of
                  its own, per-minibatch advantage normalisation
    ddppo-env     the same pieces, minibatches split by env: n_steps / batch_size envs of batch_size steps, one
                  env per minibatch (GAE over batch_size-step horizons)
    ddppo-before  ddppo-env with the new pieces off: normalize.obs=off normalize.reward=off policy.critic=shared
                  ppo.normalize_advantage_per=update (what ddppo did before issue 34)
    ddppo-ab      ddppo with the overrides of `--ab` on top (an option measured before it becomes a default)

Figures: the final return (mean of the last 20 finished episodes' unscaled returns), the wall time of the
training call, and a learning curve (env step, mean of the last 20 episodes) per run. `plot(json, png)` draws the
curves. Entry point for the CLI: `main(argv)` (`ddppo bench mujoco --tasks ... --seeds ... --budget ...`).
"""

from __future__ import annotations

import json
import logging
import statistics
import time
from collections import deque
from pathlib import Path
from typing import Any

import torch

from ddppo.rollout.observers import EpisodeObserver, Stored

NAME = "mujoco"
HELP = "ddppo vs stable-baselines3 (RL Zoo or CleanRL settings) on gymnasium MuJoCo tasks"

LAST = 20  # episodes in the final return
VARIANTS = ("sb3", "ddppo", "ddppo-env", "ddppo-before", "ddppo-ab")
BEFORE = ["normalize.obs=off", "normalize.reward=off", "policy.critic=shared", "ppo.normalize_advantage_per=update"]

# RL Zoo (hyperparams/ppo.yml, the MuJoCo v3/v4 entries; all with normalize: true, n_envs: 1, n_steps: 512,
# policy_kwargs log_std_init=-2, ortho_init=False, ReLU, net_arch pi=vf=[256, 256])
ZOO: dict[str, dict[str, float]] = {
    "Hopper-v5": dict(batch_size=32, gamma=0.999, learning_rate=9.80828e-05, ent_coef=0.00229519, clip_range=0.2,
                      n_epochs=5, gae_lambda=0.99, max_grad_norm=0.7, vf_coef=0.835671),
    "Walker2d-v5": dict(batch_size=32, gamma=0.99, learning_rate=5.05041e-05, ent_coef=0.000585045, clip_range=0.1,
                        n_epochs=20, gae_lambda=0.95, max_grad_norm=1.0, vf_coef=0.871923),
    "HalfCheetah-v5": dict(batch_size=64, gamma=0.98, learning_rate=2.0633e-05, ent_coef=0.000401762,
                           clip_range=0.1, n_epochs=20, gae_lambda=0.92, max_grad_norm=0.8, vf_coef=0.58096),
}
# CleanRL's ppo_continuous_action.py defaults, which its published MuJoCo results use for every task
# (num_steps 2048, num_minibatches 32, update_epochs 10, anneal_lr, clip_vloss, norm_adv per minibatch)
CLEANRL: dict[str, float] = dict(batch_size=64, gamma=0.99, learning_rate=3e-4, ent_coef=0.0, clip_range=0.2,
                                 n_epochs=10, gae_lambda=0.95, max_grad_norm=0.5, vf_coef=0.5)
# what differs between the two settings beyond the PPO numbers: rollout length, network, initialisation, schedule
MODEL = {
    "zoo": dict(n_steps=512, width=256, activation="relu", log_std=-2.0, ortho=False, anneal=False,
                clip_value=False),
    # clip_value: CleanRL clips the value loss; SB3, the peer, does not (its clip_range_vf is another rule), and on
    # ddppo clipping it cost 0.83x -> 1.27x (Hopper) and 0.78x -> 0.93x (Walker2d) of SB3's return
    # (benchmarks/results/mujoco_cleanrl*.json): both sides run SB3's unclipped value loss
    "cleanrl": dict(n_steps=2048, width=64, activation="tanh", log_std=0.0, ortho=True, anneal=True,
                    clip_value=False),
}
SETTINGS = tuple(MODEL)
TASKS = tuple(ZOO)


def hyper(task: str, settings: str) -> dict[str, float]:
    return dict(ZOO[task]) if settings == "zoo" else dict(CLEANRL)


def sb3_value_coef(vf_coef: float) -> float:
    """ddppo's ppo.value_coef for SB3's vf_coef: SB3 weighs the mean squared error (`vf_coef * F.mse_loss`),
    ddppo half of it (`value_coef * 0.5 * mse`, as CleanRL and habitat-baselines), so the same objective takes twice
    the number. Both sides run SB3's objective with the settings' vf_coef."""
    return 2.0 * float(vf_coef)


def env_split_overrides(task: str, settings: str = "zoo") -> list[str]:
    """The rollout as envs x batch_size steps, one env per minibatch (minibatches split by env)."""
    steps = int(hyper(task, settings)["batch_size"])
    envs = int(MODEL[settings]["n_steps"]) // steps
    return [f"env.num_envs={envs}", f"rollout.num_steps={steps}", "ppo.minibatch_split=env",
            f"ppo.num_mini_batch={envs}"]


def ddppo_overrides(task: str, settings: str = "zoo") -> list[str]:
    """configs/mujoco.yaml set to the settings' values: SB3's layout, one env of n_steps steps cut into
    n_steps / batch_size minibatches of random samples."""
    z, m = hyper(task, settings), MODEL[settings]
    n_steps = int(m["n_steps"])
    return [f"env.name=gym:{task}", "env.num_envs=1", f"rollout.num_steps={n_steps}", "ppo.minibatch_split=sample",
            f"ppo.num_mini_batch={n_steps // int(z['batch_size'])}", f"ppo.lr={z['learning_rate']}",
            f"ppo.lr_schedule={'linear' if m['anneal'] else 'constant'}", f"ppo.gamma={z['gamma']}",
            f"ppo.gae_lambda={z['gae_lambda']}", f"ppo.clip={z['clip_range']}", f"ppo.epochs={int(z['n_epochs'])}",
            f"ppo.entropy_coef={z['ent_coef']}", f"ppo.value_coef={sb3_value_coef(z['vf_coef'])}",
            f"ppo.max_grad_norm={z['max_grad_norm']}", f"ppo.clip_value_loss={str(m['clip_value']).lower()}",
            f"policy.hidden_size={m['width']}", f"policy.activation={m['activation']}",
            f"policy.init_log_std={m['log_std']}", f"policy.init={'orthogonal' if m['ortho'] else 'torch'}"]


class Episodes:
    """Finished episodes' (env step, return), and the curve: mean of the last LAST at each episode."""

    def __init__(self) -> None:
        self.rows: list[tuple[int, float]] = []
        self.recent: deque = deque(maxlen=LAST)

    def add(self, step: int, ret: float) -> None:
        self.recent.append(ret)
        self.rows.append((step, statistics.fmean(self.recent)))

    def summary(self, seconds: float, steps: int) -> dict[str, Any]:
        curve = self.rows[:: max(1, len(self.rows) // 200)] + self.rows[-1:]
        return {"final_return": statistics.fmean(self.recent) if self.recent else None, "episodes": len(self.rows),
                "seconds": seconds, "fps": steps / seconds, "curve": curve}


def sb3_ppo(env: Any, task: str, seed: int, settings: str, n_steps: int | None = None) -> Any:
    """SB3's PPO with the settings' values on `env` (`n_steps`: another rollout length than the settings')."""
    from stable_baselines3 import PPO

    z, m = hyper(task, settings), MODEL[settings]
    lr = float(z.pop("learning_rate"))
    activation = torch.nn.Tanh if m["activation"] == "tanh" else torch.nn.ReLU
    # SB3's clip_range_vf clips the prediction (not CleanRL's max of clipped and unclipped losses): left at its
    # default, off, as SB3 users run it
    return PPO("MlpPolicy", env, n_steps=int(n_steps or m["n_steps"]), seed=seed, device="cpu", verbose=0,
               learning_rate=(lambda left: lr * left) if m["anneal"] else lr,
               policy_kwargs=dict(log_std_init=m["log_std"], ortho_init=m["ortho"], activation_fn=activation,
                                  net_arch=dict(pi=[m["width"]] * 2, vf=[m["width"]] * 2)),
               **{k: (int(v) if k in ("batch_size", "n_epochs") else v) for k, v in z.items()})


def run_sb3(task: str, seed: int, budget: int, settings: str = "zoo") -> dict[str, Any]:
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    z = hyper(task, settings)
    episodes = Episodes()

    class Watch(BaseCallback):
        def _on_step(self) -> bool:
            for info in self.locals["infos"]:
                if "episode" in info:  # Monitor, inside VecNormalize: the unscaled return
                    episodes.add(self.num_timesteps, float(info["episode"]["r"]))
            return True

    torch.set_num_threads(1)  # as ddppo (run.torch_threads=1): on a shared machine more threads only contend
    env = VecNormalize(make_vec_env(task, n_envs=1, seed=seed), gamma=z["gamma"])
    model = sb3_ppo(env, task, seed, settings)
    t0 = time.perf_counter()
    model.learn(total_timesteps=budget, callback=Watch())
    seconds = time.perf_counter() - t0
    env.close()
    return episodes.summary(seconds, budget)


def run_ddppo(task: str, seed: int, budget: int, extra: list[str], settings: str = "zoo") -> dict[str, Any]:
    from ddppo.config import load_config
    from ddppo.config.loading import shipped_config
    from ddppo.distributed import init_distributed
    from ddppo.train.builder import Trainer

    run_dir = Path(f"/tmp/ddppo-bench-mujoco-{seed}-{time.time_ns()}")
    cfg = load_config(str(shipped_config("mujoco")),
                      ddppo_overrides(task, settings) + extra + [f"run.seed={seed}", f"run.total_env_steps={budget}",
                                                       f"run.dir={run_dir}", "log.tensorboard=false",
                                                       "checkpoint.interval_updates=100000"])
    torch.set_num_threads(1)
    episodes = Episodes()
    ctx = init_distributed("gloo", "cpu", 60, 60, cfg.run.seed)
    try:
        trainer = Trainer(cfg, ctx)
        try:
            _watch(trainer, episodes)
            t0 = time.perf_counter()
            trainer.train()
            seconds = time.perf_counter() - t0
            steps = trainer.progress.env_steps
        finally:
            trainer.close()
    finally:
        ctx.close()
    return episodes.summary(seconds, steps)


class _Returns(EpisodeObserver):
    """Records every finished episode's unscaled return (the envs' own) with the env step it ended at."""

    def __init__(self, trainer: Any, episodes: Episodes):
        self.trainer, self.episodes = trainer, episodes

    def finished(self, found: list, at: Stored) -> None:
        for e in found:
            self.episodes.add(self.trainer.progress.env_steps + at.env_steps, float(e.metrics["return"]))


def _watch(trainer: Any, episodes: Episodes) -> None:
    trainer.collector.observers.append(_Returns(trainer, episodes))


def _spread(values: list[float | None]) -> str:
    found = [v for v in values if v is not None]
    if not found:
        return "-"
    if len(found) == 1:
        return f"{found[0]:.0f}"
    return f"{statistics.fmean(found):.0f} +/- {statistics.stdev(found):.0f}"


def table(rows: list[dict[str, Any]]) -> list[str]:
    lines = [f"{'task':>15} {'seed':>5} {'variant':>13} {'final return':>13} {'episodes':>9} {'seconds':>8}"]
    for r in rows:
        x = r["result"]
        ret = "-" if x["final_return"] is None else f"{x['final_return']:.1f}"
        lines.append(f"{r['task']:>15} {r['seed']:>5} {r['variant']:>13} {ret:>13} {x['episodes']:>9} "
                     f"{x['seconds']:>8.0f}")
    for task in dict.fromkeys(r["task"] for r in rows):
        for variant in dict.fromkeys(r["variant"] for r in rows):
            mine = [r["result"] for r in rows if r["task"] == task and r["variant"] == variant]
            lines.append(f"{task} {variant}: final return {_spread([m['final_return'] for m in mine])}, "
                         f"seconds {_spread([m['seconds'] for m in mine])} ({len(mine)} seeds)")
    return lines


def run_job(job: tuple[str, int, str, int, str, list[str]]) -> dict[str, Any]:
    """One (task, seed, variant) run; the unit `--jobs` runs at a time, each in a fresh process."""
    task, seed, variant, budget, settings, ab = job
    logging.getLogger("ddppo").setLevel(logging.WARNING)
    if variant == "sb3":
        result = run_sb3(task, seed, budget, settings)
    else:
        extra = {"ddppo-env": env_split_overrides(task, settings),
                 "ddppo-before": env_split_overrides(task, settings) + BEFORE, "ddppo-ab": ab}.get(variant, [])
        result = run_ddppo(task, seed, budget, extra, settings)
    return {"task": task, "seed": seed, "variant": variant, "result": result}


def run(tasks: list[str], seeds: list[int], budget: int, variants: list[str], out: str, settings: str = "zoo",
        jobs: int = 1, ab: list[str] | None = None) -> int:
    """Every (task, seed), each variant in turn, `jobs` at a time; the JSON is rewritten after every run (a
    cut-short bench keeps what it measured)."""
    import multiprocessing
    import sys

    from ddppo.benchmarks.common import report
    from ddppo.files import atomic_write

    logging.getLogger("ddppo").setLevel(logging.WARNING)
    unknown = ([t for t in tasks if t not in TASKS] + [v for v in variants if v not in VARIANTS]
               + ([settings] if settings not in SETTINGS else []))
    if unknown:
        sys.stderr.write(f"ddppo bench mujoco: unknown {unknown}; tasks: {', '.join(TASKS)}; variants: "
                         f"{', '.join(VARIANTS)}; settings: {', '.join(SETTINGS)}\n")
        return 2
    if "ddppo-ab" in variants and not ab:
        sys.stderr.write("ddppo bench mujoco: variant ddppo-ab needs --ab OVERRIDE... (e.g. --ab "
                         "ppo.clip_value_loss=false)\n")
        return 2
    rows: list[dict[str, Any]] = []
    meta = {"budget": budget, "seeds": seeds, "tasks": tasks, "variants": variants, "last_episodes": LAST,
            "settings": settings, "jobs": jobs, "hyperparameters": {t: hyper(t, settings) for t in tasks},
            "model": MODEL[settings], "before_overrides": BEFORE, "ab_overrides": ab or [],
            "ddppo_overrides": {t: ddppo_overrides(t, settings) for t in tasks}}
    todo = [(t, s, v, budget, settings, list(ab or [])) for t in tasks for s in seeds for v in variants]
    with multiprocessing.get_context("spawn").Pool(jobs, maxtasksperchild=1) as pool:
        for row in pool.imap(run_job, todo):
            rows.append(row)
            print("\n".join(table(rows[-1:])[1:2]), flush=True)  # noqa: T201 - progress
            atomic_write(out, json.dumps({"meta": meta, "runs": rows}, indent=1))
    return report(table(rows), {"meta": meta, "runs": rows}, out)


def plot(results: str, png: str) -> None:
    """Learning curves from a results JSON into `png` (docs/make_plots.py draws the results page's plot)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    draw(plt, json.loads(Path(results).read_text())["runs"], Path(png))


def draw(plt: Any, runs: list[dict[str, Any]], path: Path, metadata: dict | None = None,
         labels: dict[str, str] | None = None) -> Path:
    """The mean of the last LAST episodes against env steps: one panel per task, one colour per variant (named in
    the legend by `labels`, else by the variant), one line per seed."""
    tasks = list(dict.fromkeys(r["task"] for r in runs))
    colours = {"sb3": "tab:blue", "ddppo": "tab:green", "ddppo-env": "tab:orange", "ddppo-before": "tab:red",
               "ddppo-ab": "tab:purple"}
    fig, axes = plt.subplots(1, len(tasks), figsize=(7 * len(tasks), 4.2), squeeze=False)
    for ax, task in zip(axes[0], tasks):
        shown = set()
        for r in (r for r in runs if r["task"] == task and r["result"]["curve"]):
            curve = r["result"]["curve"]
            ax.plot([c[0] for c in curve], [c[1] for c in curve], color=colours.get(r["variant"]), alpha=0.8,
                    label=None if r["variant"] in shown else (labels or {}).get(r["variant"], r["variant"]))
            shown.add(r["variant"])
        ax.set_title(f"{task}: one line per seed")
        ax.set_xlabel("env steps")
        ax.set_ylabel(f"return (mean of the last {LAST} episodes)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100, metadata=metadata)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    """`ddppo bench mujoco [--tasks ...] [--seeds ...] [--budget N] [--variants ...] [--settings S] [--jobs N]
    [--out JSON]`, or
    `--plot RESULTS_JSON PNG` to draw the learning curves of a results file."""
    import argparse

    p = argparse.ArgumentParser(prog="ddppo bench mujoco", description=__doc__.splitlines()[0])
    p.add_argument("--tasks", nargs="+", default=["Hopper-v5"], help=f"of {', '.join(TASKS)}")
    p.add_argument("--settings", default="zoo", help=f"of {', '.join(SETTINGS)}: whose published hyperparameters")
    p.add_argument("--jobs", type=int, default=1, help="runs at once, each a process with one torch thread")
    p.add_argument("--ab", nargs="+", default=[], metavar="OVERRIDE", help="variant ddppo-ab: ddppo with these too")
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    p.add_argument("--budget", type=int, default=100_000, help="env steps per run (both trainers)")
    p.add_argument("--variants", nargs="+", default=list(VARIANTS), help=f"of {', '.join(VARIANTS)}")
    p.add_argument("--out", default="results/mujoco.json")
    p.add_argument("--plot", nargs=2, metavar=("RESULTS_JSON", "PNG"), help="only draw the learning curves")
    a = p.parse_args(argv)
    if a.plot:
        plot(*a.plot)
        return 0
    return run(a.tasks, a.seeds, a.budget, a.variants, a.out, a.settings, a.jobs, a.ab)

