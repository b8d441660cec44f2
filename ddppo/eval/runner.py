"""One rank's evaluation: envs and policy built once, the same episodes played for every checkpoint.

See ddppo/eval/command.py for which episodes are played and what is written.
Collectives per checkpoint, the same on every rank: a load-success all-gather
(+ a broadcast if some rank failed), then, once every rank has finished its
episodes (waited for through the store, as ranks may finish minutes apart),
a gather of the episodes on rank 0 and a broadcast of "interrupted".
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ddppo import checkpoint as ckpt
from ddppo.errors import CheckpointError
from ddppo import signals
from ddppo.config import Config, get_key
from ddppo.distributed import DistContext, rank_seed
from ddppo.eval.probes import probe_for
from ddppo.eval.stats import (dataset_quotas, finite_or_none, non_finite_counts, split, summarize_episodes,
                              summarize_scenes)
from ddppo.eval.loading import build_policy, load_weights
from ddppo.model.precision import with_resolved_precision
from ddppo.rollout.acting import Actor
from ddppo.eval.video import EpisodeRecorder
from ddppo.rundir import RunDir, checkpoint_update
from ddppo.envs.base import rank_env_spec
from ddppo.envs.registry import make_vec_env

log = logging.getLogger(__name__)


def result_name(path: Path, data: dict[str, Any]) -> str:
    """What a checkpoint's eval outputs are named by: ckpt-<update> for ddppo's checkpoints, the file's own
    name for another trainer's (a habitat-baselines ckpt.3.pth has no ddppo update: `ckpt.3`)."""
    foreign = ckpt.foreign(data)
    update = checkpoint_update(path)
    if foreign is not None:
        return foreign.name
    return f"ckpt-{update if update is not None else int(data['counters']['update'])}"


