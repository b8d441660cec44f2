"""Trainer.train(): collect -> returns -> PPO update -> reduce stats -> log / checkpoint / agree on stop.

Every rank runs this same loop. Per update, every rank performs the same
collectives in the same order (see ddppo/distributed/), whatever happened
locally: a preempted rollout, a skipped update, a signal.
"""

from __future__ import annotations

import logging
import random
import time
from collections import deque
from typing import Any

import numpy as np
import torch

from ddppo.envs.registry import EnvSpec, make_vec_env
from ddppo import checkpoint as ckpt
from ddppo.checkpoint.manager import CheckpointManager, Stateful
from ddppo import signals
from ddppo.config import Config
from ddppo.distributed import DistContext
from ddppo import timing, watchdog
from ddppo.timing import Timer
from ddppo.train.metrics import MetricsWriter, progress_line
from ddppo.train.wandb_sink import WandbSink, check_available
from ddppo.model.build import make_policy
from ddppo.normalization import build_normalization
from ddppo.ppo.reference import ReferencePolicy
from ddppo.ppo.update import PPOUpdater, UpdateResult
from ddppo.advantage import estimator_for
from ddppo.train.resume import check_run_dir, claim_run_dir, write_run_dir
from ddppo.rollout.acting import rank_env_spec
from ddppo.rollout.collector import CollectResult
from ddppo.rollout.episode_metrics import EPISODE_KEYS, env_metric_names
from ddppo.rollout.factory import make_collector, storage_steps
from ddppo.rollout.preemption import Preemption
from ddppo.rollout.storage import RolloutStorage
from ddppo.train.bottleneck import diagnose
from ddppo.train.learning import SerialLearning
from ddppo.train.overlap import OverlapLearning, acting_copy
from ddppo.rollout.scenes import env_scene_names
from ddppo.train.stats import SceneWindow, StepStats, agree_metric_names, agree_scene_names, memory_usage, reduce_stats

log = logging.getLogger(__name__)

class RunningEpisodes:
    """The owner of the running episodes (namespace "collector"): the collector's observation, start flags,
    recurrent state and environment state; resuming without them starts fresh episodes seeded from the update.
    Under rollout.overlap_learning nothing is saved: at a checkpoint the collector has already collected the
    next rollout, which no update has learned on; it is dropped, and a resumed run starts fresh episodes
    (train/overlap.py)."""

    def __init__(self, trainer: Trainer, saved: bool):
        self.trainer, self.saved = trainer, saved

    def state_dict(self) -> dict[str, Any] | None:
        return self.trainer.collector.state_dict() if self.saved else None

    def resume(self, state: dict[str, Any] | None) -> bool:
        return self.trainer.collector.resume(state, self.trainer.update)


class Counters:
    """The training progress every rank agrees on (namespace "counters"): update, env steps, skipped updates in
    a row, the KL coefficient and the window of recent updates' episode statistics."""

    def __init__(self, trainer: Trainer):
        self.trainer = trainer

    def state_dict(self) -> dict[str, Any]:
        t = self.trainer
        return {"update": t.update, "env_steps": t.env_steps, "skipped_in_a_row": t.skipped_in_a_row,
                "kl_beta": t.reference.beta if t.reference is not None else 0.0,
                "window": [list(w) for w in t.window], "episode_metrics": list(t.metric_names)}

    def load_state_dict(self, counters: dict[str, Any]) -> None:
        t = self.trainer
        t.update, t.env_steps = counters["update"], counters["env_steps"]
        t.skipped_in_a_row = counters["skipped_in_a_row"]
        t.window.clear()
        saved = tuple(counters.get("episode_metrics") or EPISODE_KEYS)  # the window's columns
        for sums, counts, steps, seconds in counters["window"]:
            t.window.append((t.remap(sums, saved), t.remap(counts, saved), steps, seconds))
        if t.reference is not None and counters["kl_beta"] is not None:
            t.reference.beta = float(counters["kl_beta"])


