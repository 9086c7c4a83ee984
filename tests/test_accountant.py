"""Tests of the accountant (fedbandit.accounting.account) against formulas written out here."""

import math

import numpy as np
import pytest
from scipy import optimize, stats

from fedbandit.accounting import (
    Accounting,
    ComposedEvent,
    GaussianEvent,
    LaplaceEvent,
    NonPrivateEvent,
    SelfComposedEvent,
    account,
)
from fedbandit.accounting.events import (
    ApproxDpEvent,
    ClaimedEvent,
    ConditionalEvent,
    DiscreteGaussianSumEvent,
    InvalidEvent,
    NoReleaseEvent,
    ShuffledRandomizedResponseEvent,
    record_sensitivities,
)


def cks_epsilon(rho, delta):
    """ρ-zCDP → (ε, δ) by Canonne, Kamath & Steinke (2020), Cor. 13, minimized over α by hand."""
    def eps(alpha):
        return rho * alpha + (math.log(1 / delta) + (alpha - 1) * math.log(1 - 1 / alpha) - math.log(alpha)) / (alpha - 1)

    res = optimize.minimize_scalar(eps, bounds=(1 + 1e-9, 1e6), method="bounded", options={"xatol": 1e-12})
    return res.fun


def test_gaussian_composition_is_zcdp_with_the_cks_conversion():
    # κ releases of Δ = √2 (bias and Gram of one record), σ₀ = 3: ρ = κ Δ²/(2σ₀²).
    kappa, sigma0 = 9, 3.0
    ev = SelfComposedEvent(GaussianEvent(math.sqrt(2.0), sigma0), kappa)
    a = account(ev, target_epsilon=10.0, target_delta=1e-5)
    rho = kappa * 2.0 / (2 * sigma0**2)
    assert a.epsilon == pytest.approx(cks_epsilon(rho, 1e-5), rel=1e-6)
    assert a.status == "verified" and a.private


def test_laplace_composes_by_adding_epsilons():
    ev = ComposedEvent((LaplaceEvent(1.0, 2.0), SelfComposedEvent(LaplaceEvent(0.5, 1.0), 3)))
    a = account(ev, target_epsilon=2.0, target_delta=1e-6)
    assert a.epsilon == pytest.approx(1.0 / 2.0 + 3 * 0.5 / 1.0) and a.delta == 0.0 and a.status == "verified"
    b = account(ev, target_epsilon=1.9, target_delta=1e-6)
    assert b.status == "invalid" and "NOT" in b.notes


def test_approx_composition_basic_and_advanced():
    # k equal (ε₀, δ₀) releases: advanced composition (Dwork, Rothblum & Vadhan 2010) with the
    # δ left after kδ₀, when it beats basic composition.
    e0, d0, k, target_delta = 0.01, 1e-9, 1000, 1e-5
    ev = SelfComposedEvent(ApproxDpEvent(e0, d0), k)
    a = account(ev, target_epsilon=10.0, target_delta=target_delta)
    slack = target_delta - k * d0
    adv = math.sqrt(2 * k * math.log(1 / slack)) * e0 + k * e0 * math.expm1(e0)
    assert a.epsilon == pytest.approx(adv) and adv < k * e0
    assert a.delta == pytest.approx(k * d0 + slack)
    few = account(SelfComposedEvent(ApproxDpEvent(1.0, 1e-7), 2), target_epsilon=10.0, target_delta=1e-5)
    assert few.epsilon == pytest.approx(2.0)  # basic is better for k = 2, ε₀ = 1


