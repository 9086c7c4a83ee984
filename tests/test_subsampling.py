"""Amplification by subsampling (fedbandit.accounting.subsampling), cross-checked against dp-accounting."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from dp_accounting import dp_event
from dp_accounting.pld import pld_privacy_accountant as pld_lib
from dp_accounting.privacy_accountant import NeighboringRelation
from dp_accounting.rdp import rdp_privacy_accountant as rdp_lib
from scipy import integrate

from fedbandit.accounting.ddg import ddg_epsilon, ddg_params
from fedbandit.accounting.subsampling import (
    SAMPLED_GAUSSIAN_ORDERS,
    SUBSAMPLING_ORDERS,
    amplification_for,
    poisson_subsampled_rdp,
    sampled_gaussian_epsilon,
    sampled_gaussian_noise_multiplier,
    sampled_gaussian_rdp,
    subsampled_epsilon,
    without_replacement_rdp,
)

ORDERS = list(SUBSAMPLING_ORDERS)
CASES = [(0.01, 1.0, 1000), (0.07, 2.0, 300), (0.3, 0.8, 50), (0.7, 4.0, 60)]


@pytest.mark.parametrize("q, z, T", CASES)
def test_sampled_gaussian_rdp_is_dp_accounting_s(q, z, T):
    """The exact sampled-Gaussian RDP [MTZ19] equals dp-accounting's PoissonSampledDpEvent(GaussianDpEvent) RDP."""
    acc = rdp_lib.RdpAccountant(ORDERS)
    acc.compose(dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(z)), T)
    np.testing.assert_allclose(T * sampled_gaussian_rdp(ORDERS, q, z), acc._rdp, rtol=1e-9)
    # the book's ε adds fractional orders to these integer ones: never looser, and equal where integers dominate
    integer_only = acc.get_epsilon(1e-5)
    assert sampled_gaussian_epsilon(z, q, T, 1e-5) <= integer_only * (1 + 1e-9)


def test_sampled_gaussian_orders_contain_dp_accountings():
    """The book accounts the sampled Gaussian on a superset of dp-accounting's default RDP orders (fractional ones too)."""
    assert set(rdp_lib.DEFAULT_RDP_ORDERS) <= set(SAMPLED_GAUSSIAN_ORDERS.tolist())
    assert set(SUBSAMPLING_ORDERS.tolist()) <= set(SAMPLED_GAUSSIAN_ORDERS.tolist())
    assert any(a != round(a) for a in SAMPLED_GAUSSIAN_ORDERS)


def _rdp_by_quadrature(alpha: float, q: float, z: float) -> float:
    """RDP of the sampled Gaussian written out: log E_{x~N(0,z²)}[(1 − q + q e^{(2x−1)/(2z²)})^α]/(α − 1) [MTZ19 eq. (3)]."""
    def f(x):
        return math.exp(alpha * math.log1p(-q + q * math.exp((2 * x - 1) / (2 * z * z))) - x * x / (2 * z * z))
    value, _ = integrate.quad(f, -60 * z, 60 * z, limit=500, epsabs=0, epsrel=1e-12)
    return math.log(value / (z * math.sqrt(2 * math.pi))) / (alpha - 1)


FRACTIONAL = [1.1, 1.5, 2.5, 5.5, 10.9]


@pytest.mark.parametrize("z, q", [(0.5, 0.001), (0.5, 0.01), (1.0, 0.07), (0.8, 0.3), (2.0, 0.3), (10.0, 0.3),
                                  (10.0, 0.6), (4.0, 0.9)])
