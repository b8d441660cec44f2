"""`ddppo imitate CONFIG imitation.data=DIR`: behaviour cloning of the policy `ddppo train` would train, distributed
as training is.

Each rank reads its share of the dataset's episodes (ddppo/imitation/demonstrations.py) and back-propagates, per
update, the weighted mean negative log-likelihood of the expert's actions over its batch of whole episodes (or
chunks of imitation.chunk_length steps with the recurrent state carried); the gradients are all-reduced, weighted by
each rank's sample weight (ddppo/distributed/buckets.py), so the step is the gradient of the mean over every rank's
samples, and every rank applies it to identical parameters. The parts are training's: the policy builder, the
observation normaliser (its statistics fitted once on the training episodes), the run directory's claim and
config, the checkpoint manager (model, optimizer, counters, rng: an ordinary ddppo checkpoint that `ddppo eval`,
`Agent.from_checkpoint`, `checkpoint.path` and `ppo.kl_ref.checkpoint` take) and the metrics sinks
(metrics.jsonl, TensorBoard: `imitate/*`, with the demonstration steps learned on as the step).
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any

import torch

from ddppo import checkpoint as ckpt
from ddppo import signals
from ddppo.advantage import estimator_class
from ddppo.checkpoint.manager import CheckpointManager
from ddppo.config import Config
from ddppo.distributed import DistContext
from ddppo.distributed.buckets import GradientReducer
from ddppo.envs.base import EnvSpec
from ddppo.envs.registry import make_vec_env
from ddppo.errors import ConfigError
from ddppo.imitation.dataset import Dataset
from ddppo.imitation.demonstrations import Batch, RankDemonstrations, inflection_coefficient
from ddppo.model.actions import BernoulliActions, GaussianActions, MultiCategoricalActions
from ddppo.model.build import make_policy
from ddppo.model.precision import autocast, to_fp32, with_resolved_precision
from ddppo.normalization import observation_normalizer
from ddppo.normalization.moments import batch_moments, merge_moments
from ddppo.ppo.update import make_adam
from ddppo.train.metrics import MetricsWriter
from ddppo.train.progress import Progress
from ddppo.train.startup import check_run_dir, claim_run_dir, write_run_dir

log = logging.getLogger(__name__)


def env_spaces(cfg: Config) -> tuple[Any, Any]:
    """The observation and action spaces of one env built from `cfg` (closed at once)."""
    envs = make_vec_env(cfg.env.name, cfg.env_options, EnvSpec(num_envs=1, seed=cfg.run.seed))
    try:
        return envs.observation_space, envs.action_space
    finally:
        envs.close()


def bc_loss(policy: Any, batch: Batch, chunk: int, precision: str = "fp32"
            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(sum of weight x NLL, sum of weights, per-sample scores (T, B): `bc_measure`'s, 1 where the greedy action is
    the expert's, or for Box actions the squared error of the mean) over `batch`; through chunks of `chunk` steps
    (0: whole), the policy's memory carried from one chunk to the next without gradient; the forwards in
    `precision`'s autocast (run.precision), the loss in float32."""
    T, B = batch.valid.shape
    memory = policy.initial_memory(B, batch.valid.device)
    step = chunk or T
    nll, hits = [], []
    for t0 in range(0, T, step):
        sl = slice(t0, t0 + step)
        obs = {k: v[sl] for k, v in batch.obs.items()}
        with autocast(precision, batch.valid.device):
            logp, _, _, params = policy.evaluate_with_params(obs, memory, batch.start[sl], batch.actions[sl])
        logp, params = to_fp32(logp, params)
        nll.append(-logp)
        hits.append(_hits(policy, params, batch.actions[sl]))
        if t0 + step < T:  # the policy's memory after the chunk (ddppo/model/memory.py), without gradient
            with autocast(precision, batch.valid.device):
                memory = policy.sequence_params(obs, memory, batch.start[sl], batch.actions[sl])[1]
    weight = batch.weight * batch.valid
    return (torch.cat(nll) * weight).sum(), weight.sum(), torch.cat(hits)


def bc_measure(policy: Any) -> str:
    """What the per-sample scores of `bc_loss` measure for `policy`'s action distribution: `action_mse` for a Box
    space's Gaussian (the squared error of its mean), `accuracy` for every other kind (the greedy action is the
    expert's)."""
    return "action_mse" if isinstance(policy.action_kind, GaussianActions) else "accuracy"


