"""`ddppo record CONFIG --episodes N --out DIR`: demonstrations of the env's expert or of a trained policy, written
as the dataset of ddppo/imitation/dataset.py. Under torchrun / srun every rank records its share of the episodes
into shards named by its rank; a killed recording leaves complete shards and journals, and `--resume` continues it.

The expert is the env's (the optional `expert_actions()` of ddppo.envs.base: gridnav's shortest path, habitat's
and habitat-lab's shortest-path followers) or a policy (`--policy RUN_DIR|CHECKPOINT`, its greedy actions:
distillation). Only whole episodes are kept: the episodes still running when a rank has its share are dropped.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from ddppo import signals
from ddppo.config import Config, to_yaml
from ddppo.distributed import DistContext
from ddppo.envs.base import EnvError, expert_actions, fresh_reset, rank_env_spec
from ddppo.envs.registry import make_vec_env
from ddppo.eval import loading
from ddppo.imitation import dataset as ds
from ddppo.model.precision import store_memory_in

log = logging.getLogger(__name__)

RESUME_SEED = 0x0DE40  # the episode stream a resumed rank draws from: apart from the first recording's


@dataclass(frozen=True)
class RecordRequest:
    episodes: int  # over every rank
    out: str
    policy: str = ""  # a run dir or checkpoint whose greedy actions are recorded; "": the env's expert
    resume: bool = False
    shard_episodes: int = 64


@dataclass
class RecordResult:
    episodes: int  # this rank's, recorded by this process
    steps: int
    seconds: float


def rank_share(total: int, rank: int, world_size: int) -> int:
    """Episodes rank `rank` records of `total`: an even split, the first ranks one more."""
    return total // world_size + (1 if rank < total % world_size else 0)


def header(cfg: Config, req: RecordRequest, envs: Any, world_size: int) -> dict[str, Any]:
    return {"format": ds.FORMAT, "version": ds.VERSION, "env": cfg.env.name, "config_yaml": to_yaml(cfg),
            **ds.describe_spaces(envs.observation_space, envs.action_space),
            "expert": req.policy or "env", "episodes_requested": req.episodes, "world_size": world_size,
            "torch": torch.__version__}


def prepare(root: Path, cfg: Config, req: RecordRequest, envs: Any, ctx: DistContext) -> dict[str, Any]:
    """Rank 0: check (resume) or create the dataset directory and its manifest; the header, on every rank."""
    def decide() -> dict[str, Any]:
        head = header(cfg, req, envs, ctx.world_size)
        if (root / ds.MANIFEST).exists():
            if not req.resume:
                raise ds.DatasetError(f"{root} already holds a dataset: pass --resume to continue it, or another "
                                      f"--out")
            had = ds.read_header(root)
            if had["env"] != cfg.env.name or ds.space_mismatch(had, envs.observation_space, envs.action_space):
                raise ds.DatasetError(f"{root / ds.MANIFEST} was recorded on {had['env']} with other spaces "
                                      f"({ds.space_mismatch(had, envs.observation_space, envs.action_space)}); "
                                      f"resume with its config, or record into another --out")
            if had["world_size"] != ctx.world_size or had["expert"] != head["expert"]:
                raise ds.DatasetError(f"{root / ds.MANIFEST} was recorded by {had['world_size']} ranks from expert "
                                      f"{had['expert']!r}: resume it with the same (now {ctx.world_size} ranks, "
                                      f"{head['expert']!r})")
            head = {**had, "episodes_requested": req.episodes}
        elif req.resume and root.exists() and any(root.iterdir()):
            raise ds.DatasetError(f"{root} has no {ds.MANIFEST}: nothing to resume; record into an empty --out")
        (root / ds.SHARDS).mkdir(parents=True, exist_ok=True)
        ds.write_manifest(root, head)
        return head

    return ctx.decide_on_main(decide if ctx.is_main else None, (ds.DatasetError,))


def clean_rank(root: Path, rank: int) -> list[dict[str, Any]]:
    """This rank's journaled shards (each present with its recorded size); temporary files and shards the journal
    does not list (a kill between a shard's rename and the journal's) are deleted."""
    entries = ds.read_journal(root, rank)
    kept = {e["file"] for e in entries}
    for path in (root / ds.SHARDS).glob(f"*r{rank:03d}-*"):
        if path.name not in kept:
            log.info("deleting %s: not in rank %d's journal (an interrupted write)", path, rank)
            path.unlink()
    for e in entries:
        path = root / ds.SHARDS / e["file"]
        if not path.is_file() or path.stat().st_size != e["bytes"]:
            raise ds.DatasetError(f"shard {path} is listed in {ds.journal_path(root, rank).name} but is "
                                  f"{'missing' if not path.is_file() else 'truncated'}: delete it and its entry, "
                                  f"then resume")
    return entries


class EpisodeBuffer:
    """Each env's running episode, step by step; finished episodes gathered for the next shard."""

    def __init__(self, num_envs: int):
        self.running: list[list[tuple[dict[str, np.ndarray], np.ndarray, float]]] = [[] for _ in range(num_envs)]
        self.finished: list[tuple[list, float, bool]] = []  # (steps, success, terminated)

    def add(self, obs: dict[str, np.ndarray], actions: np.ndarray, rewards: np.ndarray) -> None:
        for i, steps in enumerate(self.running):
            steps.append(({k: v[i] for k, v in obs.items()}, actions[i], float(rewards[i])))

    def end(self, i: int, success: float, terminated: bool) -> None:
        self.finished.append((self.running[i], success, terminated))
        self.running[i] = []

    def take(self, n: int) -> ds.Episodes:
        chosen, self.finished = self.finished[:n], self.finished[n:]
        steps = [s for ep, _, _ in chosen for s in ep]
        keys = steps[0][0].keys()
        return ds.Episodes({k: np.stack([s[0][k] for s in steps]) for k in keys},
                           np.stack([s[1] for s in steps]), np.array([s[2] for s in steps], np.float32),
                           np.array([len(ep) for ep, _, _ in chosen], np.int64),
                           np.array([succ for _, succ, _ in chosen], np.float32),
                           np.array([term for _, _, term in chosen], bool))


