"""The clipped PPO objective (Schulman et al. 2017) with named terms and diagnostics."""

from __future__ import annotations

import dataclasses

import torch


def masked_mean(x: torch.Tensor, mask: torch.Tensor, weight: torch.Tensor | None = None) -> torch.Tensor:
    """sum(weight * x) over the samples where mask > 0, divided by their count (1 if none). Masked-out samples
    are selected away before any product, never multiplied by 0 (they may hold NaN or inf: NaN * 0 is NaN, and
    so is the gradient 0 * inf), so neither the value nor the gradient sees them."""
    keep = mask > 0
    w = mask if weight is None else mask * _kept(weight, keep)
    return (_kept(x, keep) * _kept(w, keep)).sum() / mask.sum().clamp(min=1.0)


def _kept(x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """`x` where `keep`, 0 elsewhere (broadcast): a selection, whose gradient at the dropped slots is exactly 0
    whatever they held."""
    return torch.where(keep, x, torch.zeros((), dtype=x.dtype, device=x.device))


@dataclasses.dataclass
class LossOutput:
    """The scalar to minimise and its named parts (all means over valid samples)."""

    total: torch.Tensor
    policy: torch.Tensor  # clipped surrogate, negated
    value: torch.Tensor  # (clipped) squared error, times 0.5
    entropy: torch.Tensor  # mean policy entropy
    approx_kl: torch.Tensor  # E[(r - 1) - log r], behaviour -> current policy
    clip_fraction: torch.Tensor  # share of samples with |r - 1| > clip
    ratio_min: torch.Tensor
    ratio_max: torch.Tensor
    ratio_mean: torch.Tensor
    ratio_dev: torch.Tensor  # E|r - 1|: at the first minibatch, the numerical gap between acting and learning
    kl_ref: torch.Tensor  # mean exact KL(pi || pi_ref) (0 without a reference policy)

    def scalars(self) -> dict[str, float]:
        return dict(zip(SCALAR_NAMES, self.vector().tolist()))

    def vector(self) -> torch.Tensor:
        """Every term as one detached vector (order: SCALAR_NAMES), left on the device: the updater reads
        a whole update's worth back at once instead of syncing with the device per term and minibatch."""
        return torch.stack([getattr(self, name).detach().reshape(()) for name in SCALAR_NAMES])


SCALAR_NAMES = tuple(f.name for f in dataclasses.fields(LossOutput))


def ppo_loss(new_logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor, entropy: torch.Tensor,
             values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor, valid: torch.Tensor | None, *,
             clip: float, clip_value_loss: bool, value_coef: float, entropy_coef: float,
             kl_ref: torch.Tensor | None = None, kl_coef: float = 0.0,
             weight: torch.Tensor | None = None) -> LossOutput:
    """total = policy + value_coef * value - entropy_coef * entropy (+ kl_coef * KL to a reference), masked means.

    `valid` None: every sample counts (the updater found no masked step in the rollout), and the means are plain
    ones: the same numbers as with a mask of ones, without the selections.
    `kl_ref` is the per-sample exact KL(pi_theta || pi_ref) computed from both
    distributions' parameters (categorical: sum over actions; Gaussian: closed form).
    `weight` (broadcast against the samples; VER's importance weights) weighs the policy, value and entropy
    terms as habitat-baselines' VER does: mean(weight * term) over the valid samples; diagnostics stay unweighted.
    """
    if valid is None:
        def mean(x: torch.Tensor, w: torch.Tensor | None = None) -> torch.Tensor:
            return (x if w is None else x * w).sum() / x.numel()
    else:
        # Padded (masked) slots may hold anything (a stale old_logp far below new_logp: exp overflows to inf, and
        # backward multiplies that inf by the 0 of the mask: NaN). Every input is sanitised at those slots BEFORE
        # any exp or product, so the loss and its gradient are the same whatever they held.
        keep = valid > 0
        new_logp, old_logp, advantages, entropy, values, old_values, returns = (
            _kept(t, keep) for t in (new_logp, old_logp, advantages, entropy, values, old_values, returns))
        weight = None if weight is None else _kept(weight, keep)
        kl_ref = None if kl_ref is None else _kept(kl_ref, keep)

        def mean(x: torch.Tensor, w: torch.Tensor | None = None) -> torch.Tensor:
            return masked_mean(x, valid, w)
    log_ratio = new_logp - old_logp
    ratio = log_ratio.exp()
    surrogate = torch.min(ratio * advantages, ratio.clamp(1.0 - clip, 1.0 + clip) * advantages)
    policy = -mean(surrogate, weight)
    if clip_value_loss:
        clipped = old_values + (values - old_values).clamp(-clip, clip)
        value_err = torch.max((values - returns) ** 2, (clipped - returns) ** 2)
    else:
        value_err = (values - returns) ** 2
    value = 0.5 * mean(value_err, weight)
    ent = mean(entropy, weight)
    with torch.no_grad():
        approx_kl = mean(ratio - 1.0 - log_ratio)
        clip_fraction = mean(((ratio - 1.0).abs() > clip).float())
        if valid is None:
            rmin, rmax = ratio.amin(), ratio.amax()
        else:  # extremes over valid samples (1 when there is none), without a data-dependent shape (no host sync)
            has = valid > 0
            any_valid = has.any()
            rmin = torch.where(any_valid, torch.where(has, ratio, float("inf")).amin(), 1.0)
            rmax = torch.where(any_valid, torch.where(has, ratio, float("-inf")).amax(), 1.0)
        rmean = mean(ratio)
        rdev = mean((ratio - 1.0).abs())
    total = policy + value_coef * value - entropy_coef * ent
    kl = mean(kl_ref) if kl_ref is not None else torch.zeros((), device=total.device)
    if kl_ref is not None:
        total = total + kl_coef * kl
    return LossOutput(total, policy, value, ent, approx_kl, clip_fraction, rmin, rmax, rmean, rdev, kl)
