"""Tests of the amplification-by-shuffling bounds (fedbandit.accounting.amplification)."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from fedbandit.accounting.amplification import (
    AmplificationValidityError,
    AmplificationValidityWarning,
    fmt22_approx_dp,
    fmt22_closed_form_epsilon,
    fmt22_closed_form_validity,
    fmt22_numerical_delta,
    fmt22_numerical_epsilon,
    gaussian_delta_exact,
    gaussian_epsilon_exact,
    zc_amplification_sigma0,
    zc_amplification_validity,
)


def _shuffled_rr_delta(epsilon, epsilon0, n):
    """Exact δ(ε) of shuffled binary randomized response on one neighbouring pair.

    Users 2..n hold 0, user 1 holds 0 or 1; the shuffled output is the number of ones.
    This is a *lower* bound on the worst case of any ε₀-LDP randomizer, so every valid
    amplification bound must be at least this large.
    """
    p = math.exp(epsilon0) / (1 + math.exp(epsilon0))
    base = stats.binom(n - 1, 1 - p).pmf(np.arange(n))
    c0 = np.zeros(n + 1)
    c1 = np.zeros(n + 1)
    c0[:n] += base * p
    c0[1:] += base * (1 - p)
    c1[:n] += base * (1 - p)
    c1[1:] += base * p
    e = math.exp(epsilon)
    return max(np.maximum(0, c0 - e * c1).sum(), np.maximum(0, c1 - e * c0).sum())


def test_closed_form_validity_region():
    # n = 100, δ = 1e-4: ln(100 / (16 ln 4e4)) < 0, invalid for every ε₀ (Feldman, McMillan & Talwar 2022, validity condition).
    assert not fmt22_closed_form_validity(0.0, 100, 1e-4)[0].holds
    with pytest.raises(AmplificationValidityError, match="ε₀ <"):
        fmt22_closed_form_epsilon(0.1, 100, 1e-4)
    with pytest.warns(AmplificationValidityWarning, match="forced"):
        fmt22_closed_form_epsilon(0.1, 100, 1e-4, force=True)
    assert fmt22_closed_form_validity(1.0, 10_000, 1e-6)[0].holds


def test_closed_form_value():
    eps0, n, delta = 1.0, 10_000, 1e-6
    a = 8 * math.sqrt(math.e * math.log(4 / delta) / n)
    c = 8 * math.e / n
    ep = math.log(1 + a + c)
    expected = math.log(1 + (1 - math.exp(-eps0)) / (1 + math.exp(-eps0 - ep)) * (a + c))
    assert fmt22_closed_form_epsilon(eps0, n, delta) == pytest.approx(expected)


@pytest.mark.parametrize("eps0,n", [(0.5, 200), (1.0, 500), (2.0, 1000)])
def test_numerical_bound_is_an_upper_bound_and_tighter(eps0, n):
    delta = 1e-6
    eps = fmt22_numerical_epsilon(eps0, n, delta)
    assert 0 < eps < eps0
    # Valid: at its ε, δ(ε) of the exact shuffled RR is below the target.
    assert _shuffled_rr_delta(eps, eps0, n) <= delta * (1 + 1e-6)
    # Tighter than the closed form where the closed form is valid.
    if fmt22_closed_form_validity(eps0, n, delta)[0].holds:
        assert eps <= fmt22_closed_form_epsilon(eps0, n, delta)


@pytest.mark.parametrize("eps0,n,delta", [(1.0, 10_000, 1e-6), (0.5, 2_000, 1e-3), (2.0, 100_000, 1e-8)])
def test_closed_form_is_valid_and_looser_than_numerical(eps0, n, delta):
    """Where the closed form applies, its ε is a valid bound and no tighter than the numerical one.

    Valid: at the closed form's ε, the exact δ(ε) of shuffled binary randomized response (a lower
    bound on the worst case over ε₀-LDP randomizers) is at most δ.  A closed form with a dropped
    constant (1 instead of 8 in a and c) gives an ε below the numerical bound at the first and third
    settings (0.030 < 0.053, 0.029 < 0.059) and fails.
    """
    assert fmt22_closed_form_validity(eps0, n, delta)[0].holds
    closed = fmt22_closed_form_epsilon(eps0, n, delta)
    assert fmt22_numerical_epsilon(eps0, n, delta) <= closed < eps0
    assert _shuffled_rr_delta(closed, eps0, n) <= delta


@settings(max_examples=15, deadline=None)
@given(eps0=st.floats(0.05, 3.0), n=st.integers(2, 300), eps=st.floats(0.0, 1.0))
def test_numerical_delta_dominates_shuffled_rr(eps0, n, eps):
    assert fmt22_numerical_delta(eps, eps0, n) >= _shuffled_rr_delta(eps, eps0, n) - 1e-12


def test_numerical_monotone_in_n_and_eps0():
    e = [fmt22_numerical_epsilon(1.0, n, 1e-5) for n in (100, 400, 1600)]
    assert e[0] > e[1] > e[2]
    e = [fmt22_numerical_epsilon(x, 400, 1e-5) for x in (0.25, 0.5, 1.0)]
    assert e[0] < e[1] < e[2]


def test_n_equals_one_is_the_randomizer_itself():
    eps0 = 0.8
    assert fmt22_numerical_delta(eps0, eps0, 1) == pytest.approx(0.0, abs=1e-15)
    assert fmt22_numerical_delta(0.0, eps0, 1) == pytest.approx((math.exp(eps0) - 1) / (math.exp(eps0) + 1))


def test_approx_dp_extension():
    eps, delta = fmt22_approx_dp(1.0, 1e-9, 1000, 1e-6)
    assert eps == pytest.approx(fmt22_numerical_epsilon(1.0, 1000, 1e-6))
    assert delta == pytest.approx(1e-6 + (math.exp(eps) + 1) * (1 + math.exp(-1.0) / 2) * 1000 * 1e-9)


def test_zc_sigma0_variants_and_validity():
    args = (0.5, 0.1, 100, 400, 10_000)
    conds = zc_amplification_validity(*args)
    assert all(c.holds for c in conds)
    s = zc_amplification_sigma0(*args)
    kappa = 9
    expected = math.sqrt(kappa * math.log(10) * math.log1p(kappa / 1000) * math.log(100 * kappa / 0.1)) / (0.5 * 10)
    assert s == pytest.approx(expected)
    # The recalled variant needs κ/(δT) > 1: fails at δ = 0.1, T = 1e4.
    with pytest.raises(AmplificationValidityError, match="κ/\\(δT\\)"):
        zc_amplification_sigma0(*args, variant="recalled")
    r = zc_amplification_sigma0(0.5, 1e-4, 200, 400, 10_000, variant="recalled")
    assert r == pytest.approx(
        math.sqrt(kappa * math.log(1e4) * math.log(kappa / (1e-4 * 1e4)) * math.log(200 * kappa / 1e-4)) / (0.5 * math.sqrt(200))
    )
    # Paper settings of Fig. 2a: M = 100 < 16 ln(4/δ) ≈ 170 -> invalid unless forced.
    with pytest.raises(AmplificationValidityError):
        zc_amplification_sigma0(1e-3, 1e-4, 100, 400, 10_000)
    with pytest.warns(AmplificationValidityWarning):
        zc_amplification_sigma0(1e-3, 1e-4, 100, 400, 10_000, force=True)
    with pytest.raises(AmplificationValidityError, match="small ε"):
        zc_amplification_sigma0(2.0, 0.1, 100, 400, 10_000)


def test_gaussian_exact_profile():
    from scipy.stats import norm

    # At ε = 0 the profile is the total variation distance 2Φ(μ/2) − 1.
    assert gaussian_delta_exact(0.0, 1.0) == pytest.approx(2 * norm.cdf(0.5) - 1)
    eps = gaussian_epsilon_exact(1.0, 1e-5)
    assert gaussian_delta_exact(eps, 1.0) == pytest.approx(1e-5, rel=1e-6)
    # Exact ε is below the classical calibration sqrt(2 log(1.25/δ))/σ (σ = 1/μ) for ε < 1.
    mu = 0.2
    assert gaussian_epsilon_exact(mu, 1e-5) < mu * math.sqrt(2 * math.log(1.25 / 1e-5))
    assert gaussian_epsilon_exact(0.0, 0.1) == 0.0
    # The ideal variant: σ₀(LDP)/sqrt(M).
    s = zc_amplification_sigma0(0.5, 0.1, 100, 400, 10_000, variant="ideal")
    assert s == pytest.approx(math.sqrt(8 * 9 * (math.log(20) + 0.5)) / 0.5 / 10)


def test_bad_input():
    with pytest.raises(ValueError, match="delta"):
        fmt22_numerical_epsilon(1.0, 10, 1.5)
    with pytest.raises(ValueError, match="n"):
        fmt22_numerical_epsilon(1.0, 0, 0.1)
    with pytest.raises(ValueError, match="epsilon0"):
        fmt22_numerical_delta(0.1, -1.0, 10)
    with pytest.raises(ValueError, match="epsilon"):
        zc_amplification_sigma0(0.0, 0.1, 100, 400, 10_000)
    with pytest.raises(ValueError, match="variant"):
        zc_amplification_sigma0(0.5, 0.1, 100, 400, 10_000, variant="other")
    with pytest.raises(ValueError, match="method"):
        fmt22_approx_dp(1.0, 0.0, 10, 0.1, method="x")