def test_claimed_event_statuses():
    from fedbandit.accounting.amplification import Condition

    ok = ClaimedEvent(1.0, 1e-5, "a theorem")
    assert account(ok, target_epsilon=1.0, target_delta=1e-5).status == "claimed"
    forced = ClaimedEvent(1.0, 1e-5, "a theorem", conditions=(Condition("M ≥ 100", False, "M=3"),))
    a = account(forced, target_epsilon=1.0, target_delta=1e-5)
    assert a.status == "unproven" and math.isnan(a.epsilon) and "validity" in a.notes
    # the necessary condition: the sum of the messages alone is a Gaussian mechanism
    weak = GaussianEvent(1.0, 0.1)  # μ = 10: far above ε = 1
    b = account(ClaimedEvent(1.0, 1e-5, "a theorem", necessary=weak), target_epsilon=1.0, target_delta=1e-5)
    assert b.status == "invalid" and b.epsilon > 1.0 and "NOT private" in b.notes
    # exact Gaussian profile of μ = 10 at δ (Balle & Wang 2018, Thm. 8), solved here by hand
    def delta_of(eps, mu=10.0):
        return stats.norm.cdf(mu / 2 - eps / mu) - math.exp(eps) * stats.norm.cdf(-mu / 2 - eps / mu)

    eps_exact = optimize.brentq(lambda e: delta_of(e) - 1e-5, 0.0, 200.0)
    assert b.epsilon == pytest.approx(eps_exact, rel=1e-6)


def test_conditional_invalid_and_no_release():
    ev = ConditionalEvent(GaussianEvent(1.0, 10.0), "rewards are not clipped", holds=False)
    a = account(ev, target_epsilon=1.0, target_delta=1e-5)
    assert a.status == "invalid" and "not clipped" in a.notes
    assert account(InvalidEvent("schedule leaks"), target_epsilon=1.0, target_delta=1e-5).epsilon == math.inf
    z = account(NoReleaseEvent(), model="none")
    assert z.status == "verified" and z.epsilon == 0.0 and z.private
    n = account(NonPrivateEvent())
    assert n.status == "none" and n.epsilon == math.inf and not n.private


def test_record_sensitivities_under_both_relations():
    # add/remove: ‖xy‖ ≤ LY, ‖xxᵀ‖_F ≤ L²; replace: 2LY and √2 L²
    assert record_sensitivities(1.0, 1.0, "add-remove") == (1.0, 1.0)
    b, g = record_sensitivities(2.0, 0.5, "replace")
    assert b == pytest.approx(2 * 2.0 * 0.5) and g == pytest.approx(math.sqrt(2) * 4.0)
    # the replace bound on the Gram difference is attained by orthogonal unit vectors
    x, xp = np.array([1.0, 0.0]), np.array([0.0, 1.0])
    assert np.linalg.norm(np.outer(x, x) - np.outer(xp, xp)) == pytest.approx(math.sqrt(2))
    with pytest.raises(ValueError, match="relation"):
        record_sensitivities(1.0, 1.0, "swap")


def test_account_refuses_non_events_and_bad_targets():
    with pytest.raises(TypeError, match="DpEvent"):
        account("gaussian")
    with pytest.raises(ValueError, match="target_epsilon"):
        account(GaussianEvent(1.0, 1.0), target_epsilon=-1.0, target_delta=1e-5)
    with pytest.raises(ValueError, match="sigma"):
        GaussianEvent(1.0, 0.0)
    assert isinstance(account(GaussianEvent(1.0, 1.0), target_epsilon=5.0, target_delta=1e-5), Accounting)


# ---------------------------------------------------------------------------------------
# input hardening: no privacy status from a NaN, an infinity or a negative value
# ---------------------------------------------------------------------------------------

NAN, INF = math.nan, math.inf