# stop flags, OR-ed over ranks once per update
STOP_TERM, STOP_REQUEUE, STOP_BUDGET, STOP_NONFINITE = 1, 2, 4, 8


class Trainer:
    def __init__(self, cfg: Config, ctx: DistContext):
        self.cfg, self.ctx = cfg, ctx
        self.timer = Timer(ctx.device)
        self.start_time = time.monotonic()
        self.config_changes = check_run_dir(cfg)  # refuses a shape change; config.yaml is written once started
        check_available(cfg)  # W&B enabled but not installed: every rank stops here, before any collective
        self.run_claim = claim_run_dir(cfg, ctx)  # one live writer: a second `ddppo train` here refuses (all ranks)
        try:
            spec = rank_env_spec(ctx, cfg.env.num_envs, ctx.seed, cfg.env.num_workers,
                                 group_size=cfg.ppo.env_group_size)
            self.env_spec = spec
            self.envs = make_vec_env(cfg.env.name, cfg.env_options, spec)
            try:
                self._build(spec)
            except BaseException:
                self.envs.close()
                raise
        except BaseException:
            self.run_claim.release(failed_start=True)
            raise

    def _build(self, spec: EnvSpec) -> None:
        cfg, ctx = self.cfg, self.ctx
        torch.manual_seed(ctx.seed)
        np.random.seed(ctx.seed % 2**32)
        random.seed(ctx.seed)  # saved and restored with every checkpoint: seeded too, so runs repeat
        # normalisation, built once from the config and the spaces: the policy and the collector take their parts
        self.normalization = build_normalization(cfg, self.envs.observation_space, self.envs.action_space,
                                                 spec.num_envs, ctx)
        norm = self.normalization
        self.policy = make_policy(self.envs.observation_space, self.envs.action_space, cfg.policy,
                                  value_head=cfg.ppo.critic, obs_norm=norm.obs,
                                  normalize_inputs=norm.policy_normalizes).to(ctx.device)
        self.advantage = estimator_for(cfg.ppo, spec.num_envs)
        self.updater = PPOUpdater(self.policy, cfg.ppo, ctx, cfg.dist.bucket_mb,
                                  cfg.rollout.sample_weighting, advantage=self.advantage)
        storage = self._new_storage()
        self.metric_names = agree_metric_names(ctx, env_metric_names(self.envs))  # train/<name>, same on all ranks
        self.scene_names = agree_scene_names(ctx, env_scene_names(self.envs))  # train/scene/<name>/*, likewise
        # rollout.overlap_learning: an acting copy collects into a second storage while the learner updates
        acting = acting_copy(self.policy) if cfg.rollout.overlap_learning else self.policy
        self.collector = make_collector(cfg.rollout, self.envs, acting, storage,
                                        Preemption(cfg.preemption, ctx, cfg.rollout.num_steps), self.timer,
                                        cfg.ppo.gamma, ctx.device, label=f"env.name={cfg.env.name} (rank {ctx.rank})",
                                        metric_names=self.metric_names, reward_scale=norm.rewards,
                                        obs_transform=norm.obs_transform, scene_names=self.scene_names)
        # how collection and learning are arranged, chosen once: the loop calls self.learning.step
        self.learning = (OverlapLearning(self.policy, acting, storage, self._new_storage(), ctx.device)
                         if cfg.rollout.overlap_learning else SerialLearning())
        self.reference = None
        if cfg.ppo.kl_ref.checkpoint:
            self.reference = ReferencePolicy(cfg.ppo.kl_ref, self.envs.observation_space, self.envs.action_space,
                                             spec.num_envs, ctx.device)
        self.update, self.env_steps, self.skipped_in_a_row = 0, 0, 0
        self.last_save_failed = False  # rank 0: the newest checkpoint could not be written (disk full, ...)
        self.window: deque = deque(maxlen=cfg.log.window)  # recent updates' episode stats (train/* is windowed)
        self.scene_window = SceneWindow(self.scene_names, cfg.log.window)
        self.checkpoints = self._checkpoint_manager()
        self.checkpoints.resume()
        ctx.broadcast_module(self.policy)  # identical parameters everywhere, once
        write_run_dir(cfg, ctx, self.config_changes)  # the first write: a start that fails leaves no trace
        self.writer = MetricsWriter(cfg.run.dir, ctx.is_main, cfg.log.tensorboard, self.update, self.env_steps,
                                    wandb=WandbSink(cfg) if ctx.is_main and cfg.log.wandb.enabled else None)
        self.perf_window: deque = deque(maxlen=max(cfg.log.window, 20))

    def _new_storage(self) -> RolloutStorage:
        hidden_shape = tuple(self.policy.initial_hidden(self.env_spec.num_envs).shape)
        return RolloutStorage(storage_steps(self.cfg.rollout), self.env_spec.num_envs, self.envs.observation_space,
                              self.envs.action_space, hidden_shape, self.ctx.device)

    # --------------------------------------------------------------------- loop
    def train(self) -> int:
        """Run until the step budget, a signal, the time budget or repeated non-finite updates; exit code."""
        cfg, ctx = self.cfg, self.ctx
        if self.env_steps >= cfg.run.total_env_steps:
            log.info("run already finished: %d/%d env steps", self.env_steps, cfg.run.total_env_steps)
            return 0
        last_print = last_diagnosis = time.monotonic()
        log.info("training %s on %d rank(s) x %d envs, from update %d", cfg.env.name, ctx.world_size,
                 cfg.env.num_envs, self.update)
        log.info("policy.architecture=%s, %s parameters; torch threads per rank: %d intra-op, %d inter-op",
                 cfg.policy.architecture,
                 f"{sum(p.numel() for p in self.policy.parameters()):,}", torch.get_num_threads(),
                 torch.get_num_interop_threads())
        while True:
            watchdog.arm(cfg.dist.update_timeout_s, cfg.dist.startup_timeout_s)  # disarmed at the end of the update
            update = self.update + 1
            t0 = time.perf_counter()
            collected, result, lr, beta, timings = self.learning.step(self, update)
            local = StepStats(collected, result, self._local_stop_flags(), time.perf_counter() - t0,
                              timings, *memory_usage(ctx.device))
            reduced = reduce_stats(ctx, local, cfg.ppo.epochs, cfg.env.num_envs, cfg.rollout.num_steps)
            self.update = update
            self.env_steps += reduced.env_steps_this_update
            self._count_skipped(reduced.skipped_steps)
            if self.reference is not None:
                reduced.losses["kl_beta"] = beta
                self.reference.adapt(reduced.losses["kl_ref"])
            stop = reduced.stop_flags
            if self.skipped_in_a_row >= cfg.ppo.max_skipped_updates:
                stop |= STOP_NONFINITE
            done = self.env_steps >= cfg.run.total_env_steps
            with self.timer(timing.LOG_CHECKPOINT):
                scalars = self._scalars(reduced, lr)
                self.writer.write(update, self.env_steps, scalars)
                if stop or done or update % cfg.checkpoint.interval_updates == 0:
                    self._save()
            self.perf_window.append(reduced.perf)
            if ctx.is_main and (time.monotonic() - last_print >= cfg.log.interval_s or stop or done):
                last_print = time.monotonic()
                log.info("update %d | %s", update, progress_line(self.env_steps, cfg.run.total_env_steps,
                                                                 scalars["perf/fps"], scalars))
            if ctx.is_main and (time.monotonic() - last_diagnosis >= cfg.log.bottleneck_interval_s or stop or done):
                last_diagnosis = time.monotonic()
                self._log_bottleneck()
            watchdog.disarm()
            if stop or done:
                return self._finish(stop)

    def compute_advantages(self) -> None:
        """The advantages of the collected rollout (the estimator ppo.advantage chose: ddppo/advantage/)."""
        with self.timer(timing.GAE):
            self.advantage.compute(self.collector.storage, self.collector.last_value)

    @property
    def storage(self) -> RolloutStorage:
        """The rollout storage the collector fills (under rollout.overlap_learning: the one it fills now)."""
        return self.collector.storage

    def collect_rollout(self, update: int) -> CollectResult:
        """One rollout, the end-of-rollout sync (a collective), then its advantages."""
        collected = self.collector.collect(update)
        with self.timer(timing.STRAGGLER_WAIT):
            self.ctx.rollout_barrier(collected.steps)
        self.ctx.mark_started()
        with self.timer(timing.GAE):
            self.normalization.sync(self.collector.storage)  # a collective when normalisation is on
        self.compute_advantages()
        return collected

    def learn(self, storage: RolloutStorage, timer: Timer, generator: torch.Generator | None = None
              ) -> tuple[UpdateResult, float, float]:
        """The PPO update on `storage` (its collectives: advantage statistics, gradient all-reduces); (result,
        learning rate, KL coefficient). On the learner thread under rollout.overlap_learning, with its own
        `generator` for the minibatches (torch's global one is the acting policy's)."""
        lr = self.updater.set_lr_for(self.env_steps, self.cfg.run.total_env_steps)
        ref_params, beta = None, 0.0
        if self.reference is not None:
            with timer(timing.REFERENCE_FORWARD):
                ref_params, beta = self.reference.annotate(storage), self.reference.beta
        return self.updater.update(storage, timer, ref_params, beta, generator), lr, beta

    def _log_bottleneck(self) -> None:
        window = list(self.perf_window)
        found = diagnose(window, max(p.get("perf/memory_fraction_max", 0.0) for p in window), self.learning.overlapped)
        if found is not None:
            log.info("%s", found.line())

    def _count_skipped(self, skipped_steps: int) -> None:
        """Updates with skipped (non-finite) optimiser steps, in a row; each one is logged."""
        self.skipped_in_a_row = self.skipped_in_a_row + 1 if skipped_steps else 0
        if skipped_steps and self.ctx.is_main:
            ppo = self.cfg.ppo
            log.warning("update %d: %d of %d optimiser steps skipped: non-finite gradients (%d update(s) in a row; "
                        "the run stops at ppo.max_skipped_updates=%d)", self.update, skipped_steps,
                        ppo.epochs * ppo.num_mini_batch, self.skipped_in_a_row, ppo.max_skipped_updates)

    def _local_stop_flags(self) -> int:
        flags = 0
        sig = signals.pending()
        if sig:
            flags |= STOP_REQUEUE if sig == int(signals.signal.SIGUSR1) else STOP_TERM
        budget = self.cfg.run.time_budget_s
        if budget > 0 and time.monotonic() - self.start_time >= budget:
            flags |= STOP_BUDGET
        return flags

    def _finish(self, stop: int) -> int:
        self.writer.flush()
        unsaved = self._report_unsaved()
        if stop & STOP_NONFINITE:
            log.error("stopping at update %d: %d consecutive updates had non-finite gradients "
                      "(ppo.max_skipped_updates=%d); lower ppo.lr or check the environment's rewards",
                      self.update, self.skipped_in_a_row, self.cfg.ppo.max_skipped_updates)
            return 1
        if stop:
            reasons = [n for f, n in ((STOP_REQUEUE, "SIGUSR1"), (STOP_TERM, "SIGTERM/SIGINT"),
                                      (STOP_BUDGET, "time budget")) if stop & f]
            log.info("stopping at update %d (%s); %s", self.update, ", ".join(reasons),
                     "checkpoint NOT saved" if unsaved else "checkpoint saved")
            if stop & STOP_REQUEUE and self.ctx.is_main:
                signals.requeue_slurm_job()
        else:
            log.info("finished: %d env steps in %d updates", self.env_steps, self.update)
        return 1 if unsaved else 0

    def _report_unsaved(self) -> bool:
        """True, with an error naming what a resume would start from, when the final checkpoint was not written."""
        if not self.last_save_failed:
            return False
        newest = self.checkpoints.checkpoints()
        log.error("the final checkpoint (update %d) was not written; a resume continues from %s", self.update,
                  newest[-1].name if newest else "scratch (no checkpoint on disk)")
        return True

    # ---------------------------------------------------------------- outputs
    def _scalars(self, r, lr: float) -> dict[str, float]:
        self.window.append((r.episode_sums, r.episode_counts, r.env_steps_this_update, r.update_time_max))
        sums = sum(w[0] for w in self.window)
        counts = sum(w[1] for w in self.window)
        fps = sum(w[2] for w in self.window) / max(sum(w[3] for w in self.window), 1e-9)
        out: dict[str, float] = {"fps": fps, "perf/fps": fps, "perf/fps_update": r.env_steps_this_update /
                                 max(r.update_time_max, 1e-9), "loss/lr": lr}
        names = {"return": "reward", "length": "episode_length"}
        for i, key in enumerate(self.metric_names):
            if counts[i] > 0:
                out[f"train/{names.get(key, key)}"] = float(sums[i] / counts[i])
        out["train/episodes"] = float(r.episode_counts[0])
        out.update({f"loss/{k}": v for k, v in r.losses.items()})
        out.update(r.perf)
        out.update(r.preempt)
        out["loss/skipped_steps"] = float(r.skipped_steps)
        out.update(self.scene_window.scalars(r))
        return out

    # ------------------------------------------------------------ saved state
    # State of the running episodes: restored only when the collector's episodes continue.
    episode_owners = ("advantage", "reference", "reward_returns")

    def saved_state_owners(self) -> dict[str, Stateful]:
        """Every rank's own saved-state owners, one namespace each, in the order they are restored ("collector":
        the running episodes). Adding a piece of saved state is adding its owner here: the checkpoint manager
        saves it, and resume restores it."""
        owners: dict[str, Any] = {"rng": ckpt.RngState(self.ctx.device),
                                  "collector": RunningEpisodes(self, saved=not self.learning.overlapped),
                                  "advantage": self.advantage}
        if self.reference is not None:
            owners["reference"] = self.reference
        owners.update(self.normalization.episode_owners())  # normalize.reward: each env's running return
        return owners

    def _checkpoint_manager(self) -> CheckpointManager:
        """The one checkpoint manager, given every owner: the shared ones (the same on every rank), then each
        rank's own."""
        manager = CheckpointManager(self.cfg, self.ctx, self.run_claim)
        manager.register("model", self.policy, shared=True)
        manager.register("optimizer", self.updater.optimizer, shared=True)
        manager.register("counters", Counters(self), shared=True)
        for name, owner in self.normalization.shared_owners().items():  # normalize.reward: the return statistics
            manager.register(name, owner, shared=True)
        for name, owner in self.saved_state_owners().items():
            if name == "collector":
                manager.register_episodes(name, owner)
            else:
                manager.register(name, owner, episodic=name in self.episode_owners)
        return manager

    def state_dict(self) -> dict[str, Any]:
        """Everything a checkpoint holds of this trainer: model, optimizer, counters (the training progress every
        rank agrees on) and "rank": this rank's owners' states {namespace: state}; what `_save` writes."""
        return self.checkpoints.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Exact inverse of `state_dict` (CheckpointManager.load_state_dict)."""
        self.checkpoints.load_state_dict(state)

    def remap(self, values: Any, saved: tuple[str, ...]) -> np.ndarray:
        """A saved window row (columns `saved`) in this run's metric columns; a name this run lacks is dropped."""
        out = np.zeros(len(self.metric_names))
        index = {n: i for i, n in enumerate(self.metric_names)}
        for name, value in zip(saved, np.asarray(values, np.float64)):
            if name in index:
                out[index[name]] = value
        return out

    def _save(self) -> None:
        """The checkpoint of this update: every rank's state, written by rank 0 (CheckpointManager.save)."""
        self.last_save_failed = not self.checkpoints.save(self.update)

    def close(self) -> None:
        self.learning.close()
        self.writer.close()
        self.envs.close()
        self.run_claim.release()
