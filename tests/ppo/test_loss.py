"""The PPO loss (ddppo/ppo/loss.py) against hand computations."""

import math

import pytest
import torch

from ddppo.ppo.loss import ppo_loss

CLIP = 0.2


def loss(new_logp, old_logp, adv, entropy=None, values=None, old_values=None, returns=None, valid=None, *,
         clip=CLIP, clip_value_loss=True, value_coef=0.5, entropy_coef=0.01):
    t = lambda x: torch.tensor(x, dtype=torch.float32)
    n = len(new_logp)
    return ppo_loss(t(new_logp), t(old_logp), t(adv), t(entropy or [0.0] * n), t(values or [0.0] * n),
                    t(old_values or [0.0] * n), t(returns or [0.0] * n), t(valid or [1.0] * n), clip=clip,
                    clip_value_loss=clip_value_loss, value_coef=value_coef, entropy_coef=entropy_coef)


def close(x, expected):
    assert float(x) == pytest.approx(expected, rel=1e-5, abs=1e-6)


@pytest.mark.parametrize("ratio,adv,expected_objective", [
    (1.1, 2.0, 1.1 * 2.0),    # inside the clip range: plain ratio * A
    (1.5, 2.0, 1.2 * 2.0),    # A > 0, ratio above 1 + clip: clipped to 1.2 * A
    (0.5, 2.0, 0.5 * 2.0),    # A > 0, ratio below 1 - clip: the unclipped (smaller) term wins
    (0.5, -2.0, 0.8 * -2.0),  # A < 0, ratio below 1 - clip: clipped to 0.8 * A
    (1.5, -2.0, 1.5 * -2.0),  # A < 0, ratio above 1 + clip: the unclipped (smaller) term wins
])
def test_clipped_surrogate_on_both_sides_of_the_clip(ratio, adv, expected_objective):
    out = loss([math.log(ratio)], [0.0], [adv])
    close(out.policy, -expected_objective)


def test_surrogate_gradient_vanishes_only_where_clipped():
    old = torch.zeros(4)
    new = torch.tensor([math.log(1.5), math.log(1.5), math.log(0.5), math.log(1.1)], requires_grad=True)
    adv = torch.tensor([2.0, -2.0, -2.0, 1.0])
    out = ppo_loss(new, old, adv, torch.zeros(4), torch.zeros(4), torch.zeros(4), torch.zeros(4), torch.ones(4),
                   clip=CLIP, clip_value_loss=False, value_coef=0.0, entropy_coef=0.0)
    out.total.backward()
    g = new.grad
    # d(-mean(r*A))/d logp = -r*A/4 where unclipped; 0 where the clipped term is the minimum
    assert g[0] == 0.0 and g[2] == 0.0
    close(g[1], -(1.5 * -2.0) / 4)
    close(g[3], -(1.1 * 1.0) / 4)


def test_value_loss_clipped_and_unclipped():
    # sample 0: v=2, old=1, R=3: unclipped err 1, clipped v'=1.2 err 3.24 -> max 3.24
    # sample 1: v=1.1, old=1, R=0: inside clip: err 1.21 both
    # sample 2: v=0, old=1, R=0.5: unclipped 0.25, clipped v'=0.8 err 0.09 -> max 0.25
    kw = {"values": [2.0, 1.1, 0.0], "old_values": [1.0, 1.0, 1.0], "returns": [3.0, 0.0, 0.5]}
    out = loss([0.0] * 3, [0.0] * 3, [0.0] * 3, **kw)
    close(out.value, 0.5 * (3.24 + 1.21 + 0.25) / 3)
    out = loss([0.0] * 3, [0.0] * 3, [0.0] * 3, clip_value_loss=False, **kw)
    close(out.value, 0.5 * (1.0 + 1.21 + 0.25) / 3)


def test_total_combines_terms_with_coefficients():
    out = loss([math.log(1.1), 0.0], [0.0, 0.0], [1.0, -1.0], entropy=[1.0, 2.0], values=[1.0, 0.0],
               old_values=[1.0, 0.0], returns=[0.0, 2.0], value_coef=0.25, entropy_coef=0.1)
    policy = -(1.1 * 1.0 + 1.0 * -1.0) / 2
    value = 0.5 * (1.0 + 4.0) / 2
    entropy = 1.5
    close(out.policy, policy)
    close(out.value, value)
    close(out.entropy, entropy)
    close(out.total, policy + 0.25 * value - 0.1 * entropy)