def test_fractional_order_rdp_is_the_integral_and_below_dp_accountings(z, q):
    """At fractional α the two-series sum [MTZ19 Sec. 3.3] is the RDP (by quadrature), an upper bound on it,
    and never above dp-accounting's ``_compute_rdp_poisson_subsampled_gaussian`` (which sums |C(α, i)|)."""
    ours = sampled_gaussian_rdp(FRACTIONAL, q, z)
    truth = np.array([_rdp_by_quadrature(a, q, z) for a in FRACTIONAL])
    np.testing.assert_allclose(ours, truth, rtol=1e-5)  # the added tail bound
    assert np.all(ours >= truth * (1 - 1e-8)), (ours, truth)  # sound: the tail bound is added, never dropped
    theirs = rdp_lib._compute_rdp_poisson_subsampled_gaussian(q, z, FRACTIONAL)
    finite = np.isfinite(theirs)  # dp-accounting drops orders whose series did not converge in 1000 terms
    assert np.all(ours[finite] <= theirs[finite] * (1 + 1e-9)), (ours, theirs)


def test_the_quadrature_check_catches_the_integer_formula_at_fractional_orders():
    """The check can fail: the integer-order sum Σ_{k≤⌊α⌋} C(α,k)(1−q)^{α−k} q^k e^{(k²−k)/(2z²)} at α = 2.5 is off."""
    z, q, a = 1.0, 0.07, 2.5
    k = np.arange(int(a) + 1.0)
    logc = np.array([math.lgamma(a + 1) - math.lgamma(j + 1) - math.lgamma(a - j + 1) for j in k])
    naive = np.logaddexp.reduce(logc + (a - k) * math.log1p(-q) + k * math.log(q) + (k * k - k) / (2 * z * z)) / (a - 1)
    truth = _rdp_by_quadrature(a, q, z)
    assert sampled_gaussian_rdp([a], q, z)[0] == pytest.approx(truth, rel=1e-6)
    assert naive != pytest.approx(truth, rel=1e-3)


@pytest.mark.parametrize("z", [0.8, 1.0, 2.0, 4.0])
def test_sampled_gaussian_epsilon_never_looser_than_dp_accountings_rdp(z):
    """Issue 22's grid: the book's sampled-Gaussian ε is never above dp-accounting's RDP ε by more than 0.1 %."""
    for q, T in itertools.product([0.001, 0.01, 0.07, 0.3], [10, 150, 1500]):
        acc = rdp_lib.RdpAccountant()
        acc.compose(dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(z)), T)
        for delta in (1e-5, 1e-8):
            ours, theirs = sampled_gaussian_epsilon(z, q, T, delta), acc.get_epsilon(delta)
            assert ours <= theirs * 1.001, (z, q, T, delta, ours, theirs)


@pytest.mark.parametrize("q, z, T", CASES)
def test_rdp_accounting_upper_bounds_the_pld_accountant(q, z, T):
    """RDP is an upper bound on the tight (PLD) ε of the sampled Gaussian, and not a loose one here."""
    pld = pld_lib.PLDAccountant()
    pld.compose(dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(z)), T)
    tight = pld.get_epsilon(1e-5)
    ours = sampled_gaussian_epsilon(z, q, T, 1e-5)
    assert tight <= ours * (1 + 1e-3) and ours < 1.6 * tight, (ours, tight)


@pytest.mark.parametrize("q, z, T", CASES)
def test_generic_bounds_are_valid_for_the_gaussian(q, z, T):
    """ZW19 Thm. 5 and WBK19 Thm. 9 on the Gaussian's α/(2z²) are never below the exact / dp-accounting values."""
    base = lambda a: np.asarray(a) / (2 * z * z)  # noqa: E731
    exact = sampled_gaussian_rdp(ORDERS, q, z)
    generic = poisson_subsampled_rdp(ORDERS, q, base)
    assert np.all(generic >= exact * (1 - 1e-12))
    acc = rdp_lib.RdpAccountant(ORDERS, NeighboringRelation.REPLACE_ONE)
    N = 1000
    acc.compose(dp_event.SampledWithoutReplacementDpEvent(N, int(round(q * N)), dp_event.GaussianDpEvent(z)), 1)
    wor = without_replacement_rdp(ORDERS, round(q * N) / N, base)
    # dp-accounting does not cap by the unsampled mechanism's RDP (valid by joint convexity); we do
    theirs = np.minimum(np.asarray(acc._rdp), base(np.array(ORDERS)))
    assert np.all(wor >= theirs * (1 - 1e-9))
    if acc._rdp[0] < base(2.0):  # where dp-accounting uses the general bound at α = 2, the two agree
        assert wor[0] == pytest.approx(acc._rdp[0], rel=1e-9)


