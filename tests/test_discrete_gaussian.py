"""Tests of the exact discrete Gaussian sampler (fedbandit.mechanisms.discrete_gaussian).

Statistical tests use fixed seeds, so they are deterministic; each is designed with a
false-alarm rate (probability of failing for a correct sampler) of at most 1e-3 per
test, stated in its docstring.
"""

from __future__ import annotations

import math
from decimal import Decimal, getcontext
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from fedbandit.mechanisms.discrete_gaussian import (
    _as_fraction,
    _build_tables,
    _exp_bounds,
    _resolve_candidate,
    bernoulli_exp_reference,
    discrete_gaussian_pmf,
    discrete_gaussian_variance,
    sample_discrete_gaussian,
    sample_discrete_gaussian_reference,
)

ALPHA = 1e-3  # false-alarm rate of every statistical test below


def _binned_probs(sigma: float, n_bins: int):
    """Bins of integers with (roughly) equal exact mass; returns edges and exact probabilities."""
    zmax = int(math.ceil(12 * sigma)) + 12
    z = np.arange(-zmax, zmax + 1)
    p = discrete_gaussian_pmf(z, sigma)
    cdf = np.cumsum(p)
    # bin boundaries at integer points where the cdf crosses k / n_bins
    cuts = np.unique(np.searchsorted(cdf, np.arange(1, n_bins) / n_bins))
    edges = z[cuts]  # bin i holds values <= edges[i] (and > edges[i-1])
    probs = np.diff(np.concatenate([[0.0], cdf[cuts], [1.0]]))
    return edges, probs


def _chi2_pvalue(samples: np.ndarray, sigma: float, n_bins: int = 60) -> float:
    edges, probs = _binned_probs(sigma, n_bins)
    idx = np.searchsorted(edges, samples, side="left")
    counts = np.bincount(idx, minlength=len(probs))
    expected = probs * samples.size
    keep = expected > 5
    # merge the (tiny) tail bins into the neighbours via the keep mask's complement
    obs = np.append(counts[keep], counts[~keep].sum())
    exp = np.append(expected[keep], expected[~keep].sum())
    if exp[-1] == 0:
        obs, exp = obs[:-1], exp[:-1]
    return stats.chisquare(obs, exp * obs.sum() / exp.sum()).pvalue


@pytest.mark.parametrize("sigma", [0.3, 0.8, 1.0, 2.5, 10.0, 1000.0, 4321.5])
def test_chi_square_goodness_of_fit(sigma):
    """Chi-square GOF against the exact pmf (binned); fails with probability 1e-3 if correct."""
    rng = np.random.default_rng(12345)
    x = sample_discrete_gaussian(sigma, 400_000, rng)
    assert x.dtype == np.int64
    assert _chi2_pvalue(x, sigma) > ALPHA


@pytest.mark.parametrize("sigma", [0.5, 1.0, 10.0, 1000.0])
def test_variance_within_tolerance(sigma):
    """Sample variance within 4 standard errors of the exact variance (false alarm < 1e-4)."""
    rng = np.random.default_rng(7)
    n = 400_000
    x = sample_discrete_gaussian(sigma, n, rng).astype(np.float64)
    v = discrete_gaussian_variance(sigma)
    zmax = int(math.ceil(12 * sigma)) + 12
    z = np.arange(-zmax, zmax + 1, dtype=np.float64)
    m4 = float(np.sum(z**4 * discrete_gaussian_pmf(z, sigma)))
    se = math.sqrt((m4 - v * v) / n)
    assert abs(np.mean(x**2) - v) < 4 * se
    assert abs(np.mean(x)) < 4 * math.sqrt(v / n)
    assert v <= sigma**2 * (1 + 1e-12)  # [CKS20] Cor. 9: variance below sigma^2


def test_exact_variance_matches_sigma_squared_for_large_sigma():
    assert discrete_gaussian_variance(10.0) == pytest.approx(100.0, rel=1e-12)
    assert discrete_gaussian_variance(0.3) < 0.09


def test_fast_sampler_matches_scalar_reference():
    """Two-sample chi-square between the vectorized sampler and [CKS20]'s scalar algorithm (false alarm 1e-3)."""
    rng = np.random.default_rng(3)
    sigma = 2.0
    ref = sample_discrete_gaussian_reference(sigma, 6000, rng)
    fast = sample_discrete_gaussian(sigma, 6000, rng)
    bins = np.arange(-8, 10) - 0.5
    a, _ = np.histogram(np.clip(ref, -8, 8), bins)
    b, _ = np.histogram(np.clip(fast, -8, 8), bins)
    keep = (a + b) > 10
    table = np.vstack([a[keep], b[keep]])
    assert stats.chi2_contingency(table)[1] > ALPHA
    # and the reference itself fits the pmf
    assert _chi2_pvalue(ref, sigma, n_bins=12) > ALPHA


def test_bernoulli_exp_reference_rate():
    """Bernoulli(exp(-gamma)) frequency within 4.5 s.e. (false alarm < 1e-5)."""
    rng = np.random.default_rng(11)
    for gamma in [Fraction(1, 3), Fraction(5, 2)]:
        n = 20_000
        hits = sum(bernoulli_exp_reference(gamma, rng) for _ in range(n))
        p = math.exp(-float(gamma))
        assert abs(hits / n - p) < 4.5 * math.sqrt(p * (1 - p) / n)