def test_entropy_bonus_gradient_sign():
    ent = torch.tensor([1.0, 1.0], requires_grad=True)
    out = ppo_loss(torch.zeros(2), torch.zeros(2), torch.zeros(2), ent, torch.zeros(2), torch.zeros(2),
                   torch.zeros(2), torch.ones(2), clip=CLIP, clip_value_loss=True, value_coef=0.5, entropy_coef=0.3)
    out.total.backward()
    torch.testing.assert_close(ent.grad, torch.tensor([-0.15, -0.15]))  # minimising total raises entropy


def test_masked_means_ignore_invalid_steps():
    """Invalid steps hold arbitrary values; they change no term and no diagnostic."""
    valid = [1.0, 1.0, 0.0, 0.0]
    base = {"entropy": [1.0, 0.5, 99.0, 7.0], "values": [1.0, 2.0, 50.0, -3.0],
            "old_values": [1.0, 2.0, 0.0, 0.0], "returns": [2.0, 2.0, -50.0, 40.0]}
    out = loss([math.log(1.1), math.log(0.7), 5.0, -5.0], [0.0] * 4, [1.0, 2.0, 1000.0, -1000.0], valid=valid,
               **base)
    ref = loss([math.log(1.1), math.log(0.7)], [0.0] * 2, [1.0, 2.0], entropy=[1.0, 0.5], values=[1.0, 2.0],
               old_values=[1.0, 2.0], returns=[2.0, 2.0])
    for name, value in ref.scalars().items():
        close(getattr(out, name), value)
    close(out.policy, -(1.1 * 1.0 + 0.7 * 2.0) / 2)  # A > 0 and ratio 0.7 < 0.8: min keeps 0.7 * A
    close(out.entropy, 0.75)


def test_masked_mean_of_policy_uses_valid_count_not_total():
    out = loss([0.0, 0.0, 0.0], [0.0] * 3, [3.0, 0.0, 0.0], valid=[1.0, 0.0, 0.0])
    close(out.policy, -3.0)


def test_all_invalid_gives_finite_zero_terms():
    out = loss([1.0, 2.0], [0.0, 0.0], [1.0, 1.0], values=[5.0, 5.0], valid=[0.0, 0.0])
    for name, value in out.scalars().items():
        assert math.isfinite(value), name
    close(out.total, 0.0)


def test_approx_kl_and_clip_fraction():
    ratios = [1.0, 1.1, 1.3, 0.7, 0.85]
    valid = [1.0, 1.0, 1.0, 1.0, 0.0]  # the last one would not be clipped anyway; 1.3 and 0.7 are
    out = loss([math.log(r) for r in ratios], [0.0] * 5, [1.0] * 5, valid=valid)
    kl = sum((r - 1) - math.log(r) for r in ratios[:4]) / 4
    close(out.approx_kl, kl)
    close(out.clip_fraction, 2 / 4)
    close(out.ratio_min, 0.7)
    close(out.ratio_max, 1.3)
    close(out.ratio_mean, (1.0 + 1.1 + 1.3 + 0.7) / 4)
    assert out.approx_kl >= 0


def test_identical_policies_give_zero_kl_and_no_clipping():
    logp = torch.randn(10)
    out = ppo_loss(logp, logp.clone(), torch.randn(10), torch.rand(10), torch.randn(10), torch.randn(10),
                   torch.randn(10), torch.ones(10), clip=CLIP, clip_value_loss=True, value_coef=0.5,
                   entropy_coef=0.01)
    close(out.approx_kl, 0.0)
    close(out.clip_fraction, 0.0)
    close(out.ratio_mean, 1.0)


def test_two_dimensional_batches():
    torch.manual_seed(0)
    T, N = 5, 3
    new, old, adv = torch.randn(T, N) * 0.3, torch.randn(T, N) * 0.3, torch.randn(T, N)
    valid = torch.ones(T, N)
    valid[3:, 1] = 0
    out = ppo_loss(new, old, adv, torch.zeros(T, N), torch.zeros(T, N), torch.zeros(T, N), torch.zeros(T, N),
                   valid, clip=CLIP, clip_value_loss=False, value_coef=0.0, entropy_coef=0.0)
    ratio = (new - old).exp()
    terms = []
    for t in range(T):
        for n in range(N):
            if valid[t, n]:
                r, a = float(ratio[t, n]), float(adv[t, n])
                terms.append(min(r * a, min(max(r, 1 - CLIP), 1 + CLIP) * a))
    close(out.policy, -sum(terms) / len(terms))


