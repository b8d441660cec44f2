"""Draws the plots of the results pages from the benchmarks' JSON: `python docs/make_plots.py [OUT_DIR]`.

Reads benchmarks/results/*.json and writes PNGs to docs/results/img/ (or OUT_DIR); the PNGs are committed, so the
site needs no benchmark data to build. tests/docs/test_results_pages.py runs this into a temporary folder and
checks that every plot a results page shows is one it makes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
OUT = Path(__file__).resolve().parent / "results" / "img"
COLORS = {"ddppo": "#3b5bdb", "ddppo + overlap_learning": "#15aabf", "habitat-baselines": "#e8590c",
          "hb-ddppo": "#e8590c", "hb-ver": "#f59f00"}
PNG_META = {"Software": None}  # no library version in the file: the same data draws the same bytes


def _load(name: str) -> dict:
    return json.loads((RESULTS / name).read_text())


def _axes(ax, *, xlabel: str = "", ylabel: str = "", title: str = "", title_size: float | None = None,
          ylim: tuple[float, float] | None = None, categories: list[str] | None = None, grid: str | None = "both",
          legend: dict | None = None, **category_style) -> None:
    """The set-up every plot's axes share: labels, a title, y limits, the categories of a bar or strip plot as the
    x ticks at 0, 1, ... (`category_style`: their labels' keyword arguments), a light grid (`grid`: "both", "y"
    or None) and the legend (`legend`: its keyword arguments; None: no legend)."""
    if xlabel:
        ax.set_xlabel(xlabel)
    if ylabel:
        ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title, **({"fontsize": title_size} if title_size else {}))
    if ylim is not None:
        ax.set_ylim(*ylim)
    if categories is not None:
        ax.set_xticks(range(len(categories)))
        ax.set_xticklabels(categories, **category_style)
    if grid:
        ax.grid(alpha=0.3, **({} if grid == "both" else {"axis": grid}))
    if legend is not None:
        ax.legend(**legend)


def _save(plt, fig, path: Path, dpi: int = 100) -> Path:
    """`fig` laid out and written to `path` (no library version in the PNG), then closed."""
    fig.tight_layout()
    fig.savefig(path, dpi=dpi, metadata=PNG_META)
    plt.close(fig)
    return path


def _learning_runs(names: tuple[str, ...]) -> list[dict]:
    runs = []
    for name in names:
        runs.extend(_load(name)["learning"]["runs"])
    return sorted(runs, key=lambda r: (r["side"], r["seed"]))


def _curve(run: dict, metric: str) -> tuple[list[float], list[float]]:
    """(env steps, value) of a run's training curve; ddppo logs `train/<metric>`, habitat-baselines `<metric>`."""
    points = [(p["env_steps"], p.get(f"train/{metric}", p.get(metric))) for p in run["curve"]]
    points = [(x, y) for x, y in points if y is not None]
    return [x for x, _ in points], [y for _, y in points]


def _smooth(ys: list[float], window: int) -> list[float]:
    out, total = [], 0.0
    for i, y in enumerate(ys):
        total += y - (ys[i - window] if i >= window else 0.0)
        out.append(total / min(i + 1, window))
    return out


