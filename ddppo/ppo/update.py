"""The PPO update: epochs x minibatches, one gradient all-reduce per minibatch.

Gradient weighting (the documented default): each rank back-propagates the
mean loss over its own valid samples; `buckets.GradientReducer` (bucketed,
overlapped with backward) weights every rank by its sample count, so the applied gradient equals the
gradient of the mean loss over all valid samples of all ranks. A preempted
rank (fewer steps) therefore counts less, exactly as its data does.

Rank weighting (preemption.rank_weighting): the rollout's `rank_weight` (T / L_r, at most
1 / min_rollout_fraction: rollout/preemption.py) multiplies the count this rank hands the reducer, so the
applied gradient is sum_r(c_r n_r g_r) / sum_r(c_r n_r): every sample of rank r weighs c_r, and a preempted
rank's total weight is that of a full rollout (DDP's equal averaging of ranks, in exact form). The
per_sample scaling below uses the same weighted counts, so both compose unchanged.

Sample weighting in variable mode (`sample_weighting`, from rollout.variable_weighting): minibatches are split
by environment (recurrent sequences stay whole, every rank takes the same number of steps), and envs hold
segments of different lengths, so minibatches hold different numbers of samples. `per_minibatch` keeps each
minibatch's gradient the mean over its own samples (of all ranks): a sample of a short minibatch counts more
than one of a long one, and an env's weight depends on which envs share its minibatch. `per_sample` is VER's
weighting (habitat-baselines cuts shuffled steps into equal-size minibatches): after the all-reduce each
minibatch's gradient is multiplied by C_m / (N / M) (C_m: its valid samples over all ranks, N: the rollout's
valid samples over all ranks, from one all-reduce per update, M: ppo.num_mini_batch), so it is the gradient
of sum(w_i * loss_i) / (N / M) over the minibatch's samples of all ranks: over an epoch every valid sample of
every rank counts alike (times its importance weight w_i), whatever its env's segment length or minibatch.
With equal-size minibatches (fixed mode) the factor is exactly 1. Gradient clipping follows the scaling.
per_sample is variable mode's default: as fast to a threshold as per_minibatch within the spread of 5 seeds on
a skewed-speed env and gridnav (docs/results/ver-weighting.md), and the weighting the invariant above states.

Advantage normalisation over the rollout is the estimator's (ddppo/advantage/): `update` asks it once, before
the epochs, on every rank (GAE with ppo.normalize_advantage_per=update: over every valid sample of every rank,
one all-reduce); each minibatch's advantages pass through the estimator's `minibatch` (GAE with
ppo.normalize_advantage_per=minibatch standardises each minibatch on its own rank, as SB3 and CleanRL, without a
collective).

Empty minibatches: a minibatch with no valid sample on any rank makes no
optimiser step (nor Adam step count); the learning rate follows the env-step
counter, so there is no scheduler to keep in step.

Non-finite gradients: the all-reduced buffer is identical on every rank, so
every rank sees the same non-finite value and skips the same optimiser step;
the update is reported as skipped and counted by the trainer.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict

import torch

from ddppo.advantage import Advantages, Estimator
from ddppo.config import PPOConfig
from ddppo.distributed import TRAIN, DistContext
from ddppo import timing
from ddppo.distributed.buckets import GradientReducer
from ddppo.ppo.loss import SCALAR_NAMES, ppo_loss
from ddppo.model.actor_critic import ActorCritic
from ddppo.model.precision import autocast, to_fp32
from ddppo.ppo.batches import MiniBatch, Order, minibatches
from ddppo.rollout.rollout import Rollout


@dataclasses.dataclass
class UpdateResult:
    stats: dict[str, float]  # loss/* and diagnostics, averaged over minibatches
    skipped_steps: int  # optimiser steps skipped for non-finite gradients


EPOCH_KEYS = ("approx_kl", "clip_fraction", "ratio_min", "ratio_max", "ratio_mean")
# the first minibatch's terms, before any optimiser step: the log-probs of acting and of learning at the same
# parameters differ only by numerics (run.precision, kernels) and any lag of the acting copy
START_KEYS = ("ratio_dev", "clip_fraction")
# what the update measures besides the loss terms
UPDATE_KEYS = ("grad_norm", "explained_variance", *(f"{k}_start" for k in START_KEYS))
SAMPLE_WEIGHTINGS = ("per_minibatch", "per_sample")


class _Stats:
    """Per-minibatch loss vectors kept on the device, read back once per update (one host sync).

    Means over minibatches, except *ratio_min / *ratio_max, which keep the extreme; epoch{e}/<key> for the
    EPOCH_KEYS (staleness: how far each epoch has moved from the behaviour policy); grad_norm over the steps
    taken; <START_KEYS>_start from the update's first minibatch, where it has local samples.
    """

    def __init__(self) -> None:
        self.rows: list[tuple[int, torch.Tensor]] = []  # (epoch, loss vector) of minibatches with local samples
        self.grad_norms: list[float] = []
        self.first: tuple[torch.Tensor, torch.Tensor] | None = None  # the first minibatch's (loss vector, samples)
        self.started = False  # the first minibatch has been seen

    def result(self) -> dict[str, float]:
        sums: dict[str, float] = {}
        counts: dict[str, int] = defaultdict(int)

        def add(key: str, value: float) -> None:
            if key.endswith("ratio_min"):
                sums[key] = min(sums.get(key, value), value)
            elif key.endswith("ratio_max"):
                sums[key] = max(sums.get(key, value), value)
            else:
                sums[key] = sums.get(key, 0.0) + value
                counts[key] += 1

        values = torch.stack([v for _, v in self.rows]).tolist() if self.rows else []
        for (epoch, _), row in zip(self.rows, values):
            for k, v in zip(SCALAR_NAMES, row):
                add(k, v)
                if k in EPOCH_KEYS:
                    add(f"epoch{epoch}/{k}", v)
        for norm in self.grad_norms:
            add("grad_norm", norm)
        if self.first is not None and float(self.first[1]) > 0:  # its terms over no local sample are placeholders
            first = dict(zip(SCALAR_NAMES, self.first[0].tolist()))
            sums.update({f"{k}_start": first[k] for k in START_KEYS})
        return {k: v / counts[k] if counts[k] else v for k, v in sums.items()}


def explained_variance(pred: torch.Tensor, target: torch.Tensor, valid: torch.Tensor) -> float:
    """1 - Var(target - pred) / Var(target) over the collected steps only (`valid` masks the padding of
    preempted and variable-length rollouts, which would otherwise count as perfectly predicted zeros)."""
    mask = valid.bool()
    pred, target = pred[mask], target[mask]
    var = target.var() if target.numel() > 1 else target.new_zeros(())
    return float("nan") if var == 0 else float(1.0 - (target - pred).var() / var)


CRITIC_PREFIXES = ("critic.", "critic_trunk.")  # the value head (and a critic's own trunk) of every architecture


def actor_critic_groups(policy: torch.nn.Module) -> list[dict]:
    """The trainable parameters as two optimiser groups, "actor" (everything the actions depend on) and "critic"
    (the value head, and the critic's own trunk: `CRITIC_PREFIXES`), so the fine-tuning warm-ups
    (ppo.critic_warmup_updates, ppo.actor_warmup_updates) set each its own learning rate."""
    named = [(n, p) for n, p in policy.named_parameters() if p.requires_grad]
    critic = [p for n, p in named if n.startswith(CRITIC_PREFIXES)]
    actor = [p for n, p in named if not n.startswith(CRITIC_PREFIXES)]
    return [g for g in ({"params": actor, "name": "actor"}, {"params": critic, "name": "critic"}) if g["params"]]


class GroupedOptimizer:
    """The updater's optimizer as a saved-state owner (namespace "optimizer"): its own state_dict, and a state saved
    before the actor/critic groups (one group over the trainable parameters in the policy's order) loaded into the
    groups, each parameter's Adam state with it, so checkpoints written before resume unchanged."""

    def __init__(self, optimizer: torch.optim.Optimizer, params: list[torch.nn.Parameter]):
        self.optimizer, self.params = optimizer, params

    def state_dict(self) -> dict:
        return self.optimizer.state_dict()

    def load_state_dict(self, state: dict) -> None:
        groups = self.optimizer.param_groups
        if len(state["param_groups"]) == 1 and len(groups) > 1:
            saved, old = state["param_groups"][0], {id(p): i for i, p in enumerate(self.params)}
            per_param = {int(k): v for k, v in state["state"].items()}
            new_groups, new_state, k = [], {}, 0
            for group in groups:
                ids = []
                for p in group["params"]:
                    if old[id(p)] in per_param:
                        new_state[k] = per_param[old[id(p)]]
                    ids.append(k)
                    k += 1
                new_groups.append({**saved, "params": ids, "name": group["name"]})
            state = {"state": new_state, "param_groups": new_groups}
        self.optimizer.load_state_dict(state)


@torch.no_grad()
def reset_critic(policy: torch.nn.Module) -> int:
    """Re-initialise the critic's layers (`CRITIC_PREFIXES`: orthogonal weights, zero biases, as PIRLNav does
    before fine-tuning a behaviour-cloned policy); how many parameters were reset."""
    reset = 0
    for name, module in policy.named_modules():
        if (name + ".").startswith(CRITIC_PREFIXES) and isinstance(module, (torch.nn.Linear, torch.nn.Conv2d)):
            torch.nn.init.orthogonal_(module.weight)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
            reset += module.weight.numel() + (module.bias.numel() if module.bias is not None else 0)
    return reset


def actor_lr_factor(update: int, critic_warmup: int, actor_warmup: int) -> float:
    """The actor's share of the learning rate in the update after `update` updates: 0 through the critic warm-up,
    then ramped linearly to 1 over `actor_warmup` updates (the first of them at 1 / actor_warmup)."""
    if update < critic_warmup:
        return 0.0
    if actor_warmup <= 0:
        return 1.0
    return min(1.0, (update - critic_warmup + 1) / actor_warmup)


def make_adam(params: list, lr: float, eps: float) -> torch.optim.Adam:
    """Adam with the fused kernel (one kernel for every parameter, on CPU and CUDA) where this torch has
    it, else the foreach one; on CartPole's small MLP the fused step is about half the foreach step. `params`:
    parameters, or parameter groups."""
    try:
        return torch.optim.Adam(params, lr=lr, eps=eps, fused=True)
    except (RuntimeError, TypeError, ValueError):  # no fused Adam for this device or dtype
        return torch.optim.Adam(params, lr=lr, eps=eps, foreach=True)


class PPOUpdater:
    def __init__(self, policy: ActorCritic, cfg: PPOConfig, ctx: DistContext, bucket_mb: float = 25.0,
                 sample_weighting: str = "per_minibatch", *, advantage: Estimator, precision: str = "fp32",
                 group: str = TRAIN):
        if sample_weighting not in SAMPLE_WEIGHTINGS:
            raise ValueError(f"sample_weighting={sample_weighting!r}: use one of {', '.join(SAMPLE_WEIGHTINGS)}")
        self.policy, self.cfg, self.ctx, self.advantage = policy, cfg, ctx, advantage
        self.per_sample = sample_weighting == "per_sample"
        self.precision = precision  # run.precision of the learning forward
        self.params = [p for p in policy.parameters() if p.requires_grad]
        self.optimizer = make_adam(actor_critic_groups(policy), cfg.lr, cfg.adam_eps)
        self.reducer = GradientReducer(ctx, self.params, bucket_mb, group)  # all-reduced over the role's ranks
        self.clip = cfg.clip  # ppo.clip_schedule: set with the learning rate (set_lr_for)
        # the minibatches' random order, (n, generator) -> a permutation (torch.randperm): `ddppo bench sb3-lockstep`
        # gives SB3's numpy permutations here to take SB3's steps exactly
        self.order: Order = torch.randperm

    def set_lr_for(self, env_steps: int, total_env_steps: int, update: int = 0) -> float:
        """The learning rate (and the clip, `self.clip`, ppo.clip_schedule) follow the env-step counter (so they
        resume exactly); the actor's group is scaled by the fine-tuning warm-ups after `update` updates
        (`actor_lr_factor`). The critic's learning rate."""
        remaining = max(0.0, 1.0 - env_steps / total_env_steps)
        lr = self.cfg.lr * (remaining if self.cfg.lr_schedule == "linear" else 1.0)
        self.clip = self.cfg.clip * (remaining if self.cfg.clip_schedule == "linear" else 1.0)
        actor = actor_lr_factor(update, self.cfg.critic_warmup_updates, self.cfg.actor_warmup_updates)
        for group in self.optimizer.param_groups:
            group["lr"] = lr * actor if group.get("name") == "actor" else lr
        return lr

    def update(self, rollout: Rollout, adv: Advantages, timer, ref_params: torch.Tensor | None = None,
               kl_coef: float = 0.0, generator: torch.Generator | None = None) -> UpdateResult:
        """epochs x minibatches over `rollout` with its advantages `adv` (the estimator's); with `ref_params`
        (L, N, P) the loss adds kl_coef * KL(pi || pi_ref); `generator` draws the minibatches' env permutations
        (None: torch's global generator)."""
        cfg = self.cfg
        L = rollout.steps
        adv = self.advantage.normalise(adv, self.ctx)  # before the epochs, on every rank
        acc = _Stats()
        skipped = 0
        rank_weight = float(rollout.rank_weight)
        per_sample = self._per_sample_scale(adv.mask, rank_weight) if self.per_sample else None
        # one host read per update: with no masked step in the rollout (lockstep, not grouped), the losses take
        # plain means instead of masked ones (the same numbers, fewer operations per minibatch)
        full = L > 0 and bool(adv.mask.all())
        for epoch in range(cfg.epochs):
            for mb in minibatches(rollout, adv, cfg.num_mini_batch, generator, ref_params=ref_params,
                                  split=cfg.minibatch_split, order=self.order):
                skipped += self._minibatch_step(mb, epoch, acc, timer, kl_coef, per_sample, full, rank_weight)
        stats = acc.result()
        if L > 0 and self.advantage.critic:
            stats["explained_variance"] = explained_variance(rollout.values, adv.returns, adv.mask)
        return UpdateResult(stats, skipped)

    def _per_sample_scale(self, mask: torch.Tensor, rank_weight: float = 1.0) -> float:
        """M / N: num_mini_batch over the rollout's valid samples of all ranks, each weighted by its rank weight
        (one all-reduce, every rank)."""
        local = (mask.sum() * rank_weight).reshape(1)
        total = float(self.ctx.all_reduce_sums(local, "valid sample count all-reduce")[0])
        return self.cfg.num_mini_batch / max(total, 1.0)

    def _minibatch_step(self, mb: MiniBatch, epoch: int, acc: _Stats, timer, kl_coef: float,
                        per_sample: float | None = None, full: bool = False, rank_weight: float = 1.0) -> int:
        """Loss, backward, gradient all-reduce and optimiser step for one minibatch; 1 if the step was
        skipped for non-finite gradients, else 0.

        No step at all when no rank has a valid sample in this minibatch (GRPO with no finished group,
        short or preempted rollouts): the gradient is zero, but Adam would still move every weight by its
        stale momentum and advance its step count. The decision uses the all-reduced sample count that
        comes back with the gradients, so it is the same on every rank, and the collectives are unchanged.

        `per_sample` (M / N, per_sample weighting): the averaged gradient is scaled by the minibatch's global
        sample count times it (see the module docstring), before clipping. `full`: every sample of the rollout is
        valid (plain means). `rank_weight`: the weight of each of this rank's samples (see the module docstring).
        """
        cfg = self.cfg
        valid = None if full and mb.valid.numel() > 0 else mb.valid
        with timer(timing.LEARN_FORWARD_BACKWARD):
            with autocast(self.precision, mb.episode_start.device):
                logp, entropy, values, params = self.policy.evaluate_with_params(
                    mb.obs, mb.memory, mb.episode_start, mb.actions)
            logp, entropy, values, params = to_fp32(logp, entropy, values, params)  # the loss is float32
            kl = self.policy.kl(params, mb.ref_params) if mb.ref_params is not None else None
            adv = self.advantage.minibatch(mb.advantages, valid)  # the estimator's per-minibatch normalisation
            out = ppo_loss(logp, mb.old_logp, adv, entropy, values, mb.old_values, mb.returns,
                           valid, clip=self.clip, clip_value_loss=cfg.clip_value_loss,
                           value_coef=cfg.value_coef, entropy_coef=cfg.entropy_coef, kl_ref=kl,
                           kl_coef=kl_coef, weight=None if mb.weight is None else mb.weight[None, :])
            local_count = mb.valid.sum()
            for p in self.params:  # zero_grad(set_to_none=True) without the optimiser's profiling wrapper
                p.grad = None
            self.reducer.begin(local_count * rank_weight if rank_weight != 1.0 else local_count)
            out.total.backward()  # gradient buckets are all-reduced as backward fills them
        if not acc.started:  # the first minibatch: no optimiser step yet
            acc.started = True
            acc.first = (out.vector(), local_count)
        with timer(timing.ALLREDUCE):
            global_count = self.reducer.finish()
        with timer(timing.OPTIMIZER):
            if per_sample is not None:  # mean over this minibatch's samples -> sum over them / (N / M)
                factor = global_count * per_sample
                for p in self.params:
                    p.grad.mul_(factor)
            # the norm before clipping; clipping non-finite gradients is harmless: the step is skipped
            norm = torch.nn.utils.clip_grad_norm_(
                self.params, cfg.max_grad_norm if cfg.max_grad_norm > 0 else float("inf"), foreach=True)
            # the one host sync of a minibatch: whether to step is decided from all-reduced values, so alike
            # on every rank
            total, norm_value, local = torch.stack([global_count, norm.to(global_count), local_count]).tolist()
            if total == 0:
                return 0
            if not math.isfinite(norm_value):
                return 1
            self.optimizer.step()
        if local > 0:  # this rank's loss terms over no sample are placeholders, not statistics
            acc.rows.append((epoch, out.vector()))
        acc.grad_norms.append(norm_value)
        return 0
