"""The builder: every part of a training run assembled once from the config, in dependency order, and the only
place a mode is decided (rollout.overlap_learning, normalisation, the advantage estimator, the KL reference).

    run dir       the stored config checked, the run dir claimed (train/startup.py)
    envs          this rank's vector env (rank_env_spec: which envs a rank builds)
    normalisation built from the config and the spaces (ddppo.normalization); the policy and the collector take
                  their parts at construction
    policy        the learner's; under rollout.overlap_learning an acting copy acts for it; a library image
                  encoder's weights file (policy.encoder_weights) put in when no checkpoint gives them; run.compile
                  compiles their encoders (ddppo/model/compiled.py), run.precision is handed to every forward's caller
    advantage     the estimator ppo.advantage names (ddppo.advantage); its class, asked first, says whether the
                  policy gets a value head and how many envs share each episode
    updater       the PPO update (ddppo.ppo), with the KL reference (ppo.kl_ref.checkpoint)
    scoring       the scoring stage (ddppo.rollout.scoring): reward.model, normalize.reward's scaling and truncation
                  bootstraps, seeing each step the collector stores and making the rewards before advantages
    collector     the rollout strategy rollout.mode / rollout.overlap name (ddppo.rollout.factory), acting through
                  an Actor, with the episode observers (episode metrics, scenes)
    learning      serial, or overlapped learning (train/learning.py, train/overlap_learning.py), over the phases of
                  one update (train/phases.py)
    progress      update, env steps, ... (train/progress.py), a saved-state owner of its own
    checkpoints   the checkpoint manager, given every saved-state owner; it resumes them
    scene costs   each scene's measured step time, kept in the run dir for placing scenes by cost (train/scene_costs.py)
    sinks         metrics.jsonl, TensorBoard, W&B (train/metrics.py, train/wandb_sink.py)
    watchdog      the per-update bound (ddppo/watchdog.py), armed by the loop around each update
    loop          train/loop.py, which only iterates over them

`Trainer(cfg, ctx)` builds; `train()` runs the loop; `close()` always (also on error).
"""

from __future__ import annotations

import functools
import random
import time
from typing import Any

import numpy as np
import torch

from ddppo import checkpoint as ckpt
from ddppo import watchdog
from ddppo.advantage import estimator_class
from ddppo.checkpoint.manager import CheckpointManager
from ddppo.config import Config
from ddppo.distributed import TRAIN, DistContext
from ddppo.envs.base import rank_env_spec
from ddppo.envs.registry import make_vec_env
from ddppo.model.build import make_policy
from ddppo.model.compiled import compile_policy
from ddppo.model.encoder_weights import EncoderWeightsRecord
from ddppo.model import kept
from ddppo.model.precision import store_memory_in, with_resolved_precision
from ddppo.normalization import build_normalization
from ddppo.ppo.reference import ReferencePolicy
from ddppo.ppo.update import GroupedOptimizer, PPOUpdater, reset_critic
from ddppo.rollout.acting import Actor
from ddppo.rollout.collector import RolloutCollector
from ddppo.rollout.episode_metrics import env_metric_names
from ddppo.rollout.factory import episode_observers, make_collector, storage_steps
from ddppo.rollout.preemption import Preemption
from ddppo.rollout.reward_model import reward_model_for
from ddppo.rollout.scenes import env_scene_names
from ddppo.rollout.scoring import Scoring
from ddppo.rollout.storage import RolloutStorage
from ddppo.rundir import RunDir
from ddppo.timing import Timer
from ddppo.train.bottleneck import diagnose
from ddppo.train.learning import SerialLearning
from ddppo.train.loop import TrainingLoop
from ddppo.train.metrics import MetricsWriter, fixed_tags
from ddppo.train.objective import Objective
from ddppo.train.overlap_learning import OverlapLearning, acting_copy
from ddppo.train.phases import Phases
from ddppo.train.progress import Progress
from ddppo.train.scene_costs import SceneCosts, ScenePlacement
from ddppo.train.startup import check_run_dir, claim_run_dir, write_run_dir
from ddppo.train.stats import SceneWindow, agree_metric_names, agree_scene_names
from ddppo.train.wandb_sink import WandbSink, check_available


class RunningEpisodes:
    """The owner of the running episodes (namespace "collector"): the collector's observation, start flags,
    recurrent state and environment state; resuming without them starts fresh episodes seeded from the update.
    Under rollout.overlap_learning nothing is saved (`saved` False): at a checkpoint the collector has already
    collected the next rollout, which no update has learned on; it is dropped, and a resumed run starts fresh
    episodes (train/overlap_learning.py)."""

    def __init__(self, collector: RolloutCollector, progress: Progress, saved: bool):
        self.collector, self.progress, self.saved = collector, progress, saved

    def state_dict(self) -> dict[str, Any] | None:
        return self.collector.state_dict() if self.saved else None

    def resume(self, state: dict[str, Any] | None) -> bool:
        return self.collector.resume(state, self.progress.update)