def env_expert(envs: Any) -> Callable[[dict[str, np.ndarray], np.ndarray], np.ndarray]:
    if expert_actions(envs) is None:
        raise EnvError(f"{type(envs).__name__} has no expert (no expert_actions()): record a trained policy with "
                       f"--policy RUN_DIR, or use an env with one (gridnav, habitat, habitat_lab) with env.num_workers=0")
    return lambda obs, start: expert_actions(envs)


def policy_expert(path: str, device: torch.device, envs: Any) -> Callable[[dict[str, np.ndarray], np.ndarray], Any]:
    """The greedy actions of the policy in `path` (distillation), as `ddppo eval` acts, its memory carried per env."""
    cfg, file, data = loading.open_checkpoint(Path(path), device)
    policy = loading.build_policy(cfg, envs.observation_space, envs.action_space, device)
    loading.load_weights(policy, data, cfg, f"checkpoint {file}")
    precision = loading.acting_precision(cfg, device)
    store_memory_in(policy, precision)
    memory = [policy.initial_memory(int(envs.num_envs), device)]

    def act(obs: dict[str, np.ndarray], start: np.ndarray) -> np.ndarray:
        begins = torch.as_tensor(np.asarray(start, np.float32), device=device)
        actions, memory[0] = loading.act_on_arrays(policy, obs, memory[0], begins, envs.action_space, precision)
        return actions

    return act


