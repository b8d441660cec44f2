"""`ddppo bench precision`: update time of image policies, fp32 vs bf16 vs bf16 + torch.compile, side by side.

    ddppo bench precision [--encoders cnn resnet18 resnet18-frozen vit vit-frozen] [--cases fp32 bf16 ...]
                          [--rounds 2] [--updates 6] [--warmup 2] [--device cpu|cuda] [--out FILE] [OVERRIDE ...]

The real trainer (in this process, one rank, run.torch_threads=1 unless overridden) learns the camera gridnav
(env.gridnav.camera=rgb, a 64x64 first-person colour image and the goal vector) with each image encoder and a GRU,
once per (encoder, case), everything interleaved over rounds. The encoders (`--encoders`):

    cnn               policy.image_encoder=cnn (ddppo's small conv net, on the 64x64 image)
    resnet18          torchvision:resnet18, trained (the image resized to its 224x224 input)
    resnet18-frozen   the same, policy.freeze_encoder=true, its weights a random init saved to a temp file
    vit               timm:vit_tiny_patch16_224, trained (224x224 input)
    vit-frozen        the same, frozen, weights from a temp file

The library ones need the `vision` extra. The cases (`--cases`):

    fp32            run.precision=fp32
    bf16            run.precision=bf16
    bf16+compile    run.precision=bf16 run.compile=true
    bf16 act/fp32   bf16 acting, fp32 learning (the numerical-staleness case: not a config, set on the updater)

Per update (the first `--warmup` updates left out: compilation, allocator warm-up), from metrics.jsonl: acting
seconds (perf/policy_forward_s: the policy's forward at every step, bootstraps included), learning seconds
(forward/backward + all-reduce + optimiser), the update's wall time, and loss/ratio_dev_start and
loss/clip_fraction_start (the acting vs learning gap before the first optimiser step). Medians over every
measured update of every round; speed-ups against fp32 of the same encoder in the same run. The env's own step
time is the same in every case and is not in either column.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path

NAME = "precision"
HELP = ("an image policy's acting and learning time on the camera gridnav, fp32 vs bf16 vs bf16 + "
        "torch.compile, for the CNN and library encoders trained and frozen (--encoders), and the acting vs "
        "learning log-prob gap (run.precision, run.compile)")

LEARN = ("learn_forward_backward", "allreduce", "optimizer")
CASES = {  # name -> (overrides, learning precision when it differs from acting)
    "fp32": (["run.precision=fp32"], None),
    "bf16": (["run.precision=bf16"], None),
    "bf16+compile": (["run.precision=bf16", "run.compile=true"], None),
    "bf16 act/fp32 learn": (["run.precision=bf16"], "fp32"),
}
VIT = "timm:vit_tiny_patch16_224"
ENCODERS = {  # name -> (policy.image_encoder, frozen with weights from a file)
    "cnn": ("cnn", False),
    "resnet18": ("torchvision:resnet18", False),
    "resnet18-frozen": ("torchvision:resnet18", True),
    "vit": (VIT, False),
    "vit-frozen": (VIT, True),
}
ENV = ["env.name=gridnav", "env.gridnav.camera=rgb", "env.gridnav.camera_size=64"]


def save_weights(encoder: str, path: Path) -> None:
    """A random init of the library's own model, saved as a state dict (what a user would load)."""
    import torch

    from ddppo.model.pretrained import import_library

    library, name = encoder.split(":", 1)
    torch.manual_seed(0)
    if library == "torchvision":
        model = import_library("torchvision").models.get_model(name, weights=None)
    elif library == "timm":
        model = import_library("timm").create_model(name, pretrained=False)
    else:
        raise ValueError(f"no weights maker for {encoder}")
    torch.save(model.state_dict(), path)


def encoder_overrides(name: str, work: Path) -> list[str]:
    """The policy overrides of encoder `name` (its weights file written into `work` once, for frozen ones)."""
    encoder, frozen = ENCODERS[name]
    if not frozen:
        return [f"policy.image_encoder={encoder}"]
    weights = work / f"{encoder.replace(':', '_')}.pt"
    if not weights.is_file():
        save_weights(encoder, weights)
    return [f"policy.image_encoder={encoder}", f"policy.encoder_weights={weights}", "policy.freeze_encoder=true"]


def run_case(overrides: list[str], learning: str | None, run_dir: Path) -> list[dict]:
    """Train one case in this process; its metrics.jsonl rows."""
    from ddppo.config import load_config
    from ddppo.distributed import read_launch, run_in_process_group
    from ddppo.train.builder import Trainer

    cfg = load_config(None, [f"run.dir={run_dir}", "log.tensorboard=false", "checkpoint.interval_updates=100000",
                             *overrides])

    def body(ctx) -> int:
        trainer = Trainer(cfg, ctx)
        try:
            if learning is not None:
                trainer.updater.precision = learning
            return trainer.train()
        finally:
            trainer.close()

    if run_in_process_group(cfg, read_launch(), body) != 0:
        raise SystemExit(f"ddppo bench precision: training {' '.join(overrides)} failed")
    return [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]