class UpdateWatchdog:
    """ddppo/watchdog.py's per-update bound as the loop arms it: dist.update_timeout_s (the first update of the
    process at least dist.startup_timeout_s), disarmed at the end of each update."""

    def __init__(self, cfg: Config):
        self.seconds, self.first_seconds = cfg.dist.update_timeout_s, cfg.dist.startup_timeout_s

    def arm(self) -> None:
        watchdog.arm(self.seconds, self.first_seconds)

    def disarm(self) -> None:
        watchdog.disarm()


class Trainer:
    """The parts of one training run, built from `cfg` on this rank (the module docstring lists them)."""

    def __init__(self, cfg: Config, ctx: DistContext):
        # run.precision=auto resolved to what this device runs (the value config.yaml and the checkpoints
        # record); bf16 on hardware without it: one line, before anything
        cfg = with_resolved_precision(cfg, ctx.device, announce=ctx.is_main)
        self.cfg, self.ctx = cfg, ctx
        self.timer = Timer(ctx.device)
        self.started = time.monotonic()
        self.config_changes = check_run_dir(cfg)  # refuses a shape change; config.yaml is written once started
        check_available(cfg)  # W&B enabled but not installed: every rank stops here, before any collective
        self.run_claim = claim_run_dir(cfg, ctx)  # one live writer: a second `ddppo train` here refuses (all ranks)
        try:
            self.advantage_class = estimator_class(cfg.ppo)  # its needs shape the envs and the policy
            # the scene costs an earlier job of this run measured (the run dir, shared by every rank), where it has
            # them: envs that place scenes by cost read them when their options name no file
            costs = RunDir(cfg.run.dir).scene_costs_path
            self.env_spec = rank_env_spec(ctx, cfg.env.num_envs, ctx.seed, cfg.env.num_workers,
                                          group_size=self.advantage_class.env_group_size(cfg.ppo),
                                          scene_costs=str(costs) if costs.is_file() else "")
            self.envs = make_vec_env(cfg.env.name, cfg.env_options, self.env_spec)
            try:
                self._build()
            except BaseException:
                self.envs.close()
                raise
        except BaseException:
            self.run_claim.release(failed_start=True)
            raise

    def _build(self) -> None:
        cfg, ctx, spaces = self.cfg, self.ctx, (self.envs.observation_space, self.envs.action_space)
        num_envs = self.env_spec.num_envs
        torch.manual_seed(ctx.seed)
        np.random.seed(ctx.seed % 2**32)
        random.seed(ctx.seed)  # saved and restored with every checkpoint: seeded too, so runs repeat
        self.normalization = norm = build_normalization(cfg, *spaces, num_envs, ctx)
        self.policy = make_policy(*spaces, cfg.policy, value_head=self.advantage_class.critic, obs_norm=norm.obs,
                                  normalize_inputs=norm.policy_normalizes).to(ctx.device)
        store_memory_in(self.policy, cfg.run.precision)  # a transformer's KV cache in bf16 under bf16
        # policy.encoder_weights: rank 0 puts the file's weights in before a checkpoint may replace them
        self.encoder_weights = EncoderWeightsRecord(self.policy, cfg.policy.encoder_weights)
        self.encoder_weights.start(ctx)
        self.advantage = self.advantage_class(cfg.ppo, num_envs)
        self.updater = PPOUpdater(self.policy, cfg.ppo, ctx, cfg.dist.bucket_mb, cfg.rollout.sample_weighting,
                                  advantage=self.advantage, precision=cfg.run.precision, group=TRAIN)
        self.reward_model = reward_model_for(cfg.reward, num_envs, ctx.device, self.timer, cfg.run.precision)
        self.reference = None
        if cfg.ppo.kl_ref.checkpoint:
            self.reference = ReferencePolicy(cfg.ppo.kl_ref, *spaces, num_envs, ctx.device, cfg.run.precision)
        self.metric_names = agree_metric_names(ctx, env_metric_names(self.envs))  # train/<name>, same on all ranks
        self.scene_names = agree_scene_names(ctx, env_scene_names(self.envs))  # train/scene/<name>/*, likewise
        self.progress = Progress(self.metric_names, cfg.log.window,
                                 cfg.ppo.kl_ref.beta if self.reference is not None else None,
                                 SceneWindow(self.scene_names, cfg.log.window))
        overlap = cfg.rollout.overlap_learning  # the one place the learning mode is decided
        acting = acting_copy(self.policy) if overlap else self.policy  # collects while the learner updates
        if cfg.run.compile:  # after the acting copy: each policy compiles its own encoders
            for policy in {id(p): p for p in (self.policy, acting)}.values():
                compile_policy(policy, cfg.policy.architecture)
        storage = self.new_storage()
        # reward model, reward scaling and truncation bootstraps: between collect and advantages (rollout/scoring.py)
        self.scoring = Scoring(cfg.ppo.gamma, norm.rewards, self.reward_model, cfg.reward.env_weight,
                               cfg.reward.model_weight)
        actor = Actor(self.envs, acting, ctx.device, self.timer, f"env.name={cfg.env.name} (rank {ctx.rank})",
                      norm.obs_transform, cfg.run.precision)
        preemption = Preemption(cfg.preemption, ctx, cfg.rollout.num_steps, TRAIN)
        self.collector = make_collector(cfg.rollout, actor, preemption, self.scoring, episode_observers(self.envs, self.metric_names, self.scene_names))
        objective = Objective(self.scoring, cfg.ppo.advantage == "grpo", cfg.reward.env_weight,
                              cfg.reward.model_weight)
        self.phases = Phases(cfg, ctx, self.collector, self.scoring, self.advantage, norm, self.updater,
                             self.reference, self.progress, self.timer, objective)
        self.learning = (OverlapLearning(self.phases, self.policy, acting, storage, self.new_storage(), ctx.device,
                                         ctx.seed) if overlap else SerialLearning(self.phases, storage))
        self.checkpoints = self._checkpoint_manager(saved_episodes=not overlap)
        resumed = self.checkpoints.resume()
        if not resumed and cfg.checkpoint.path and cfg.ppo.reset_critic:
            reset_critic(self.policy)  # fine-tuning a policy whose critic was never trained (behaviour cloning)
        self.encoder_weights.finish(model_loaded=self.checkpoints.model_loaded)
        ctx.broadcast_module(self.policy)  # identical parameters everywhere, once
        if self.reference is not None:  # it reads the frozen features the rollouts keep: the same frozen encoder
            self.reference.check_kept(self.policy)
        write_run_dir(cfg, ctx, self.config_changes)  # the first write: a start that fails leaves no trace
        self.writer = MetricsWriter(cfg.run.dir, ctx.is_main, cfg.log.tensorboard, self.progress.update,
                                    self.progress.env_steps,
                                    wandb=WandbSink(cfg) if ctx.is_main and cfg.log.wandb.enabled else None,
                                    resume_record=self.progress.metrics_record,
                                    fixed=fixed_tags(cfg, ctx.world_size))
        scene_costs = SceneCosts(self.scene_names, RunDir(cfg.run.dir), ctx.is_main)
        self.loop = TrainingLoop(cfg, ctx, self.learning, self.progress, self.checkpoints, self.writer, self.timer,
                                 functools.partial(diagnose, overlapped=overlap),
                                 sum(p.numel() for p in self.policy.parameters()),
                                 kl_adapt=self.reference.adapt if self.reference is not None else None,
                                 watchdog=UpdateWatchdog(cfg), started=self.started,
                                 scene_costs=scene_costs, placement=ScenePlacement(
                                     scene_costs, self.collector, cfg.env.placement_interval_updates))

    def new_storage(self) -> RolloutStorage:
        """Buffers for one rollout of this rank (a learning strategy owns one or two; a benchmark may collect into
        one of its own)."""
        num_envs = self.env_spec.num_envs
        stored = kept.specs(self.envs.observation_space, getattr(self.policy, "kept", None), self.cfg.run.precision)
        return RolloutStorage(storage_steps(self.cfg.rollout), num_envs, stored, self.envs.action_space,
                              self.policy.initial_memory(num_envs), self.ctx.device)

    def _checkpoint_manager(self, saved_episodes: bool) -> CheckpointManager:
        """The one checkpoint manager, given every saved-state owner: the shared ones (the same on every rank),
        then each rank's own, restored in that order. Adding a piece of saved state is registering its owner
        here: the manager saves it, and resume restores it."""
        manager = CheckpointManager(self.cfg, self.ctx, self.run_claim)  # the claim's heartbeat at every save
        manager.register("model", self.policy, shared=True)
        manager.register("optimizer", GroupedOptimizer(self.updater.optimizer, self.updater.params), shared=True)
        manager.register("counters", self.progress, shared=True)
        if self.cfg.policy.encoder_weights:  # the file's sha256, compared on resume
            manager.register("encoder_weights", self.encoder_weights, shared=True)
        for name, owner in self.normalization.shared_owners().items():  # normalize.reward: the return statistics
            manager.register(name, owner, shared=True)
        manager.register("rng", ckpt.RngState(self.ctx.device))
        manager.register_episodes("collector", RunningEpisodes(self.collector, self.progress, saved_episodes))
        # per-episode state: restored only when the collector's episodes continue
        manager.register("advantage", self.advantage, episodic=True)
        if self.reference is not None:
            manager.register("reference", self.reference, episodic=True)
        for name, owner in self.normalization.episode_owners().items():  # each env's running return
            manager.register(name, owner, episodic=True)
        if self.reward_model is not None:  # which model and weights (checked at resume), each env's episode step
            for name, owner in self.reward_model.shared_owners().items():
                manager.register(name, owner, shared=True)
            for name, owner in self.reward_model.episode_owners().items():
                manager.register(name, owner, episodic=True)
        return manager

    def train(self) -> int:
        """Run the loop until the step budget, a signal, the time budget or repeated non-finite updates; the
        exit code."""
        return self.loop.run()

    def close(self) -> None:
        self.learning.close()
        self.writer.close()
        self.envs.close()
        self.run_claim.release()