def _learning_curves(plt, out: Path, names: tuple[str, ...], png: str, version: str) -> Path:
    """Training success and SPL of a habitat-baselines learning comparison, one line per side and seed."""
    runs = _learning_runs(names)
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for ax, metric in zip(axes, ("success", "spl")):
        for run in runs:
            xs, ys = _curve(run, metric)
            window = max(1, len(xs) // 25)  # ddppo logs every update, habitat-baselines every 9k steps
            style = ("-", "--", ":")[(run["seed"] - 1) % 3]
            ax.plot([x / 1e3 for x in xs], _smooth(ys, window), style, color=COLORS[run["side"]], lw=1.4,
                    label=f"{run['side']}, seed {run['seed']}")
        _axes(ax, xlabel="env steps (thousands)", ylabel=f"train {metric} (as each trainer logs it)", ylim=(0, 1))
    axes[0].legend(fontsize=7, loc="upper left")
    fig.suptitle(f"PointNav, SimpleCNN + GRU 512, 64x64 depth, habitat-baselines {version}: training curves, "
                 f"{len({r['seed'] for r in runs})} seeds per trainer", fontsize=10)
    return _save(plt, fig, out / png)


def learning_curves(plt, out: Path) -> Path:
    """Against habitat-baselines 0.2.2's DD-PPO on habitat-sim 0.2.2 (seeds 1-2, then seed 3 in a second run)."""
    return _learning_curves(plt, out, ("habitat_baselines_learning_simplecnn.json",
                                       "habitat_baselines_learning_simplecnn_seed3.json"), "hb_learning_curves.png",
                            "0.2.2")


def learning_curves_03(plt, out: Path) -> Path:
    """Against habitat-baselines 0.3.x's DD-PPO on habitat-sim 0.3.4 (seeds 1-2, then seed 3 in a second run)."""
    names = ("habitat_baselines_03_learning_simplecnn.json", "habitat_baselines_03_learning_simplecnn_seed3.json")
    return _learning_curves(plt, out, names, "hb03_learning_curves.png", "0.3.x")


def _throughput_bars(plt, path: Path, cases: list[tuple[str, str]], sides: list[tuple[str, str]], title: str) -> Path:
    """Median steady steps/s per side (`sides`: the JSON's key, the legend's name) of each case (label, JSON)."""
    fig, ax = plt.subplots(figsize=(8, 3.8))
    width = 0.8 / len(sides)
    for i, (label, name) in enumerate(cases):
        medians = _load(name)["throughput"]["median_steps_per_s"]
        for j, (key, side) in enumerate(sides):
            if key not in medians:
                continue
            x = i + (j - (len(sides) - 1) / 2) * width
            ax.bar(x, medians[key], width, color=COLORS[side], label=side if i == len(cases) - 1 else None)
            ax.text(x, medians[key] + 3, f"{medians[key]:.0f}", ha="center", fontsize=8)
    _axes(ax, ylabel="env steps/s (median of interleaved rounds)", title=title, title_size=10,
          categories=[c for c, _ in cases], grid="y", legend={"fontsize": 8}, fontsize=8)
    return _save(plt, fig, path)


def throughput_bars(plt, out: Path) -> Path:
    """Against habitat-baselines 0.2.2's DD-PPO."""
    cases = [("SimpleCNN 128x128\nquiet machine", "habitat_baselines_throughput_simplecnn_2.json"),
             ("SimpleCNN 128x128\nload 5-7, three sides", "habitat_baselines_throughput_overlap_learning.json"),
             ("ResNet18 + LSTM 512x2\n64x64", "habitat_baselines_throughput_resnet.json")]
    sides = [("ddppo", "ddppo"), ("ddppo+ab", "ddppo + overlap_learning"), ("habitat-baselines", "habitat-baselines")]
    return _throughput_bars(plt, out / "hb_throughput.png", cases, sides,
                            "Throughput on one 2-core CPU machine, one rank, 8 envs (2026-12-01)")


def throughput_bars_03(plt, out: Path) -> Path:
    """Against habitat-baselines 0.3.x's DD-PPO and VER on habitat-sim 0.3.4."""
    cases = [("SimpleCNN + GRU 512\n128x128", "habitat_baselines_03_throughput_simplecnn.json"),
             ("ResNet18 + LSTM 512x2\n64x64", "habitat_baselines_03_throughput_resnet.json")]
    sides = [("ddppo", "ddppo"), ("ddppo+ab", "ddppo + overlap_learning"), ("hb-ddppo", "hb-ddppo"),
             ("hb-ver", "hb-ver")]
    return _throughput_bars(plt, out / "hb03_throughput.png", cases, sides,
                            "habitat-baselines 0.3.x: throughput on one 2-core CPU machine, 8 envs (2026-12-02)")


def habitat_lab_03_tasks(plt, out: Path) -> Path:
    """habitat-lab 0.3.x's PointNav and ObjectNav through `ddppo train`: training success and SPL against env steps,
    and each run's held-out eval (ddppo's evaluator, 95% CI) at its checkpoint's env steps."""
    runs = _load("habitat_lab_03_tasks.json")["runs"]
    fig, axes = plt.subplots(1, len(runs), figsize=(5 * len(runs), 3.8), squeeze=False)
    for ax, run in zip(axes[0], runs):
        for metric, color in (("success", "#3b5bdb"), ("spl", "#15aabf")):
            xs, ys = _curve(run, metric)
            ax.plot([x / 1e3 for x in xs], _smooth(ys, max(1, len(xs) // 25)), color=color, lw=1.4,
                    label=f"train {metric}")
            held = run["eval"]["ddppo"][metric]
            x = run["eval"]["env_steps"] / 1e3
            ax.errorbar([x], [held["mean"]], yerr=[[held["mean"] - held["ci"][0]], [held["ci"][1] - held["mean"]]],
                        fmt="o", color=color, capsize=3, label=f"held-out {metric} (95% CI)")
        _axes(ax, xlabel="env steps (thousands)", title=f"{run['task']} ({run['config']})", title_size=9, ylim=(0, 1))
    axes[0][0].set_ylabel("success / SPL")
    axes[0][0].legend(fontsize=7, loc="upper left")
    fig.suptitle("habitat-lab 0.3.x tasks through ddppo train, habitat-sim 0.3.4, 2-core CPU (2026-12-02)",
                 fontsize=10)
    return _save(plt, fig, out / "habitat_lab_03_tasks.png")


def gridnav_rates(plt, out: Path) -> Path:
    """Raw env stepping vs the rollout phase vs training, per env (`ddppo bench throughput`)."""
    cases = _load("throughput.json")
    fig, ax = plt.subplots(figsize=(7, 3.4))
    kinds = [("raw_env_fps", "raw env", "#adb5bd"), ("rollout_fps", "rollout phase", "#15aabf"),
             ("train_fps", "training", "#3b5bdb")]
    for i, case in enumerate(cases):
        for j, (key, label, color) in enumerate(kinds):
            ax.bar(i + (j - 1) * 0.27, case[key], 0.27, color=color, label=label if i == 0 else None)
    ax.set_yscale("log")
    _axes(ax, ylabel="env steps/s (log)", title="Where the time goes: raw env vs rollout vs training (CPU)",
          title_size=10, categories=[f"{c['env']} ({c['num_envs']} envs)" for c in cases], grid="y",
          legend={"fontsize": 8}, fontsize=8)
    return _save(plt, fig, out / "throughput_gridnav_cartpole.png")


def continuous_control(plt, out: Path) -> Path:
    """Hopper-v5 learning curves, ddppo vs SB3 (benchmarks/peers/mujoco.py), one line per seed."""
    from ddppo.benchmarks.peers.mujoco import draw

    return draw(plt, _load("mujoco_hopper.json")["runs"], out / "continuous_control_hopper.png", PNG_META)


def continuous_control_cleanrl(plt, out: Path) -> Path:
    """Hopper, Walker2d and HalfCheetah learning curves under CleanRL's settings, one line per seed: SB3, ddppo with
    CleanRL's clipped value loss (`ddppo`) and with SB3's unclipped one (`ddppo-ab`, ppo.clip_value_loss=false)."""
    from ddppo.benchmarks.peers.mujoco import draw

    runs = [r for name in ("mujoco_cleanrl.json", "mujoco_cleanrl_vclip.json", "mujoco_cleanrl_vclip_hc.json")
            for r in _load(name)["runs"]]
    return draw(plt, runs, out / "continuous_control_cleanrl.png", PNG_META,
                {"ddppo": "ddppo, value loss clipped (CleanRL)", "ddppo-ab": "ddppo, ppo.clip_value_loss=false (SB3)"})


def continuous_control_300k(plt, out: Path) -> Path:
    """Hopper, Walker2d and HalfCheetah to 300 k env steps under CleanRL's settings, one line per seed: SB3, ddppo
    running SB3's value-loss weight (the final bench) and ddppo with half of it (the first 300 k bench)."""
    from ddppo.benchmarks.peers.mujoco import draw

    half = [dict(r, variant="ddppo-ab") for r in _load("mujoco_cleanrl_300k.json")["runs"] if r["variant"] == "ddppo"]
    return draw(plt, _load("mujoco_cleanrl_300k_final.json")["runs"] + half,
                out / "continuous_control_cleanrl_300k.png", PNG_META,
                {"ddppo": "ddppo, SB3's value-loss weight",
                 "ddppo-ab": "ddppo, half SB3's value-loss weight (first run)"})


def _hopper_mean_bands(plt, runs: list[dict], sides: dict[str, tuple[str, str]], path: Path) -> Path:
    """Hopper-v5 to 300 k env steps, CleanRL's settings: per side (variant -> (label, colour)) the mean over seeds
    of each run's curve, with a band of one standard deviation across seeds (sweeps' curve_stats: the curves
    interpolated onto one env-step grid)."""
    import numpy as np

    from ddppo.benchmarks.peers.mujoco import LAST
    from ddppo.sweep.summary import curve_stats

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for variant, (label, colour) in sides.items():
        curves = [np.asarray(r["result"]["curve"], dtype=float).T for r in runs if r["variant"] == variant]
        x, mean, std = curve_stats([(c[0], c[1]) for c in curves])
        ax.plot(x / 1e3, mean, color=colour, label=f"{label}, mean of {len(curves)} seeds")
        ax.fill_between(x / 1e3, mean - std, mean + std, color=colour, alpha=0.15)
    _axes(ax, xlabel="env steps (thousands)", ylabel=f"return (mean of the last {LAST} episodes)",
          title="Hopper-v5, CleanRL's settings: mean +/- one std across seeds",
          legend={"fontsize": 8, "loc": "upper left"})
    return _save(plt, fig, path)


def _hopper_runs(*names: str) -> list[dict]:
    runs = [r for r in _load("mujoco_cleanrl_300k_final.json")["runs"] if r["task"] == "Hopper-v5"]
    return runs + [r for name in names for r in _load(name)["runs"]]


def continuous_control_hopper_10(plt, out: Path) -> Path:
    """Seeds 1-10 per side, and SB3 with ddppo's timing of the normalisation statistics (seeds 1-8)."""
    runs = _hopper_runs("mujoco_cleanrl_300k_hopper_s6_10.json", "mujoco_hopper_sb3_frozen_stats.json")
    sides = {"sb3": ("sb3", "tab:blue"), "ddppo": ("ddppo", "tab:green"),
             "sb3-frozen-stats": ("sb3-frozen-stats", "tab:grey")}
    return _hopper_mean_bands(plt, runs, sides, out / "continuous_control_hopper_10_seeds.png")


def continuous_control_hopper_20(plt, out: Path) -> Path:
    """Seeds 1-20 of SB3, of ddppo with normalize.update=step (SB3's algorithm step for step) and of ddppo with
    normalize.update=rollout (the default)."""
    runs = _hopper_runs("mujoco_cleanrl_300k_hopper_s6_10.json", "mujoco_hopper_update_step.json",
                        "mujoco_hopper_s11_20.json", "mujoco_hopper_rollout_s11_20.json")
    sides = {"sb3": ("sb3", "tab:blue"), "ddppo-ab": ("ddppo, normalize.update=step", "tab:purple"),
             "ddppo": ("ddppo, normalize.update=rollout", "tab:green")}
    return _hopper_mean_bands(plt, runs, sides, out / "continuous_control_hopper_20_seeds.png")


def preemption_scaling(plt, out: Path) -> Path:
    """The rank simulation (benchmarks/learning/preemption_sim.py): scaling efficiency against ranks (left) and the
    slowest quarter of the scenes' share of the gradient over its intended share against sync_frac at 128 ranks (right)."""
    data = _load("preemption_sim.json")
    cases, paper = data["cases"], data["paper"]
    sigmas = sorted({c["sigma"] for c in cases})
    fig, axes = plt.subplots(len(sigmas), 2, figsize=(11, 3.6 * len(sigmas)), squeeze=False)
    styles = {("contiguous", 0.6): ("tab:orange", "-"), ("contiguous", 1.0): ("tab:orange", ":"),
              ("cost", 0.6): ("tab:blue", "-"), ("cost", 1.0): ("tab:blue", ":")}
    for row, sigma in zip(axes, sigmas):
        mine = [c for c in cases if c["sigma"] == sigma]
        for (placement, frac), (color, ls) in styles.items():
            pts = sorted((c["ranks"], c["efficiency"]) for c in mine
                         if c["placement"] == placement and c["sync_frac"] == frac)
            row[0].plot([p[0] for p in pts], [p[1] for p in pts], color=color, ls=ls, marker="o", ms=3,
                        label=f"placement={placement}, sync_frac={frac}")
        row[0].plot([paper["gpus"]], [paper["efficiency"]], "k*", ms=10, label="DD-PPO paper (107x / 128 GPUs)")
        row[0].set_xscale("log", base=2)
        _axes(row[0], xlabel="ranks", ylabel="scaling efficiency", title=f"scene step times log-normal, sigma {sigma}",
              title_size=10, ylim=(0, 1.05), grid=None, legend={"fontsize": 7})
        for placement, color in (("contiguous", "tab:orange"), ("cost", "tab:blue")):
            pts = sorted((c["sync_frac"], c["slow_sample_ratio"], c["slow_weight_ratio"]) for c in mine
                         if c["placement"] == placement and c["ranks"] == 128)
            row[1].plot([p[0] for p in pts], [p[1] for p in pts], color=color, marker="o", ms=3,
                        label=f"{placement}: samples (no correction)")
            row[1].plot([p[0] for p in pts], [p[2] for p in pts], color=color, ls="--",
                        label=f"{placement}: with rank weighting")
        row[1].axhline(1.0, color="gray", lw=0.8)
        _axes(row[1], xlabel="preemption.sync_frac (128 ranks)", ylabel="slowest 25% of scenes: share / intended",
              ylim=(0, 1.1), grid=None, legend={"fontsize": 7})
    return _save(plt, fig, out / "preemption_scaling.png", dpi=110)


def preemption_bias(plt, out: Path) -> Path:
    """`ddppo bench preemption-bias`: per variant, each seed's greedy success of the fast and the slow scene, and
    the median fps."""
    data = _load("preemption_bias.json")
    variants = [v for v in data["runs"] if data["runs"][v]]
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 3.8))
    for i, v in enumerate(variants):
        runs = list(data["runs"][v].values())
        for j, (scene, color) in enumerate((("scene0", "tab:blue"), ("scene1", "tab:red"))):
            ys = [r["scenes"][scene]["success"] for r in runs]
            xs = [i + (j - 0.5) * 0.25] * len(ys)
            ax.plot(xs, ys, "o", color=color, ms=4, alpha=0.7, label=("fast scene" if j == 0 else "slow scene")
                    if i == 0 else None)
            ax.plot([xs[0] - 0.1, xs[0] + 0.1], [sum(ys) / len(ys)] * 2, color=color, lw=2)
        bx.bar(i, data["summary"][v]["fps_median"], color="tab:gray")
    _axes(ax, ylabel="greedy success (per seed; bar: mean)", categories=variants, grid=None, legend={"fontsize": 8},
          rotation=30, ha="right", fontsize=8)
    _axes(bx, ylabel="env steps / s (median over seeds)", categories=variants, grid=None, rotation=30, ha="right",
          fontsize=8)
    return _save(plt, fig, out / "preemption_bias.png", dpi=110)


def bc_rl(plt, out: Path) -> Path:
    """`ddppo bench bc-rl`: each arm's greedy success per seed (bar: mean), and the fine-tunes' training success
    over their updates, with and without the critic warm-up (shaded: the critic alone, then the actor's ramp)."""
    data = _load("bc_rl.json")
    seeds = list(data["seeds"].values())
    arms = [("bc", "BC alone"), ("rl", "RL alone"), ("bc_rl", "BC -> RL"), ("bc_rl_warmup", "BC -> RL, warm-up")]
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 3.8))
    for i, (arm, _) in enumerate(arms):
        ys = [s[arm]["success"] for s in seeds]
        ax.plot([i] * len(ys), ys, "o", color="tab:blue", ms=4, alpha=0.7)
        ax.plot([i - 0.2, i + 0.2], [sum(ys) / len(ys)] * 2, color="tab:blue", lw=2)
    _axes(ax, ylabel="greedy success, 200 episodes", categories=[a[1] for a in arms], grid=None, fontsize=8,
          title=f"gridnav, {data['args']['budget']:,} env steps per arm", title_size=10)
    critic, actor = data["args"]["warmup"]
    bx.axvspan(0.5, critic + 0.5, color="#dee2e6", lw=0)
    bx.axvspan(critic + 0.5, critic + actor + 0.5, color="#f1f3f5", lw=0)
    for arm, color in (("bc_rl", "tab:orange"), ("bc_rl_warmup", "tab:green")):
        for k, s in enumerate(seeds):
            ys = [y if y is not None else float("nan") for y in s[f"{arm}_success"]]
            bx.plot(range(1, len(ys) + 1), ys, color=color, lw=1, alpha=0.8,
                    label=dict(arms)[arm] if k == 0 else None)
    _axes(bx, xlabel="fine-tuning update", ylabel="training success (sampled actions)", grid="y",
          legend={"fontsize": 8}, fontsize=8)
    return _save(plt, fig, out / "bc_rl_gridnav.png", dpi=110)