def test_a_broken_bound_is_caught():
    """The cross-check fails for a variant that forgets the factor 3 of ZW19 Thm. 5's tail (it undercuts the exact RDP)."""
    z, q = 2.0, 0.07
    exact = sampled_gaussian_rdp(ORDERS, q, z)

    def broken(orders):  # the generic bound with coefficient 1 instead of 3 and e^{ε(2)} dropped
        out = []
        for a in np.asarray(orders, dtype=int):
            k = np.arange(a + 1)
            logc = np.array([math.lgamma(a + 1) - math.lgamma(j + 1) - math.lgamma(a - j + 1) for j in k])
            terms = logc + (a - k) * math.log1p(-q) + k * math.log(q) + (k - 1.0) * k / (2 * z * z) * (k >= 3)
            out.append(np.logaddexp.reduce(terms) / (a - 1))
        return np.array(out)

    assert np.any(broken(ORDERS) < exact * (1 - 1e-6))


def test_subsampling_never_hurts_and_q1_is_the_base():
    base = lambda a: 0.3 * np.asarray(a)  # noqa: E731
    for f in (poisson_subsampled_rdp, without_replacement_rdp):
        np.testing.assert_allclose(f(ORDERS, 1.0, base), base(np.array(ORDERS)))
        assert np.all(f(ORDERS, 0.5, base) <= base(np.array(ORDERS)) + 1e-12)
        lo, hi = f(ORDERS, 0.05, base), f(ORDERS, 0.2, base)
        assert np.all(lo <= hi + 1e-12)


def test_noise_multiplier_inverts_epsilon():
    for amp in ("poisson", "without-replacement"):
        z = sampled_gaussian_noise_multiplier(3.0, 1e-5, 0.07, 200, amp)
        assert sampled_gaussian_epsilon(z, 0.07, 200, 1e-5, amp) == pytest.approx(3.0, rel=1e-6)
    assert amplification_for("add-remove") == "poisson" and amplification_for("replace") == "without-replacement"


def test_ddg_subsampled_accounting_is_monotone_and_calibrated():
    p = ddg_params(16, 3, 100, 650, 0.3, 4.0, 1e-5, steps=100, sampling_rate=0.07)
    assert p.epsilon_for(100) == pytest.approx(4.0, rel=1e-6)
    kw = dict(c=0.3, gamma=p.gamma, beta=p.beta, n=100, d=p.d_pad, delta=1e-5, steps=100)
    e_q = [ddg_epsilon(p.sigma, sampling_rate=q, **kw) for q in (0.02, 0.07, 0.3, 1.0)]
    assert all(a < b for a, b in zip(e_q, e_q[1:]))
    # replace-one accounting of the same noise is larger than add/remove
    assert ddg_epsilon(p.sigma, sampling_rate=0.07, amplification="without-replacement", **kw) > e_q[1]
    # the generic DDG bound is at least the sampled Gaussian's at the same noise (τ ≈ 0 here)
    z = math.sqrt(100) * p.sigma / p.delta2
    assert e_q[1] >= sampled_gaussian_epsilon(z, 0.07, 100, 1e-5)


@pytest.mark.parametrize("kwargs, match", [
    (dict(orders=[1.5]), "orders"), (dict(q=0.0), "q"), (dict(q=1.2), "q"),
])
def test_bad_arguments(kwargs, match):
    args = dict(orders=[2, 3], q=0.1)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        poisson_subsampled_rdp(args["orders"], args["q"], lambda a: np.asarray(a) * 0.1)
    with pytest.raises(ValueError, match="method"):
        ddg_epsilon(1.0, c=1.0, gamma=0.01, beta=0.5, n=10, d=16, delta=1e-5, sampling_rate=0.5, method="zcdp")
    with pytest.raises(ValueError, match="base_rdp"):
        subsampled_epsilon(lambda a: -np.ones_like(a), 0.1, 10, 1e-5)