# ------------------------------------------------------------------ padded slots hold garbage (issue 33, item 2)
GARBAGE = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan, "huge": 1e30, "-huge": -1e30}
INPUTS = ("new_logp", "old_logp", "advantages", "entropy", "values", "old_values", "returns", "kl_ref", "weight")
DIFFERENTIABLE = ("new_logp", "entropy", "values", "kl_ref")


def _padded_batch(garbage: dict[str, float]) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """A [T=4, N=3] minibatch whose last env is padded after step 1 (and env 1 after step 2); `garbage` puts a
    value into every padded slot of the named inputs (clean padding: zeros, as storage writes them)."""
    gen = torch.Generator().manual_seed(0)
    valid = torch.ones(4, 3)
    valid[1:, 2] = 0.0
    valid[2:, 1] = 0.0
    clean = {name: torch.randn(4, 3, generator=gen) * 0.5 for name in INPUTS}
    clean["kl_ref"] = clean["kl_ref"].abs()
    clean["weight"] = clean["weight"].abs() + 0.5
    batch = {}
    for name, x in clean.items():
        x = torch.where(valid > 0, x, torch.zeros(()))
        if name in garbage:
            x = torch.where(valid > 0, x, torch.full((), garbage[name]))
        batch[name] = x.clone().requires_grad_(name in DIFFERENTIABLE)
    return batch, valid


def _loss_and_grads(garbage: dict[str, float]):
    batch, valid = _padded_batch(garbage)
    out = ppo_loss(batch["new_logp"], batch["old_logp"], batch["advantages"], batch["entropy"], batch["values"],
                   batch["old_values"], batch["returns"], valid, clip=CLIP, clip_value_loss=True, value_coef=0.5,
                   entropy_coef=0.01, kl_ref=batch["kl_ref"], kl_coef=0.1, weight=batch["weight"])
    out.total.backward()
    return out, {name: batch[name].grad for name in DIFFERENTIABLE}


@pytest.mark.parametrize("value", list(GARBAGE), ids=list(GARBAGE))
@pytest.mark.parametrize("where", ["stale_old_logp", "every_input"])
def test_garbage_in_padded_slots_changes_neither_the_loss_nor_its_gradient(where, value):
    """A stale old_logp far below new_logp in a padded slot made exp(log-ratio) = inf, and backward multiplied it
    by the mask's 0: a NaN gradient (the minibatch skipped). Now nothing masked reaches an exp or a product."""
    names = ("old_logp",) if where == "stale_old_logp" else INPUTS
    if where == "stale_old_logp" and value in ("inf", "huge"):
        pytest.skip("old_logp far ABOVE new_logp underflows exp to 0: no inf to begin with")
    clean, clean_grads = _loss_and_grads({})
    dirty, dirty_grads = _loss_and_grads({name: GARBAGE[value] for name in names})
    for name in DIFFERENTIABLE:
        assert torch.isfinite(dirty_grads[name]).all(), f"{name}: {dirty_grads[name]}"
        assert torch.equal(dirty_grads[name], clean_grads[name]), name
    assert torch.equal(dirty.vector(), clean.vector())


@pytest.mark.parametrize("clip_value_loss", [True, False])
@pytest.mark.parametrize("weighted", [False, True])
def test_no_mask_gives_the_same_loss_and_gradients_as_a_mask_of_ones(clip_value_loss, weighted):
    """valid=None (the updater found every step of the rollout valid) takes plain means: every term and every
    gradient equal, bit for bit, what a mask of ones gives; and a mask with a zero does differ (the test can fail)."""
    g = torch.Generator().manual_seed(0)
    L, n = 5, 4
    data = [torch.randn(L, n, generator=g) for _ in range(7)]
    weight = torch.rand(1, n, generator=g) + 0.5 if weighted else None

    def run(valid):
        leaves = [x.clone().requires_grad_(i in (0, 3, 4)) for i, x in enumerate(data)]
        out = ppo_loss(*leaves, valid, clip=CLIP, clip_value_loss=clip_value_loss, value_coef=0.5,
                       entropy_coef=0.01, kl_ref=data[0].abs(), kl_coef=0.1, weight=weight)
        out.total.backward()
        return out.vector(), [leaves[i].grad for i in (0, 3, 4)]

    plain, plain_grads = run(None)
    ones, ones_grads = run(torch.ones(L, n))
    assert torch.equal(plain, ones)
    for a, b in zip(plain_grads, ones_grads):
        assert torch.equal(a, b)
    holed = torch.ones(L, n)
    holed[2, 1] = 0.0
    assert not torch.equal(run(holed)[0], plain)