#: (event class, valid keyword arguments, field, bad value, error type) -- each bad value
#: would otherwise reach the accountant and come out as a status (ε = NaN "verified", ...)
BAD_EVENT_FIELDS = [
    (ApproxDpEvent, dict(epsilon=1.0, delta=1e-5), "epsilon", NAN, ValueError),
    (ApproxDpEvent, dict(epsilon=1.0, delta=1e-5), "epsilon", -1.0, ValueError),
    (ApproxDpEvent, dict(epsilon=1.0, delta=1e-5), "delta", NAN, ValueError),
    (ApproxDpEvent, dict(epsilon=1.0, delta=1e-5), "delta", -1e-5, ValueError),
    (ApproxDpEvent, dict(epsilon=1.0, delta=1e-5), "delta", 1.5, ValueError),
    (ApproxDpEvent, dict(epsilon=1.0, delta=1e-5), "epsilon", "1", TypeError),
    (ClaimedEvent, dict(epsilon=1.0, delta=1e-5, theorem="t"), "epsilon", NAN, ValueError),
    (ClaimedEvent, dict(epsilon=1.0, delta=1e-5, theorem="t"), "epsilon", -2.0, ValueError),
    (ClaimedEvent, dict(epsilon=1.0, delta=1e-5, theorem="t"), "delta", NAN, ValueError),
    (ClaimedEvent, dict(epsilon=1.0, delta=1e-5, theorem="t"), "theorem", None, TypeError),
    (ClaimedEvent, dict(epsilon=1.0, delta=1e-5, theorem="t"), "necessary", "Gaussian", TypeError),
    (ConditionalEvent, dict(event=GaussianEvent(1.0, 10.0), assumption="a", holds=True), "holds", NAN, TypeError),
    (ConditionalEvent, dict(event=GaussianEvent(1.0, 10.0), assumption="a", holds=True), "holds", 1.0, TypeError),
    (ConditionalEvent, dict(event=GaussianEvent(1.0, 10.0), assumption="a", holds=True), "holds", "no", TypeError),
    (ConditionalEvent, dict(event=GaussianEvent(1.0, 10.0), assumption="a", holds=True), "on_failure", "ok",
     ValueError),
    (ConditionalEvent, dict(event=GaussianEvent(1.0, 10.0), assumption="a", holds=True), "event", 3.0, TypeError),
    (GaussianEvent, dict(sensitivity=1.0, sigma=2.0), "sigma", NAN, ValueError),
    (GaussianEvent, dict(sensitivity=1.0, sigma=2.0), "sigma", INF, ValueError),
    (GaussianEvent, dict(sensitivity=1.0, sigma=2.0), "sensitivity", NAN, ValueError),
    (GaussianEvent, dict(sensitivity=1.0, sigma=2.0), "sensitivity", -1.0, ValueError),
    (LaplaceEvent, dict(sensitivity=1.0, scale=2.0), "scale", NAN, ValueError),
    (LaplaceEvent, dict(sensitivity=1.0, scale=2.0), "sensitivity", INF, ValueError),
    (DiscreteGaussianSumEvent, dict(clip=1.0, gamma=0.01, beta=0.6, dim=4, sigma=2.0, n_parties=8), "beta", NAN,
     ValueError),
    (DiscreteGaussianSumEvent, dict(clip=1.0, gamma=0.01, beta=0.6, dim=4, sigma=2.0, n_parties=8),
     "sensitivity_factor", 0.5, ValueError),
    (DiscreteGaussianSumEvent, dict(clip=1.0, gamma=0.01, beta=0.6, dim=4, sigma=2.0, n_parties=8),
     "sensitivity_factor", NAN, ValueError),
    (DiscreteGaussianSumEvent, dict(clip=1.0, gamma=0.01, beta=0.6, dim=4, sigma=2.0, n_parties=8), "sigma", NAN,
     ValueError),
    (ShuffledRandomizedResponseEvent, dict(n_messages=100, p=0.2, epsilon_message=1.0, delta_message=1e-5), "p",
     NAN, ValueError),
    (ShuffledRandomizedResponseEvent, dict(n_messages=100, p=0.2, epsilon_message=1.0, delta_message=1e-5),
     "epsilon_message", NAN, ValueError),
    (ShuffledRandomizedResponseEvent, dict(n_messages=100, p=0.2, epsilon_message=1.0, delta_message=1e-5),
     "delta_message", -1.0, ValueError),
    (ShuffledRandomizedResponseEvent, dict(n_messages=100, p=0.2, epsilon_message=1.0, delta_message=1e-5),
     "n_messages", 100.0, TypeError),
    (ShuffledRandomizedResponseEvent, dict(n_messages=100, p=0.2, epsilon_message=1.0, delta_message=1e-5),
     "group_size", 0, ValueError),
    (SelfComposedEvent, dict(event=GaussianEvent(1.0, 2.0), count=3), "count", 2.5, TypeError),
    (SelfComposedEvent, dict(event=GaussianEvent(1.0, 2.0), count=3), "count", 0, ValueError),
    (SelfComposedEvent, dict(event=GaussianEvent(1.0, 2.0), count=3), "event", None, TypeError),
    (ComposedEvent, dict(events=(GaussianEvent(1.0, 2.0),)), "events", [GaussianEvent(1.0, 2.0)], TypeError),
    (ComposedEvent, dict(events=(GaussianEvent(1.0, 2.0),)), "events", (GaussianEvent(1.0, 2.0), 1.0), TypeError),
    (InvalidEvent, dict(reason="r"), "reason", NAN, TypeError),
    (NoReleaseEvent, dict(), "reason", 0, TypeError),
]


