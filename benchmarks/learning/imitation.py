"""`ddppo bench imitation`: the demonstration dataset's format against Minari's, `ddppo record` episodes/s and
`ddppo imitate` samples/s, and the clone's success (docs/guides/imitation.md cites the figures).

    ddppo bench imitation [--episodes 256] [--updates 300] [--ranks 1 2] [--dir DIR] [--out FILE]

1. format: the same gridnav expert episodes (and the same with a 64x64x3 uint8 image key added, as a camera would
   give) written as ddppo shards (ddppo/imitation/dataset.py) and as a Minari dataset (`minari`, where installed:
   HDF5 and Arrow), each once: seconds and bytes on disk. Nothing else differs: the episodes are in memory first.
2. record: `ddppo record gridnav --episodes N` (the real command) on each number of ranks: its episodes/s line.
3. imitate: `ddppo imitate gridnav` on that dataset for --updates updates, on 1 rank and under torchrun on 2: the
   median samples/s of its metrics.jsonl, and its last held-out accuracy; then `ddppo eval` of the first clone (200
   episodes): success and SPL with their 95% intervals.
Figures are printed and written as JSON; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

NAME = "imitation"
HELP = ("demonstration format vs Minari (seconds, bytes), ddppo record episodes/s, ddppo imitate samples/s on"
        " 1 and 2 ranks, the clone's success")


def gridnav_episodes(n: int, image: bool):
    """`n` gridnav expert episodes in memory (ddppo.imitation.dataset.Episodes), with a random image key if asked."""
    from ddppo.config import load_config
    from ddppo.envs.base import EnvSpec
    from ddppo.envs.registry import make_vec_env
    from ddppo.imitation.record import EpisodeBuffer

    cfg = load_config("gridnav", [])
    envs = make_vec_env(cfg.env.name, cfg.env_options, EnvSpec(num_envs=16, seed=0))
    buf, obs = EpisodeBuffer(16), envs.reset()
    rng = np.random.default_rng(0)
    while len(buf.finished) < n:
        if image:
            obs = {**obs, "rgb": rng.integers(0, 256, (16, 64, 64, 3), dtype=np.uint8)}
        actions = envs.expert_actions()
        res = envs.step(actions)
        buf.add(obs, actions, res.reward)
        for i in np.flatnonzero(res.terminated | res.truncated):
            buf.end(int(i), 1.0, bool(res.terminated[i]))
        obs = res.obs
    spaces = (envs.observation_space, envs.action_space)
    envs.close()
    return buf.take(n), spaces


def dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def write_ddppo(eps, root: Path, shard: int = 64) -> float:
    from ddppo.imitation import dataset as ds
    from ddppo.imitation.demonstrations import select

    (root / ds.SHARDS).mkdir(parents=True)
    began = time.perf_counter()
    entries = []
    for i in range(0, eps.num_episodes, shard):
        entries.append(ds.write_shard(root, 0, len(entries), select(eps, np.arange(i, min(i + shard,
                                                                                     eps.num_episodes)))))
        ds.write_journal(root, 0, entries)
    return time.perf_counter() - began


def write_minari(eps, spaces, root: Path, fmt: str, jpeg: bool) -> float | str:
    try:
        import gymnasium
        import minari
        from minari.data_collector.episode_buffer import EpisodeBuffer
    except ImportError:
        return "minari not installed"
    os.environ["MINARI_DATASETS_PATH"] = str(root)
    obs_space = gymnasium.spaces.Dict({k: s for k, s in spaces[0].spaces.items()})
    if "rgb" in eps.obs:
        obs_space = gymnasium.spaces.Dict({**obs_space.spaces,
                                           "rgb": gymnasium.spaces.Box(0, 255, (64, 64, 3), np.uint8)})
    began = time.perf_counter()
    buffers = []
    for k, (s, n) in enumerate(zip(eps.starts, eps.lengths)):
        sl = slice(int(s), int(s + n))
        # Minari keeps T + 1 observations (the last one after the final action): the last one repeated here
        obs = {key: np.concatenate([v[sl], v[sl][-1:]]) for key, v in eps.obs.items()}
        buffers.append(EpisodeBuffer(id=k, observations=obs, actions=list(eps.actions[sl]),
                                     rewards=list(eps.rewards[sl]), terminations=[False] * (n - 1) + [True],
                                     truncations=[False] * n))
    minari.create_dataset_from_buffers(f"bench/gridnav-{fmt}-v0", buffers, observation_space=obs_space,
                                       action_space=spaces[1], data_format=fmt, algorithm_name="shortest path",
                                       jpeg_encoding=jpeg)
    return time.perf_counter() - began


def formats(n: int, work: Path) -> list[dict]:
    rows = []
    for image in (False, True):
        eps, spaces = gridnav_episodes(n, image)
        label = "gridnav + 64x64x3 uint8 image" if image else "gridnav"
        d = work / f"ddppo-{int(image)}"
        rows.append({"data": label, "format": "ddppo shards (.npz + manifest)", "seconds": write_ddppo(eps, d),
                     "bytes": dir_bytes(d), "steps": eps.num_steps})
        # Minari's default JPEG-encodes image keys (lossy: the images read back differ); False keeps them exact
        for fmt, jpeg in (("hdf5", True), ("hdf5", False), ("arrow", True)):
            if jpeg is False and not image:
                continue
            d = work / f"minari-{fmt}-{int(image)}-{int(jpeg)}"
            try:
                took = write_minari(eps, spaces, d, fmt, jpeg)
            except Exception as err:  # noqa: BLE001 - a figure, not a failure: Minari could not write it
                took = f"{type(err).__name__}: {' '.join(str(err).split())[:120]}"
            kind = (" (images JPEG)" if jpeg else " (images lossless)") if image else ""
            rows.append({"data": label, "format": f"minari {fmt}{kind}", "seconds": took,
                         "bytes": dir_bytes(d) if d.exists() else None, "steps": eps.num_steps})
    return rows


def run(cmd: list[str], env: dict | None = None) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1",
                                                                     **(env or {})})
    if proc.returncode != 0:
        raise SystemExit(f"ddppo bench imitation: {' '.join(cmd)} failed: {proc.stderr.strip()[-600:]}")
    return proc.stdout + proc.stderr


def ddppo_cmd(ranks: int, *args: str) -> list[str]:
    """`python -m ddppo ARGS`, under torchrun on `ranks` processes where more than one."""
    if ranks == 1:
        return [sys.executable, "-m", "ddppo", *args]
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={ranks}", "-m", "ddppo",
            *args]


def pipeline(n: int, updates: int, ranks: list[int], work: Path) -> dict:
    data = work / "demos"
    out: dict = {"record": {}, "imitate": {}}
    for r in ranks:
        text = run(ddppo_cmd(r, "record", "gridnav", "--episodes", str(n), "--out", str(work / f"demos-{r}")))
        line = next(x for x in text.splitlines() if "episodes/s" in x and x.startswith("recorded"))
        out["record"][r] = {"episodes_per_s": float(re.search(r"([\d.]+) episodes/s", line).group(1)),
                            "line": line}
    data = work / f"demos-{ranks[0]}"
    for r in ranks:
        run_dir = work / f"bc-{r}"
        args = ["gridnav", f"imitation.data={data}", f"run.dir={run_dir}", f"imitation.updates={updates}",
                "log.level=WARNING"]
        run(ddppo_cmd(r, "imitate", *args))
        rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
        rates = [x["perf/samples_per_s"] for x in rows[1:]]
        val = [x["imitate/val_accuracy"] for x in rows if x.get("imitate/val_accuracy") is not None]
        out["imitate"][r] = {"samples_per_s": statistics.median(rates), "val_accuracy": val[-1]}
    clone = work / f"bc-{ranks[0]}"
    run([sys.executable, "-m", "ddppo", "eval", str(clone), "eval.num_episodes=200", "log.level=WARNING"])
    metrics = json.loads(next((clone / "eval").glob("ckpt-*.json")).read_text())["metrics"]
    out["clone"] = {k: {"mean": metrics[k]["mean"], "ci95": metrics[k]["ci95"]} for k in ("success", "spl")}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="ddppo bench imitation", description=__doc__.split("\n\n")[0])
    ap.add_argument("--episodes", type=int, default=256)
    ap.add_argument("--updates", type=int, default=300, help="imitate updates per run")
    ap.add_argument("--ranks", type=int, nargs="+", default=[1, 2], help="imitate on these numbers of ranks")
    ap.add_argument("--skip-pipeline", action="store_true", help="only the format comparison")
    ap.add_argument("--dir", default="", help="working folder (default: a temporary one)")
    ap.add_argument("--out", default="results/imitation.json")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(dir=args.dir or None) as tmp:
        work = Path(tmp)
        result = {"formats": formats(args.episodes, work / "formats")}
        print(f"{'data':32} {'format':32} {'seconds':>9} {'MB':>9}")
        for r in result["formats"]:
            secs = f"{r['seconds']:.3f}" if isinstance(r["seconds"], float) else str(r["seconds"])[:60]
            mb = f"{r['bytes'] / 1e6:.2f}" if r["bytes"] else "-"
            print(f"{r['data']:32} {r['format']:32} {secs:>9} {mb:>9}")
        if not args.skip_pipeline:
            result["pipeline"] = pipeline(args.episodes, args.updates, args.ranks, work)
            p = result["pipeline"]
            for r, x in p["record"].items():
                print(f"record on {r} rank(s): {x['line']}")
            for r, x in p["imitate"].items():
                print(f"imitate on {r} rank(s): {x['samples_per_s']:.0f} samples/s, held-out accuracy "
                      f"{x['val_accuracy']:.3f}")
            print("the clone (" + f"{args.ranks[0]} rank(s)), ddppo eval on 200 episodes: " + ", ".join(
                f"{k} {v['mean']:.3f} [{v['ci95'][0]:.3f}, {v['ci95'][1]:.3f}]" for k, v in p["clone"].items()))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