def side_by_side_sb3(plt, out: Path) -> Path:
    """`ddppo bench atari` and `ddppo bench minigrid` (3 seeds each): both sides' return against env steps at each
    rollout's end, a line per seed (SB3: its last 100 episodes; ddppo: the episodes of its last log.window
    updates)."""
    cases = [("atari_breakout_3seeds.json", "Breakout, RL Zoo's settings", "game score"),
             ("minigrid_doorkey5x5_3seeds.json", "MiniGrid DoorKey-5x5, rl-starter-files' settings",
              "return")]
    fig, axes = plt.subplots(1, len(cases), figsize=(11, 3.6))
    for ax, (name, title, ylabel) in zip(axes, cases):
        data = _load(name)
        for side, color in (("ddppo", COLORS["ddppo"]), ("sb3", "#2b8a3e")):
            runs = [r for r in data["runs"] if r["side"] == side]
            for k, run in enumerate(runs):
                xs = [x for x, y in run["curve"] if y is not None]
                ys = [y for _, y in run["curve"] if y is not None]
                ax.plot(xs, ys, color=color, lw=1, alpha=0.75, label=f"{side} ({len(runs)} seeds)" if k == 0 else None)
        _axes(ax, xlabel="env steps", ylabel=ylabel, title=f"{title}, {data['budget']:,} steps", title_size=10,
              legend={"fontsize": 8})
    return _save(plt, fig, out / "side_by_side_sb3.png", dpi=110)