def _hits(policy: Any, params: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
    """Per step: 1 where the policy's greedy action is the expert's (every dimension of a MultiDiscrete or
    MultiBinary action), 0 elsewhere; for a Box action, the squared error of the mean (`bc_measure`)."""
    kind = policy.action_kind
    with torch.no_grad():
        mode = kind.mode(params)
        if bc_measure(policy) == "action_mse":
            return ((mode - actions) ** 2).mean(-1)
        same = mode == actions.to(mode.dtype)
        if isinstance(kind, (MultiCategoricalActions, BernoulliActions)):  # a vector action: every dimension
            same = same.all(-1)
        return same.float()


class Imitation:
    """The parts of one behaviour-cloning run on this rank, built from `cfg`; `run()` trains, `close()` always."""

    def __init__(self, cfg: Config, ctx: DistContext):
        cfg = with_resolved_precision(cfg, ctx.device, announce=ctx.is_main)  # auto -> what this device runs
        self.cfg, self.ctx = cfg, ctx
        if not cfg.imitation.data:
            raise ConfigError("ddppo imitate needs imitation.data=DIR, a dataset `ddppo record` wrote")
        self.data = Dataset(cfg.imitation.data)
        obs_space, action_space = env_spaces(cfg)
        self.data.check_fits(cfg.env.name, obs_space, action_space)
        if cfg.imitation.inflection_weighting and not hasattr(action_space, "n"):
            raise ConfigError("imitation.inflection_weighting=true weighs changes of discrete actions; this env's "
                              "actions are continuous: set imitation.inflection_weighting=false")
        self.changes = check_run_dir(cfg)
        self.claim = claim_run_dir(cfg, ctx)
        try:
            self._build(obs_space, action_space)
        except BaseException:
            self.claim.release(failed_start=True)
            raise

    def _build(self, obs_space: Any, action_space: Any) -> None:
        cfg, ctx = self.cfg, self.ctx
        torch.manual_seed(ctx.seed)
        self.demos = RankDemonstrations(self.data, cfg.imitation.val_fraction, ctx.rank, ctx.world_size, cfg.run.seed)
        self.policy = make_policy(obs_space, action_space, cfg.policy, value_head=estimator_class(cfg.ppo).critic,
                                  obs_norm=observation_normalizer(cfg.normalize, cfg.policy, obs_space, action_space)
                                  ).to(ctx.device)
        self.params = [p for p in self.policy.parameters() if p.requires_grad]
        self.optimizer = make_adam(self.params, cfg.imitation.lr, cfg.ppo.adam_eps)
        self.reducer = GradientReducer(ctx, self.params, cfg.dist.bucket_mb)
        self.progress = Progress((), cfg.log.window)
        self.checkpoints = CheckpointManager(cfg, ctx, self.claim)
        self.checkpoints.register("model", self.policy, shared=True)
        self.checkpoints.register("optimizer", self.optimizer, shared=True)
        self.checkpoints.register("counters", self.progress, shared=True)
        self.checkpoints.register("rng", ckpt.RngState(ctx.device))
        if not self.checkpoints.resume():
            self._fit_obs_statistics()
        ctx.broadcast_module(self.policy)
        if cfg.imitation.inflection_weighting:
            steps, changes = self.ctx.all_reduce_sums(torch.tensor(self.demos.train_inflections(), dtype=torch.float64),
                                                      "inflection counts").tolist()
            self.demos.inflection_coef = inflection_coefficient(steps, changes)
        write_run_dir(cfg, ctx, self.changes)
        self.writer = MetricsWriter(cfg.run.dir, ctx.is_main, cfg.log.tensorboard, self.progress.update,
                                    self.progress.env_steps)

    def _fit_obs_statistics(self) -> None:
        """The policy's observation statistics (normalize.obs) from every rank's training episodes, merged in rank
        order (the same on every rank)."""
        norm = getattr(self.policy, "obs_norm", None)
        if norm is None:
            return
        for key in norm.keys:
            x = torch.from_numpy(self.demos.train.obs[key]).reshape(self.demos.train.num_steps, -1)
            n, mean, m2 = batch_moments(x)
            table = self.ctx.all_gather_stats(torch.cat([torch.tensor([n], dtype=torch.float64), mean, m2]))
            d = mean.numel()
            total = (0.0, torch.zeros(d, dtype=torch.float64), torch.zeros(d, dtype=torch.float64))
            for row in table:
                total = merge_moments(total, (float(row[0]), row[1:1 + d], row[1 + d:]))
            shape = norm.stats[key].mean.shape
            norm.stats[key].merge(torch.tensor(total[0]), total[1].view(shape), total[2].view(shape))

    # ------------------------------------------------------------------------------------------ the loop
    def run(self) -> int:
        cfg, progress = self.cfg, self.progress
        if progress.update >= cfg.imitation.updates:
            log.warning("%s already trained imitation.updates=%d updates: raise it to train more", cfg.run.dir,
                        cfg.imitation.updates)
            return 0
        log.info("behaviour cloning on %d episodes (%d held out) of %s, %d rank(s), from update %d",
                 self.data.num_episodes, len(self.demos.val.lengths), cfg.imitation.data, self.ctx.world_size,
                 progress.update)
        while True:
            update = progress.update + 1
            began = time.monotonic()
            scalars, samples, stop, requeue = self._update(update)
            progress.advance(update, samples, 0)
            scalars["perf/samples_per_s"] = samples / max(time.monotonic() - began, 1e-9)
            last = update >= cfg.imitation.updates or stop
            if update % cfg.imitation.eval_interval_updates == 0 or last:
                scalars.update(self.validate())
            self.writer.write(update, progress.env_steps, scalars)
            if update % cfg.checkpoint.interval_updates == 0 or last:
                self.checkpoints.save(update)
            if update % 10 == 0 or last:
                name = bc_measure(self.policy)
                log.info("update %d/%d: loss %.4f, %s %.3f%s", update, cfg.imitation.updates,
                         scalars["imitate/loss"], name, scalars[f"imitate/{name}"],
                         f", held-out {name} {scalars[f'imitate/val_{name}']:.3f}"
                         if f"imitate/val_{name}" in scalars else "")
            if last:
                self.writer.flush()
                if stop:  # a signal: saved above; SIGUSR1 (SLURM's time-limit notice) also requeues, as `ddppo train`
                    log.info("stopping at update %d (%s); checkpoint saved", update,
                             "SIGUSR1" if requeue else "SIGTERM/SIGINT")
                    if requeue and self.ctx.is_main:
                        signals.requeue_slurm_job()
                return 0

    def _update(self, update: int) -> tuple[dict[str, float], int, bool, bool]:
        """One optimiser step on every rank; (scalars, demonstration steps over every rank, stop agreed, requeue
        agreed: some rank received SIGUSR1)."""
        cfg = self.cfg.imitation
        self.policy.train()
        batch = self.demos.batch(update, cfg.batch_episodes, self.ctx.device)
        loss_sum, weight, hits = bc_loss(self.policy, batch, cfg.chunk_length, self.cfg.run.precision)
        for p in self.params:
            p.grad = None
        self.reducer.begin(weight.detach())
        (loss_sum / weight.clamp(min=1e-9)).backward()
        self.reducer.finish()
        norm = torch.nn.utils.clip_grad_norm_(self.params, cfg.max_grad_norm if cfg.max_grad_norm > 0 else math.inf)
        if math.isfinite(float(norm)):
            self.optimizer.step()
        valid = batch.valid
        sig = signals.pending()
        flags = torch.tensor([float(sig != 0), float(sig == int(signals.signal.SIGUSR1))], device=valid.device)
        local = torch.cat([torch.stack([loss_sum.detach(), weight.detach(), (hits * valid).sum(), valid.sum()]),
                           flags])
        total = self.ctx.all_reduce_sums(local, "imitation statistics").tolist()
        return ({"imitate/loss": total[0] / max(total[1], 1e-9),
                 f"imitate/{bc_measure(self.policy)}": total[2] / max(total[3], 1.0),
                 "imitate/grad_norm": float(norm), "imitate/lr": cfg.lr},
                int(total[3]), total[4] > 0, total[5] > 0)

    @torch.no_grad()
    def validate(self) -> dict[str, float]:
        """The held-out loss and `bc_measure` over every rank's held-out episodes (one all-reduce)."""
        self.policy.eval()
        sums = torch.zeros(4, dtype=torch.float64)
        for batch in self.demos.val_batches(self.cfg.imitation.batch_episodes, self.ctx.device):
            loss_sum, _, hits = bc_loss(self.policy, batch, self.cfg.imitation.chunk_length, self.cfg.run.precision)
            sums += torch.tensor([float(loss_sum), float(batch.valid.sum()), float((hits * batch.valid).sum()),
                                  float(batch.valid.sum())], dtype=torch.float64)
        total = self.ctx.all_reduce_sums(sums, "held-out statistics").tolist()
        if total[3] == 0:
            return {}
        return {"imitate/val_loss": total[0] / total[1], f"imitate/val_{bc_measure(self.policy)}": total[2] / total[3]}

    def close(self) -> None:
        if hasattr(self, "writer"):
            self.writer.close()
        self.claim.release()


def imitate(cfg: Config) -> int:
    """What `ddppo imitate` runs, on every rank (one process outside a launcher); its exit code."""
    from ddppo import user_code
    from ddppo.distributed import read_launch, run_in_process_group

    user_code.workdir_first()
    if not cfg.imitation.data:
        raise ConfigError("ddppo imitate needs imitation.data=DIR, a dataset `ddppo record` wrote")
    Dataset(cfg.imitation.data)  # a missing or empty dataset is refused before any process group starts

    def body(ctx: DistContext) -> int:
        run = Imitation(cfg, ctx)
        try:
            return run.run()
        finally:
            run.close()

    return run_in_process_group(cfg, read_launch(), body)