@pytest.mark.parametrize(("cls", "good", "field", "bad", "error"), BAD_EVENT_FIELDS,
                         ids=[f"{c.__name__}-{f}={b!r}"[:60] for c, _, f, b, _ in BAD_EVENT_FIELDS])
def test_events_refuse_bad_fields_on_construction(cls, good, field, bad, error):
    cls(**good)  # the valid event is built
    with pytest.raises(error, match=field):
        cls(**{**good, field: bad})


def test_conditional_event_keeps_a_real_bool():
    ev = ConditionalEvent(GaussianEvent(1.0, 10.0), "a", holds=np.bool_(False))
    assert ev.holds is False
    assert account(ev, target_epsilon=1.0, target_delta=1e-5).status == "invalid"


def test_event_epsilon_may_be_infinite_but_is_then_never_private():
    # ε = ∞ is a legitimate value (no finite guarantee: an overflowing calibration), but it
    # must never come out "verified" or "claimed" against a finite target
    for ev in (ApproxDpEvent(INF, 1e-5), ClaimedEvent(INF, 1e-5, "t"), LaplaceEvent(1.0, 1e-320),
               GaussianEvent(1.0, 1e-320), SelfComposedEvent(GaussianEvent(1.0, 1e-150), 10)):
        a = account(ev, target_epsilon=1.0, target_delta=1e-5)
        assert a.status == "invalid" and a.epsilon == INF and not a.private, ev
    # without a target, ε = ∞ is "none" (not private), as for NonPrivateEvent
    assert account(ApproxDpEvent(INF, 1e-5)).status == "none"


@pytest.mark.parametrize("bad", [NAN, INF, -1.0, 0.0])
def test_account_refuses_non_finite_or_negative_targets(bad):
    with pytest.raises(ValueError, match="target_epsilon"):
        account(GaussianEvent(1.0, 10.0), target_epsilon=bad, target_delta=1e-5)
    with pytest.raises(ValueError, match="target_delta"):
        account(GaussianEvent(1.0, 10.0), target_epsilon=1.0, target_delta=bad)


