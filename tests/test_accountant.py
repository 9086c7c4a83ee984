"""Tests of the accountant (fedbandit.accounting.account) against formulas written out here."""

import math

import numpy as np
import pytest
from scipy import optimize, stats

from fedbandit.accounting import (
    Accounting,
    ApproxDpEvent,
    ClaimedEvent,
    ComposedEvent,
    ConditionalEvent,
    GaussianEvent,
    InvalidEvent,
    LaplaceEvent,
    NoReleaseEvent,
    NonPrivateEvent,
    SelfComposedEvent,
    account,
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