def test_exp_bounds_bracket_the_true_value():
    getcontext().prec = 80
    for z in [Fraction(-1, 3), Fraction(-17, 2), Fraction(1, 7), Fraction(-250, 3), Fraction(1), Fraction(0)]:
        lo, hi = _exp_bounds(z, 120)
        true = (Decimal(z.numerator) / Decimal(z.denominator)).exp() * (Decimal(2) ** 120)
        assert Decimal(lo) <= true <= Decimal(hi)
        assert hi - lo <= 4


def test_tables_bracket_thresholds():
    """Every table entry brackets the exact threshold (checked with 80-digit decimals)."""
    getcontext().prec = 80
    sigma2 = Fraction(7.3) ** 2
    tab = _build_tables(sigma2)
    t, s = tab.t, tab.s
    for g in range(0, tab.gtab + 2):
        q = (Decimal(-g) / Decimal(t)).exp() * (Decimal(2) ** 64)
        assert Decimal(int(tab.lq[g])) <= q or int(tab.lq[g]) == 2**64 - 1
        assert q <= Decimal(int(tab.hq[g])) or g == 0
        gam = Fraction((g - s) ** 2) / (2 * sigma2)
        a = (-Decimal(gam.numerator) / Decimal(gam.denominator)).exp() * (Decimal(2) ** 63)
        assert Decimal(int(tab.la[g])) <= a <= Decimal(int(tab.ha[g]))
    assert int(tab.ha[tab.gtab + 1]) <= 1  # beyond the table every acceptance is < 2^-63


@pytest.mark.parametrize("sigma", [0.7, 10.0, 1000.0])
def test_slow_path_agrees_with_fast_decisions(sigma):
    """The lazy exact resolution gives the fast path's answer whenever the fast path decides."""
    tab = _build_tables(_as_fraction(sigma) ** 2)
    rng = np.random.default_rng(5)
    m = 400
    r1 = rng.integers(0, 2**64, size=m, dtype=np.uint64)
    r2 = rng.integers(0, 2**64, size=m, dtype=np.uint64)
    u = ((r1 >> np.uint64(11)).astype(np.int64).astype(float) + 0.5) * 2.0**-53
    g = np.minimum(-tab.t * np.log(u), tab.gtab + 1).astype(np.intp)
    ok = (r1 < tab.lq[g]) & (r1 >= tab.hq[g + 1])
    a = r2 >> np.uint64(1)
    sure, maybe = a < tab.la[g], a < tab.ha[g]
    neg = (r2 & np.uint64(1)).astype(bool)
    decided = ok & (sure | ~maybe)
    accept = ok & sure & ~(neg & (g == 0))
    for i in np.flatnonzero(decided):
        expected = (int(-g[i]) if neg[i] else int(g[i])) if accept[i] else None
        assert _resolve_candidate(tab, int(r1[i]), int(r2[i]), rng) == expected


def test_undecided_comparisons_are_resolved_exactly():
    """Force the rare path: a prefix sitting exactly on a threshold bracket is still decided."""
    tab = _build_tables(Fraction(9))
    rng = np.random.default_rng(0)
    g = 3
    r1 = int(tab.lq[g])  # undecided for U1 < q^3
    results = {_resolve_candidate(tab, r1, 0, rng) for _ in range(5)}
    assert results <= {2, 3}  # G is 2 or 3 depending on further bits; sign +, accepted (a = 0)


def test_large_sigma_falls_back_with_warning():
    rng = np.random.default_rng(1)
    with pytest.warns(RuntimeWarning, match="MAX_TABLE_SIGMA"):
        x = sample_discrete_gaussian(2.0e5, 3, rng)
    assert x.shape == (3,)


def test_inexact_float_path_is_close():
    """Opt-in float path: chi-square GOF at sigma=5 (false alarm 1e-3)."""
    rng = np.random.default_rng(2)
    x = sample_discrete_gaussian(5.0, 200_000, rng, exact=False)
    assert _chi2_pvalue(x, 5.0, n_bins=30) > ALPHA


def test_shapes_and_determinism():
    a = sample_discrete_gaussian(3.0, (4, 5), np.random.default_rng(9))
    b = sample_discrete_gaussian(3.0, (4, 5), np.random.default_rng(9))
    assert a.shape == (4, 5) and np.array_equal(a, b)
    assert sample_discrete_gaussian(Fraction(3, 2), 0, np.random.default_rng(0)).shape == (0,)


@pytest.mark.parametrize("sigma", [0.0, -1.0, float("inf"), float("nan")])
def test_bad_sigma(sigma):
    with pytest.raises((ValueError, TypeError), match="sigma"):
        sample_discrete_gaussian(sigma, 3, np.random.default_rng(0))


def test_bad_size_and_rng():
    with pytest.raises(ValueError, match="size"):
        sample_discrete_gaussian(1.0, (-1,), np.random.default_rng(0))
    with pytest.raises(TypeError, match="rng"):
        sample_discrete_gaussian(1.0, 3, None)