def record_rank(cfg: Config, req: RecordRequest, ctx: DistContext) -> RecordResult:
    root = Path(req.out)
    spec = rank_env_spec(ctx, cfg.env.num_envs, ctx.seed, cfg.env.num_workers)
    envs = make_vec_env(cfg.env.name, cfg.env_options, spec)
    try:
        head = prepare(root, cfg, req, envs, ctx)
        entries = clean_rank(root, ctx.rank)
        share = rank_share(req.episodes, ctx.rank, ctx.world_size)
        done = sum(e["episodes"] for e in entries)
        expert = policy_expert(req.policy, ctx.device, envs) if req.policy else env_expert(envs)
        # a resumed rank draws new episodes (a stream of its own per shard count), never the recorded ones again
        obs = fresh_reset(envs, RESUME_SEED + len(entries)) if entries else envs.reset()
        result = _record(root, ctx.rank, envs, expert, obs, share - done, entries, req.shard_episodes,
                         (lambda: ds.write_manifest(root, head)) if ctx.is_main else (lambda: None))
    finally:
        envs.close()
    ctx.all_reduce_sums(torch.zeros(1), "end of recording")  # every rank's journal is final
    if ctx.is_main:
        ds.write_manifest(root, head, complete=sum(e["episodes"] for e in ds.all_shards(root)) >= req.episodes)
    return result


def _record(root: Path, rank: int, envs: Any, expert: Callable, obs: dict[str, np.ndarray], wanted: int,
            entries: list[dict[str, Any]], shard_episodes: int, refresh: Callable[[], Any]) -> RecordResult:
    n = int(envs.num_envs)
    buf = EpisodeBuffer(n)
    start = np.ones(n, bool)
    recorded = steps = 0
    began = time.monotonic()
    while recorded < wanted:
        if signals.pending():  # SIGTERM / SIGINT / SIGUSR1: the complete shards stay, --resume continues
            log.warning("rank %d: stopped by a signal after %d/%d episodes; `ddppo record ... --resume` continues",
                        rank, recorded, wanted)
            break
        actions = expert(obs, start)
        result = envs.step(actions)
        buf.add(obs, np.asarray(actions), result.reward)
        success = {info.env_index: float(info.metrics.get("success", np.nan)) for info in result.episodes}
        done = np.asarray(result.terminated) | np.asarray(result.truncated)
        for i in np.flatnonzero(done):
            buf.end(int(i), success.get(int(i), np.nan), bool(result.terminated[i]))
        start = done
        obs = result.obs
        while recorded < wanted and len(buf.finished) >= min(shard_episodes, wanted - recorded):
            shard = buf.take(min(shard_episodes, wanted - recorded))
            entries.append(ds.write_shard(root, rank, len(entries), shard))
            ds.write_journal(root, rank, entries)
            refresh()
            recorded += shard.num_episodes
            steps += shard.num_steps
            log.info("rank %d: shard %s, %d/%d episodes", rank, entries[-1]["file"], recorded, wanted)
    return RecordResult(recorded, steps, time.monotonic() - began)


def record(cfg: Config, req: RecordRequest) -> tuple[str, bool]:
    """What `ddppo record` runs, on every rank (one process outside a launcher): the summary line (rank 0's, ""
    elsewhere: episodes and steps recorded by this run, episodes/s, what the dataset holds) and whether the
    dataset holds every episode asked for (False: stopped by a signal)."""
    from ddppo.distributed import read_launch, run_in_process_group

    if req.episodes <= 0 or req.shard_episodes <= 0:
        raise ds.DatasetError(f"--episodes {req.episodes} and --shard-episodes {req.shard_episodes} must be > 0")
    summary: list[str] = []
    complete: list[bool] = []

    def body(ctx: DistContext) -> int:
        res = record_rank(cfg, req, ctx)
        eps, steps, seconds = ctx.all_reduce_sums(torch.tensor([res.episodes, res.steps, res.seconds]),
                                                  "recording counts").tolist()
        seconds /= ctx.world_size  # the ranks record side by side: their mean time
        complete.append(ds.read_header(req.out)["complete"])
        if ctx.is_main:
            held = ds.read_header(req.out)
            summary.append(f"recorded {int(eps)} episodes ({int(steps)} steps) in {seconds:.1f} s on "
                           f"{ctx.world_size} rank(s): {eps / max(seconds, 1e-9):.1f} episodes/s, "
                           f"{steps / max(seconds, 1e-9):.0f} steps/s; {req.out} holds {held['episodes']} episodes "
                           f"({held['steps']} steps){'' if held['complete'] else ', incomplete'}")
        return 0

    run_in_process_group(cfg, read_launch(), body)
    return (summary[0] if summary else ""), all(complete)