def figures(rows: list[dict]) -> dict[str, float]:
    acting = [r["perf/policy_forward_s"] for r in rows]
    learning = [sum(r.get(f"perf/{p}_s", 0.0) for p in LEARN) for r in rows]
    return {"acting_s": statistics.median(acting), "learning_s": statistics.median(learning),
            "acting_plus_learning_s": statistics.median(a + b for a, b in zip(acting, learning)),
            "update_s": statistics.median(r["perf/update_s"] for r in rows),
            "ratio_dev_start": statistics.mean(r["loss/ratio_dev_start"] for r in rows),
            "clip_fraction_start": statistics.mean(r["loss/clip_fraction_start"] for r in rows),
            "updates": len(rows)}


def table(results: dict[str, dict[str, dict]]) -> None:
    """Print one row per (encoder, case), with its speed-ups against that encoder's fp32 (added to `results`)."""
    print(f"{'encoder':16s} {'case':20s} {'acting s':>9s} {'learning s':>10s} {'act+learn s':>11s} {'update s':>9s} "
          f"{'x fp32 (act, learn, both)':>26s} {'ratio_dev_start':>15s} {'clip_frac_start':>15s}")
    for encoder, cases in results.items():
        fp32 = cases.get("fp32")
        for name, f in cases.items():
            if fp32 is not None:
                f["speedup"] = {k: fp32[k] / f[k] for k in ("acting_s", "learning_s", "acting_plus_learning_s")}
            speed = ("{acting_s:.2f}, {learning_s:.2f}, {acting_plus_learning_s:.2f}".format(**f["speedup"])
                     if "speedup" in f else "")
            print(f"{encoder:16s} {name:20s} {f['acting_s']:9.3f} {f['learning_s']:10.3f} "
                  f"{f['acting_plus_learning_s']:11.3f} {f['update_s']:9.3f} {speed:>26s} "
                  f"{f['ratio_dev_start']:15.2e} {f['clip_fraction_start']:15.4f}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="ddppo bench precision", description=__doc__.split("\n\n")[0])
    ap.add_argument("--encoders", nargs="+", default=list(ENCODERS), choices=list(ENCODERS), metavar="ENCODER",
                    help=f"which image encoders ({', '.join(ENCODERS)}; all but cnn need the vision extra)")
    ap.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES), metavar="CASE",
                    help=f"which cases ({', '.join(CASES)})")
    ap.add_argument("--rounds", type=int, default=2, help="interleaved rounds of every (encoder, case)")
    ap.add_argument("--updates", type=int, default=6, help="updates per run, --warmup of them left out")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--out", default="results/precision.json", help="JSON output path")
    ap.add_argument("overrides", nargs="*", help="config overrides for every run (e.g. env.num_envs=8)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    logging.getLogger("ddppo.model.compiled").setLevel(logging.INFO)  # the compile times
    base = [*ENV, "env.num_envs=16", "rollout.num_steps=32", "ppo.epochs=2", "ppo.num_mini_batch=2",
            "policy.rnn_type=gru", "policy.hidden_size=256", "run.torch_threads=1", f"dist.device={args.device}"]
    from ddppo.config import load_config
    from ddppo.errors import ConfigError
    from ddppo.user_code import ENCODERS as REGISTRY

    for name in args.encoders:  # the vision extra missing: one line before anything runs
        problem = REGISTRY.problem(ENCODERS[name][0])
        if problem is not None:
            raise SystemExit(f"ddppo bench precision: --encoders {name}: {problem} (or leave it out: --encoders cnn)")
    base += args.overrides
    try:
        cfg = load_config(None, base)
    except ConfigError as err:
        raise SystemExit(f"ddppo bench precision: {err}") from None
    total = [f"run.total_env_steps={cfg.env.num_envs * cfg.rollout.num_steps * args.updates}"]
    per_case: dict[str, dict[str, list[dict]]] = {e: {c: [] for c in args.cases} for e in args.encoders}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ddppo-bench-precision-") as tmp:
        work = Path(tmp)
        for r in range(args.rounds):
            for encoder in args.encoders:
                policy = encoder_overrides(encoder, work)
                for name in args.cases:
                    overrides, learning = CASES[name]
                    run_dir = work / f"{r}-{encoder}-{name.replace(' ', '_').replace('/', '_')}"
                    rows = run_case([*base, *policy, *overrides, *total], learning, run_dir)
                    per_case[encoder][name] += [row for row in rows if "perf/update_s" in row][args.warmup:]
    results = {e: {c: figures(rows) for c, rows in cases.items() if rows} for e, cases in per_case.items()}
    table(results)
    import torch

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"command": sys.argv, "torch": torch.__version__, "device": args.device,
                               "cpu_capability": torch.backends.cpu.get_cpu_capability(),
                               "overrides": base, "encoders": {e: ENCODERS[e][0] for e in args.encoders},
                               "rounds": args.rounds, "updates": args.updates, "warmup": args.warmup,
                               "wall_s": time.perf_counter() - started, "results": results}, indent=1) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
