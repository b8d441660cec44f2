"""`ddppo bench bc-rl`: PIRLNav's comparison on gridnav: behaviour cloning alone, RL alone, and BC -> RL with and
without the critic warm-up, at the same total env-step budget, over seeds; and the fine-tunes' success over their
first updates (the warm-up's effect on the early drop).

    ddppo bench bc-rl [--seeds 1 2 3] [--budget 300000] [--episodes 256] [--warmup 10 10] [--dir DIR] [--out FILE]

Every arm spends `--budget` env steps: the recording's steps count against the BC arms (BC alone spends them on
recording only; BC -> RL fine-tunes with what is left). Each arm is the real CLI (`ddppo record`, `ddppo imitate`,
`ddppo train`, `ddppo eval` on 200 held-out episodes). The fine-tunes start from the clone with `ppo.reset_critic`;
"warm-up" adds `ppo.critic_warmup_updates` and `ppo.actor_warmup_updates` (--warmup N M). Printed: success and SPL
per arm (mean and min-max over seeds) and, per fine-tune arm, train/success of its first updates (mean over seeds);
all of it written as JSON. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

NAME = "bc-rl"
HELP = ("gridnav at one env-step budget: BC alone, RL alone, BC -> RL with and without the critic warm-up, "
        "over seeds (PIRLNav's comparison)")

ARMS = ("bc", "rl", "bc_rl", "bc_rl_warmup")


def cli(*args: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "ddppo", *args], capture_output=True, text=True,
                          env={**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")})
    if proc.returncode != 0:
        raise SystemExit(f"ddppo bench bc-rl: ddppo {' '.join(args)} failed: {proc.stderr.strip()[-800:]}")


def evaluate(run_dir: Path) -> dict:
    cli("eval", str(run_dir), "eval.num_episodes=200", "log.level=WARNING", "--force")
    newest = max((run_dir / "eval").glob("ckpt-*.json"), key=lambda p: int(p.stem.split("-")[1]))
    metrics = json.loads(newest.read_text())["metrics"]
    return {k: metrics[k]["mean"] if isinstance(metrics[k], dict) else metrics[k] for k in ("success", "spl")}


def success_curve(run_dir: Path) -> list[float | None]:
    """train/success of every update (log.window=1: that update's finished episodes, sampled actions)."""
    rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [r.get("train/success") for r in rows]


def one_seed(seed: int, args: argparse.Namespace, work: Path) -> dict:
    common = [f"run.seed={seed}", "log.level=WARNING", "log.window=1"]
    data = work / f"demos-{seed}"
    cli("record", "gridnav", *common, "--episodes", str(args.episodes), "--out", str(data))
    recorded = json.loads((data / "manifest.json").read_text())["steps"]
    bc = work / f"bc-{seed}"
    cli("imitate", "gridnav", *common, f"imitation.data={data}", f"run.dir={bc}",
        f"imitation.updates={args.bc_updates}")
    clone = max((bc / "checkpoints").glob("ckpt-*.pt"), key=lambda p: int(p.stem.split("-")[1]))
    out = {"recorded_steps": recorded, "bc": evaluate(bc)}
    rl = work / f"rl-{seed}"
    cli("train", "gridnav", *common, f"run.dir={rl}", f"run.total_env_steps={args.budget}")
    out["rl"] = evaluate(rl)
    n, m = args.warmup
    for arm, extra in (("bc_rl", []), ("bc_rl_warmup", [f"ppo.critic_warmup_updates={n}",
                                                        f"ppo.actor_warmup_updates={m}"])):
        run = work / f"{arm}-{seed}"
        cli("train", "gridnav", *common, f"run.dir={run}", f"run.total_env_steps={args.budget - recorded}",
            f"checkpoint.path={clone}", "ppo.reset_critic=true", *extra)
        out[arm] = evaluate(run)
        out[f"{arm}_success"] = success_curve(run)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="ddppo bench bc-rl", description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--budget", type=int, default=300_000, help="env steps per arm (recording included)")
    ap.add_argument("--episodes", type=int, default=256, help="expert episodes recorded")
    ap.add_argument("--bc-updates", type=int, default=300)
    ap.add_argument("--warmup", type=int, nargs=2, default=[10, 10], metavar=("CRITIC", "ACTOR"),
                    help="ppo.critic_warmup_updates and ppo.actor_warmup_updates of the warm-up arm")
    ap.add_argument("--dir", default="", help="working folder (default: a temporary one)")
    ap.add_argument("--out", default="results/bc-rl.json")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(dir=args.dir or None) as tmp:
        seeds = {s: one_seed(s, args, Path(tmp)) for s in args.seeds}
    print(f"gridnav, {args.budget} env steps per arm, {len(seeds)} seeds, {args.episodes} expert episodes")
    print(f"{'arm':14} {'success':>22} {'spl':>22}")
    for arm in ARMS:
        cells = []
        for key in ("success", "spl"):
            v = [seeds[s][arm][key] for s in seeds]
            cells.append(f"{statistics.mean(v):.3f} ({min(v):.3f}-{max(v):.3f})")
        print(f"{arm:14} {cells[0]:>22} {cells[1]:>22}")
    for arm in ("bc_rl", "bc_rl_warmup"):
        first = args.warmup[0] + args.warmup[1] + 5
        rows = list(zip(*[seeds[s][f"{arm}_success"][:first] for s in seeds]))
        means = [statistics.mean([x for x in r if x is not None]) if any(x is not None for x in r) else float("nan")
                 for r in rows]
        print(f"{arm} train/success, first updates: " + " ".join(f"{m:.2f}" for m in means))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"args": vars(args), "seeds": seeds}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