def atari_breakout_500k(plt, out: Path) -> Path:
    """One ddppo run of configs/atari.yaml on Breakout to 500k env steps: the game score (episodes of the last 20
    updates) against env steps."""
    data = _load("atari_breakout_500k.json")
    xs = [x for x, y in data["curve"] if y is not None]
    ys = [y for _, y in data["curve"] if y is not None]
    fig, ax = plt.subplots(figsize=(6, 3.4))
    ax.plot(xs, ys, color=COLORS["ddppo"], lw=1.2)
    _axes(ax, xlabel="env steps", ylabel="game score", title_size=10,
          title=f"ddppo, Breakout, configs/atari.yaml to {data['budget']:,} steps (seed {data['seed']})")
    return _save(plt, fig, out / "atari_breakout_500k.png", dpi=110)


def make_all(out: Path = OUT) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    return [learning_curves(plt, out), learning_curves_03(plt, out), throughput_bars(plt, out),
            throughput_bars_03(plt, out), habitat_lab_03_tasks(plt, out), gridnav_rates(plt, out),
            continuous_control(plt, out), continuous_control_cleanrl(plt, out), continuous_control_300k(plt, out),
            continuous_control_hopper_10(plt, out), continuous_control_hopper_20(plt, out),
            preemption_scaling(plt, out), preemption_bias(plt, out), bc_rl(plt, out), side_by_side_sb3(plt, out),
            atari_breakout_500k(plt, out)]


if __name__ == "__main__":
    for path in make_all(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT):
        sys.stdout.write(f"wrote {path}\n")