# ------------------------------------------------------------------------------ the evaluator
class Evaluator:
    """One rank's envs and policy, reused for every checkpoint."""

    def __init__(self, cfg: Config, ctx: DistContext, out_dir: Path, settings: dict[str, Any]):
        cfg = with_resolved_precision(cfg, ctx.device, announce=False)  # the run's precision, unless eval overrides it
        self.cfg, self.ctx, self.out_dir, self.settings = cfg, ctx, out_dir, settings
        self.calls = 0
        self.interrupted = False
        dataset = "dataset" in cfg.env_options  # a split is run whole: no episode quota caps the envs
        share = split(cfg.eval.num_episodes, ctx.world_size)[ctx.rank]
        num_envs = cfg.env.num_envs if dataset else min(cfg.env.num_envs, max(1, share))
        if cfg.env.num_workers:
            log.info("eval steps its %d envs in this process (env.num_workers=%d ignored)", num_envs,
                     cfg.env.num_workers)
        spec = rank_env_spec(ctx, num_envs, rank_seed(cfg.run.seed + cfg.eval.seed_offset, ctx.rank))
        self.envs = make_vec_env(cfg.env.name, cfg.env_options, spec)
        try:
            self.snapshot = self.envs.state_dict()
            self.probe = probe_for(self.envs)
            self.policy = build_policy(cfg, self.envs.observation_space, self.envs.action_space, ctx.device)
            self.planned: list[list[dict[str, Any]]] | None = None
            self.quotas, self.total, self.mode = self._plan(share)
        except BaseException:
            self.envs.close()
            raise

    def _plan(self, share: int) -> tuple[np.ndarray, int, str]:
        n = self.envs.num_envs
        if hasattr(self.envs, "assigned_episodes"):
            mine = [[f"{getattr(ep, 'scene_id', '')}/{getattr(ep, 'episode_id', repr(ep))}" for ep in eps]
                    for eps in self.envs.assigned_episodes()]
            everyone = self.ctx.gather_objects(mine)
            plan = dataset_quotas(everyone) if self.ctx.is_main else None
            quotas, total = self.ctx.broadcast_object(plan)
            return np.asarray(quotas[self.ctx.rank], np.int64), total, "dataset"
        quotas = np.asarray(split(share, n), np.int64)
        if not self.probe.can_plan:
            return quotas, self.cfg.eval.num_episodes, "quota"
        keys = self.probe.draw_episodes(share)  # this rank's episodes, the same for every checkpoint
        ends = np.cumsum(quotas)
        self.planned = [keys[end - q:end] for q, end in zip(quotas, ends)]
        return quotas, self.cfg.eval.num_episodes, "planned"

    def _next_episode(self, i: int, count: int, obs: dict[str, np.ndarray]) -> dict[str, Any]:
        """Env i's episode number `count` starts now: set it from the plan (writing its first observation
        into `obs`) where there is one; its descriptor."""
        if self.planned is None or count >= len(self.planned[i]):
            return self.probe.episode_key(i)
        key = self.planned[i][count]
        for k, v in self.probe.start_episode(i, key).items():
            obs[k][i] = v
        return key

    def close(self) -> None:
        self.envs.close()

    # ------------------------------------------------------------------ one checkpoint
    def load(self, path: Path) -> dict[str, Any] | None:
        """The checkpoint on every rank, checked against this config; None (all ranks) if it vanished."""
        err = ""
        try:
            data = ckpt.load(path, map_location=self.ctx.device)
        except CheckpointError as e:
            data, err = None, str(e)
        ok = self.ctx.all_gather_stats(torch.tensor([0.0 if err else 1.0]))
        if ok.min() < 1:
            gone = self.ctx.broadcast_object(not path.exists() if self.ctx.is_main else None)
            if gone:
                log.warning("%s was removed before it could be evaluated (checkpoint.keep_last pruning); skipped",
                            path)
                return None
            raise CheckpointError(err or f"{path} could not be read on another rank")
        load_weights(self.policy, data, self.cfg, f"checkpoint {path}")
        if ckpt.foreign(data) is not None:
            return data
        trained = ckpt.stored_config(data, f"checkpoint {path}")
        other = ckpt.setting_changes(trained, self.cfg, ("env.",))
        if other and self.ctx.is_main:
            log.info("evaluating %s with env settings other than its training's: %s", path.name,
                     ", ".join(f"{k}={get_key(self.cfg, k)!r} (trained {get_key(trained, k)!r})" for k in other))
        return data

    def evaluate(self, path: Path, video: int) -> dict[str, Any] | None:
        """Play the planned episodes with checkpoint `path`; rank 0 returns the result (None elsewhere,
        or when the checkpoint vanished or evaluation was interrupted)."""
        data = self.load(path)
        if data is None:
            return None
        update, env_steps = int(data["counters"]["update"]), int(data["counters"]["env_steps"])
        steps_kind = "demonstration steps" if self.cfg.imitation.data else "env steps"  # `ddppo imitate`'s counter
        name = result_name(path, data)
        started = time.monotonic()
        recorder = None
        if video and self.ctx.is_main:
            if not self.probe.can_render:
                log.warning("--video: %s has no top-down view; its videos show image observations and metrics only",
                            self.cfg.env.name)
            stem = RunDir.eval_video_stem(self.out_dir, name)
            title = f"{self.cfg.env.name}  {name} ({env_steps:,} {steps_kind})"
            keys = [k for k in self.envs.observation_space.spaces]
            recorder = EpisodeRecorder(self.probe, keys, self._video_slots(video), stem, self.cfg.eval.video_fps, title)
        try:
            episodes, interrupted = self._play(recorder)
        finally:
            if recorder is not None:
                recorder.close()
        gathered = self._gather(episodes, interrupted)
        if gathered is None:
            return None
        episodes = sorted(gathered, key=lambda e: (e["rank"], e["env"], e["index"]))
        videos = []
        for v in recorder.done if recorder is not None else []:
            videos.append({**v, "path": os.path.relpath(v["path"], self.out_dir)})
        result = {
            "checkpoint": str(path.resolve()), "name": name, "update": update, "env_steps": env_steps,
            "steps_kind": steps_kind,
            "env": self.cfg.env.name, "mode": self.mode, "world_size": self.ctx.world_size,
            "deterministic": self.cfg.eval.deterministic, "settings": self.settings,
            "num_episodes": len(episodes), "metrics": summarize_episodes(episodes),
            "scenes": summarize_scenes(episodes),
            "non_finite": non_finite_counts(episodes),
            "wall_time_s": round(time.monotonic() - started, 3), "videos": videos, "episodes": episodes,
        }
        return result

    def _video_slots(self, video: int) -> dict[int, int]:
        """Which envs of rank 0 record how many episodes: round-robin over envs that count episodes."""
        envs = [i for i in range(self.envs.num_envs) if self.quotas[i] > 0] or list(range(self.envs.num_envs))
        slots: dict[int, int] = {}
        for k in range(video):
            slots[envs[k % len(envs)]] = slots.get(envs[k % len(envs)], 0) + 1
        return slots

    def _play(self, recorder: EpisodeRecorder | None) -> tuple[list[dict[str, Any]], bool]:
        """Step all envs until every quota is met (and every video recorded); this rank's episodes."""
        envs = self.envs
        self.envs.load_state_dict(self.snapshot)
        torch.manual_seed(rank_seed(self.cfg.run.seed + self.cfg.eval.seed_offset, self.ctx.rank))
        n = envs.num_envs
        label = f"env.name={self.cfg.env.name} (rank {self.ctx.rank})"
        actor = Actor(envs, self.policy, self.ctx.device, label=label, precision=self.cfg.run.precision)
        obs = {k: v.copy() for k, v in envs.reset().items()}
        counts = np.zeros(n, np.int64)
        keys = [self._next_episode(i, 0, obs) for i in range(n)]
        actor.begin(obs, "during evaluation")
        if recorder is not None:
            for i in range(n):
                recorder.begin(i, _row(obs, i))
        episodes: list[dict[str, Any]] = []
        while (counts < self.quotas).any() or (recorder is not None and not recorder.finished):
            if signals.pending():
                return episodes, True
            env_action = actor.act(deterministic=self.cfg.eval.deterministic).env_action
            if recorder is not None:
                for i in range(n):
                    recorder.before_step(i, _row(obs, i), env_action[i])
            res = actor.step(env_action, "during evaluation").result
            planned_start = bool(res.episodes) and self.planned is not None
            obs = {k: v.copy() for k, v in res.obs.items()} if planned_start else res.obs
            if recorder is not None:
                for i in range(n):
                    recorder.after_step(i, res.reward[i])
            for ep in res.episodes:
                i = ep.env_index
                counted = bool(counts[i] < self.quotas[i])
                metrics = {k: float(v) for k, v in ep.metrics.items()}
                if counted:
                    episodes.append({"rank": self.ctx.rank, "env": i, "index": int(counts[i]), "episode": keys[i],
                                     "metrics": finite_or_none(metrics)})  # NaN/inf -> null: strict JSON
                    if ep.scene is not None:
                        episodes[-1]["scene"] = ep.scene
                if recorder is not None:
                    recorder.end(i, _row(res.final_obs, i), metrics, counted,
                                 {"rank": self.ctx.rank, "env": i, "index": int(counts[i]), "episode": keys[i]})
                counts[i] += 1
                keys[i] = self._next_episode(i, int(counts[i]), obs)
                if recorder is not None:
                    recorder.begin(i, _row(obs, i))
            if planned_start:  # planned episodes wrote their first observations into `obs`
                actor.set_obs(obs, "during evaluation")
        return episodes, False

    def _gather(self, episodes: list[dict[str, Any]], interrupted: bool) -> list[dict[str, Any]] | None:
        """Every rank's episodes on rank 0 (None elsewhere, or on every rank if any was interrupted)."""
        self.calls += 1
        self.ctx.wait_for_ranks(f"eval/{self.calls}", self.cfg.eval.rank_wait_s, "waiting for every rank to "
                                "finish its episodes")
        parts = self.ctx.gather_objects((episodes, interrupted))
        stop = self.ctx.broadcast_object(any(p[1] for p in parts) if self.ctx.is_main else None)
        self.interrupted = bool(stop)
        if stop or not self.ctx.is_main:
            return None
        return [e for p in parts for e in p[0]]


def _row(obs: dict[str, np.ndarray], i: int) -> dict[str, np.ndarray]:
    return {k: v[i] for k, v in obs.items()}