def _lse_cases():
    g = np.random.default_rng(7)
    for n in (1, 2, 5, 1001, 2400):
        a = g.normal(size=n) * 30.0
        yield a, None
        yield a, np.where(g.random(n) < 0.5, 1.0, -1.0)  # signed weights, as the fractional-order series
        yield a, g.normal(size=n)
    for k in range(4):  # a dominant term at 0 (the result is then the log1p of a small sum: its last bits show)
        a = np.concatenate([[0.0], g.normal(size=40) - 18.0 - 4 * k])
        yield a, None
        yield a, np.where(g.random(a.size) < 0.5, 1.0, -1.0)
        yield np.concatenate([[0.0, 0.0], a[1:]]), None  # and a tie at it
        yield np.concatenate([[0.0, 0.0], a[1:]]), np.concatenate([[1.0, -0.5], np.ones(a.size - 1)])
    a = np.array([3.0, 3.0, -1.0, 2.5])  # a tie at the maximum
    yield a, None
    yield a, np.array([1.0, -1.0, 1.0, 1.0])
    yield a, np.array([0.0, 1.0, -1.0, 1.0])  # a zero weight on a maximal term
    yield np.array([-np.inf, -np.inf]), None  # nothing to sum
    yield np.array([-np.inf, 0.5, -np.inf]), np.array([1.0, 1.0, -1.0])
    yield np.array([1.0, 1.0]), np.array([1.0, -1.0])  # a sum that cancels exactly
    yield np.array([800.0, 700.0, -np.inf]), np.array([-1.0, 1.0, 1.0])  # a negative sum, exp overflows alone
    yield np.array([np.inf, 1.0]), None
    yield np.array([np.nan, 1.0]), np.array([1.0, 1.0])
    yield np.array([np.inf, 1.0]), np.array([0.0, 1.0])


@pytest.mark.parametrize("case", range(len(list(_lse_cases()))))
def test_lean_logsumexp_is_scipys_bit_for_bit(case):
    """The accounting's 1-d log-sum-exp returns scipy's value and sign as the same floats (the calibrations and
    the golden record depend on every bit), on ties, signed and zero weights, cancellations and infinities."""
    from scipy import special

    from fedbandit.accounting.subsampling import _logsumexp_1d

    a, b = list(_lse_cases())[case]
    with np.errstate(all="ignore"):
        want, want_sign = special.logsumexp(a, b=b, return_sign=True)
        got, got_sign = _logsumexp_1d(a, b)
    assert np.array_equal(np.float64(got), np.float64(want), equal_nan=True), (got, want)
    assert np.array_equal(np.float64(got_sign), np.float64(want_sign), equal_nan=True), (got_sign, want_sign)
    if b is None:
        with np.errstate(all="ignore"):
            assert np.array_equal(np.float64(_logsumexp_1d(a)[0]), np.float64(special.logsumexp(a)), equal_nan=True)


def test_remembered_noise_multiplier_is_the_root_search_s():
    """sampled_gaussian_noise_multiplier remembers its root search: every call, first or repeated, interleaved with
    calls that differ in one argument, returns the float of the search itself (the uncached function)."""
    from fedbandit.accounting import subsampling as S

    plain = S._sampled_gaussian_noise_multiplier.__wrapped__
    args = [(2.0, 1e-5, 0.07, 50, "poisson"), (2.0, 1e-5, 0.07, 80, "poisson"), (2.0, 1e-6, 0.07, 50, "poisson"),
            (2.0, 1e-5, 0.05, 50, "poisson"), (3.0, 1e-5, 0.07, 50, "poisson"),
            (2.0, 1e-5, 0.07, 50, "without-replacement")]
    want = [plain(*a) for a in args]
    assert len(set(want)) == len(want)
    for _ in range(2):
        for a, w in zip(args, want):
            assert S.sampled_gaussian_noise_multiplier(*a) == w
    assert S.sampled_gaussian_noise_multiplier(2, 1e-5, 0.07, 50) == want[0]  # an int ε: the same key and float
