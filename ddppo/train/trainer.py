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

import numpy as np
import torch

from envs.registry import EnvSpec, make_vec_env
from ddppo import checkpoint as ckpt
from ddppo import signals
from ddppo.config import Config, to_yaml
from ddppo.distributed import DistContext
from ddppo import timing
from ddppo.timing import Timer
from ddppo.train.metrics import MetricsWriter, progress_line
from ddppo.train.wandb_sink import WandbSink, check_available
from ddppo.model.build import make_policy
from ddppo.ppo.reference import ReferencePolicy
from ddppo.ppo.update import PPOUpdater
from ddppo.train.state import check_run_dir, restore, write_run_dir
from ddppo.rollout.acting import rank_env_spec
from ddppo.rollout.collector import EPISODE_KEYS
from ddppo.rollout.factory import make_collector, storage_steps
from ddppo.rollout.grpo import grpo_advantages
from ddppo.rollout.preemption import Preemption
from ddppo.rollout.storage import RolloutStorage
from ddppo.train.bottleneck import diagnose
from ddppo.train.stats import StepStats, memory_usage, reduce_stats

log = logging.getLogger(__name__)

# stop flags, OR-ed over ranks once per update
STOP_TERM, STOP_REQUEUE, STOP_BUDGET, STOP_NONFINITE = 1, 2, 4, 8