# (name, call at σ): the functions that divided by σ² -- σ = 1e-320 made σ² = 0.0 and raised
# ZeroDivisionError; the limit σ → 0 of ρ or ε is +∞ (Δ/σ → ∞)
TINY_SIGMA_CALLS = {
    "gaussian_zcdp": lambda s: __import__("fedbandit.accounting.zcdp", fromlist=["x"]).gaussian_zcdp(1.0, s),
    "tree_zcdp": lambda s: __import__("fedbandit.accounting.zcdp", fromlist=["x"]).tree_zcdp(8, 1.0, s),
    "ddg_zcdp_epsilon": lambda s: __import__("fedbandit.accounting.ddg", fromlist=["x"]).ddg_zcdp_epsilon(
        1.1, s, 0.01, 8, 4),
    "ddg_rdp": lambda s: float(np.min(__import__("fedbandit.accounting.ddg", fromlist=["x"]).ddg_rdp(
        [2.0, 4.0], 1.1, s, 0.01, 8, 4))),
    "ddg_epsilon": lambda s: __import__("fedbandit.accounting.ddg", fromlist=["x"]).ddg_epsilon(
        s, c=1.0, gamma=0.01, beta=0.6, n=8, d=4, delta=1e-5),
    "ddg_epsilon-zcdp": lambda s: __import__("fedbandit.accounting.ddg", fromlist=["x"]).ddg_epsilon(
        s, c=1.0, gamma=0.01, beta=0.6, n=8, d=4, delta=1e-5, method="zcdp"),
    "single_dg_sum_epsilon": lambda s: __import__("fedbandit.accounting.ddg", fromlist=["x"]).single_dg_sum_epsilon(
        1.0, s, 8),
    "ddg_params_from_gamma": lambda s: __import__("fedbandit.accounting.ddg", fromlist=["x"]).ddg_params_from_gamma(
        bits=16, gamma=0.01, sigma=s, n=8, d=4, c=1.0, delta=1e-5).epsilon,
    "sampled_gaussian_rdp": lambda s: float(np.min(__import__("fedbandit.accounting.subsampling", fromlist=["x"])
                                                   .sampled_gaussian_rdp([2, 4], 0.1, s))),
    "sampled_gaussian_epsilon": lambda s: __import__("fedbandit.accounting.subsampling", fromlist=["x"]).sampled_gaussian_epsilon(
        s, 0.1, 10, 1e-5),
    "account(GaussianEvent)": lambda s: account(GaussianEvent(1.0, s), target_epsilon=1.0, target_delta=1e-5).epsilon,
}


@pytest.mark.parametrize("name", sorted(TINY_SIGMA_CALLS))
@pytest.mark.parametrize("sigma", [1e-320, 5e-324, 1e-200])
def test_a_vanishing_noise_scale_gives_infinite_epsilon(name, sigma):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        value = TINY_SIGMA_CALLS[name](sigma)
    assert value == INF, f"{name}(sigma={sigma}) = {value!r}, not the limit +inf"


def test_gaussian_zcdp_at_a_small_but_representable_sigma():
    # ρ = Δ²/(2σ²) written out, at σ where σ² is still a normal float
    from fedbandit.accounting.zcdp import gaussian_zcdp, tree_zcdp

    assert gaussian_zcdp(3.0, 1e-100) == pytest.approx(9.0 / (2.0 * 1e-200), rel=1e-12)
    assert tree_zcdp(8, 3.0, 1e-100) == pytest.approx(4 * 9.0 / (2.0 * 1e-200), rel=1e-12)  # κ = 1 + log2 8


@pytest.mark.parametrize("rho", [1e11, 1e13, 1e20, 1e40, 1e60, 1e99])
def test_zcdp_conversion_at_a_huge_rho_is_between_rho_and_the_simple_bound(rho):
    # [CKS20] ε = min over α = 1 + w of ρ(1 + w) + (log(1/δ) − log(1 + w))/w + log(w/(1 + w)):
    # at w = √(log(1/δ)/ρ) it is ρ + 2√(ρ log(1/δ)) + log w + O(1), log w = −½ log(ρ/log(1/δ)),
    # so the minimum lies within log ρ + 10 below the simple bound ρ + 2√(ρ log(1/δ))
    # [BS16 Prop. 1.3], which it never exceeds.  The form in α used to round α = 1 + w to 1 and
    # return max(0, NaN) = 0: ε = 0 at ρ = 1e60.
    from fedbandit.accounting.zcdp import zcdp_to_approx_dp

    delta = 1e-5
    simple = rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))
    eps = zcdp_to_approx_dp(rho, delta)
    assert simple - (math.log(rho) + 10.0) - 1e-12 * rho <= eps <= simple * (1 + 1e-12)
    # and the two forms of the minimisation agree where both are accurate (at the switch)
    below, above = zcdp_to_approx_dp(0.999999e12, delta), zcdp_to_approx_dp(1.000001e12, delta)
    assert 0 < above - below == pytest.approx(2e6 * (1 + math.sqrt(math.log(1 / delta) / 1e12)), rel=1e-3)