class Trainer:
    def __init__(self, cfg: Config, ctx: DistContext):
        self.cfg, self.ctx = cfg, ctx
        self.timer = Timer(ctx.device)
        self.start_time = time.monotonic()
        self.config_changes = check_run_dir(cfg)  # refuses a shape change; config.yaml is written once started
        check_available(cfg)  # W&B enabled but not installed: every rank stops here, before any collective
        spec = rank_env_spec(ctx, cfg.env.num_envs, ctx.seed, cfg.env.num_workers,
                             group_size=cfg.ppo.group_size if cfg.ppo.advantage == "grpo" else 1)
        self.env_spec = spec
        self.envs = make_vec_env(cfg.env.name, cfg.env_options, spec)
        try:
            self._build(spec)
        except BaseException:
            self.envs.close()
            raise

    def _build(self, spec: EnvSpec) -> None:
        cfg, ctx = self.cfg, self.ctx
        torch.manual_seed(ctx.seed)
        np.random.seed(ctx.seed % 2**32)
        random.seed(ctx.seed)  # saved and restored with every checkpoint: seeded too, so runs repeat
        self.policy = make_policy(self.envs.observation_space, self.envs.action_space, cfg.policy,
                                  value_head=cfg.ppo.advantage == "gae").to(ctx.device)
        self.grpo_carry = torch.zeros(2, spec.num_envs)  # GRPO: partial returns and finished flags
        self.updater = PPOUpdater(self.policy, cfg.ppo, ctx, cfg.dist.bucket_mb)
        hidden_shape = tuple(self.policy.initial_hidden(spec.num_envs).shape)
        self.storage = RolloutStorage(storage_steps(cfg.rollout), spec.num_envs, self.envs.observation_space,
                                      self.envs.action_space, hidden_shape, ctx.device)
        self.collector = make_collector(cfg.rollout, self.envs, self.policy, self.storage,
                                        Preemption(cfg.preemption, ctx, cfg.rollout.num_steps), self.timer,
                                        cfg.ppo.gamma, ctx.device, label=f"env.name={cfg.env.name} (rank {ctx.rank})")
        self.reference = None
        if cfg.ppo.kl_ref.checkpoint:
            self.reference = ReferencePolicy(cfg.ppo.kl_ref, self.envs.observation_space, self.envs.action_space,
                                             spec.num_envs, ctx.device)
        self.update, self.env_steps, self.skipped_in_a_row = 0, 0, 0
        self.last_save_failed = False  # rank 0: the newest checkpoint could not be written (disk full, ...)
        self.window: deque = deque(maxlen=cfg.log.window)  # recent updates' episode stats (train/* is windowed)
        restored = restore(cfg, ctx, self.policy, self.updater.optimizer, self.collector)
        if restored is not None:
            self.load_state_dict(*restored)
        ctx.broadcast_module(self.policy)  # identical parameters everywhere, once
        write_run_dir(cfg, ctx, self.config_changes)  # the first write: a start that fails leaves no trace
        self.writer = MetricsWriter(cfg.run.dir, ctx.is_main, cfg.log.tensorboard, self.update, self.env_steps,
                                    wandb=WandbSink(cfg) if ctx.is_main and cfg.log.wandb.enabled else None)
        self.perf_window: deque = deque(maxlen=max(cfg.log.window, 20))

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
        while True:
            update = self.update + 1
            t0 = time.perf_counter()
            collected = self.collector.collect(update)
            with self.timer(timing.STRAGGLER_WAIT):
                ctx.rollout_barrier(collected.steps)
            ctx.mark_started()
            with self.timer(timing.GAE):
                self.compute_advantages()
            lr = self.updater.set_lr_for(self.env_steps, cfg.run.total_env_steps)
            ref_params, beta = None, 0.0
            if self.reference is not None:
                with self.timer(timing.REFERENCE_FORWARD):
                    ref_params, beta = self.reference.annotate(self.storage), self.reference.beta
            result = self.updater.update(self.storage, self.timer, ref_params, beta)
            local = StepStats(collected, result, self._local_stop_flags(), time.perf_counter() - t0,
                              self.timer.pop(), *memory_usage(ctx.device))
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
            if stop or done:
                return self._finish(stop)

    def compute_advantages(self) -> None:
        """GAE (with the critic's bootstrap) or GRPO advantages for the collected rollout."""
        s, ppo = self.storage, self.cfg.ppo
        if ppo.advantage == "grpo":
            L = s.step
            adv, mask, self.grpo_carry = grpo_advantages(s.rewards[:L].cpu(), s.dones[:L].cpu(), s.idle[:L].cpu(),
                                                         self.grpo_carry, ppo.group_size)
            s.set_advantages(adv, mask)
        else:
            s.compute_returns(self.collector.last_value(), ppo.gamma, ppo.gae_lambda)

    def _log_bottleneck(self) -> None:
        window = list(self.perf_window)
        found = diagnose(window, max(p.get("perf/memory_fraction_max", 0.0) for p in window))
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
        newest = ckpt.list_checkpoints(self.cfg.run.dir)
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
        for i, key in enumerate(EPISODE_KEYS):
            if counts[i] > 0:
                out[f"train/{names.get(key, key)}"] = float(sums[i] / counts[i])
        out["train/episodes"] = float(r.episode_counts[0])
        out.update({f"loss/{k}": v for k, v in r.losses.items()})
        out.update(r.perf)
        out.update(r.preempt)
        out["loss/skipped_steps"] = float(r.skipped_steps)
        return out

    # ------------------------------------------------------------ saved state
    def state_dict(self) -> dict:
        """The training progress every rank agrees on (the checkpoint's counters)."""
        return {"update": self.update, "env_steps": self.env_steps, "skipped_in_a_row": self.skipped_in_a_row,
                "kl_beta": self.reference.state_dict()["beta"] if self.reference is not None else 0.0,
                "window": [list(w) for w in self.window]}

    def rank_state_dict(self) -> dict:
        """This rank's own state: RNGs, where its rollout continues, per-episode carries."""
        state = {"rng": ckpt.rng_state(self.ctx.device), **self.collector.state_dict(),
                 "grpo_carry": self.grpo_carry.clone()}
        if self.reference is not None:
            state["ref_hidden"] = self.reference.state_dict()["hidden"]
        return state

    def load_state_dict(self, counters: dict, rank_state: dict | None = None) -> None:
        """Inverse of `state_dict` (and of the per-episode part of `rank_state_dict`: RNGs and the collector
        are put back by train/state.restore, which decides whether this rank's environments continue;
        `rank_state` is None when they start fresh episodes)."""
        counters = {**ckpt.COUNTER_DEFAULTS, **counters}
        self.update, self.env_steps = counters["update"], counters["env_steps"]
        self.skipped_in_a_row = counters["skipped_in_a_row"]
        self.window.clear()
        for sums, counts, steps, seconds in counters["window"]:
            self.window.append((np.asarray(sums), np.asarray(counts), steps, seconds))
        if rank_state is not None and "grpo_carry" in rank_state:
            self.grpo_carry = torch.as_tensor(rank_state["grpo_carry"]).float().cpu()
        if self.reference is not None:
            ref = {"beta": self.reference.beta if counters["kl_beta"] is None else counters["kl_beta"]}
            if rank_state is not None and "ref_hidden" in rank_state:
                ref["hidden"] = rank_state["ref_hidden"]
            self.reference.load_state_dict(ref)

    def _save(self) -> None:
        """Every rank hands its own state to rank 0, which writes one checkpoint file."""
        blobs = self.ctx.gather_objects(ckpt.to_bytes(ckpt.to_storable(self.rank_state_dict())))
        if not self.ctx.is_main:
            return
        self.last_save_failed = True
        payload = ckpt.payload(self.policy.state_dict(), self.updater.optimizer.state_dict(), self.state_dict(),
                               to_yaml(self.cfg), [ckpt.from_bytes(b) for b in blobs])
        try:
            path = ckpt.save(self.cfg.run.dir, self.update, payload, self.cfg.checkpoint.keep_last)
            log.debug("saved %s", path)
            self.last_save_failed = False
        except ckpt.CheckpointError as err:
            log.error("%s", err)
        except OSError as err:
            log.error("could not write checkpoint for update %d (%s); the previous checkpoints are intact",
                      self.update, err)

    def close(self) -> None:
        self.writer.close()
        self.envs.close()
