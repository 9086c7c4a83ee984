"""The statistics and calibration helpers that replace the chapters' own definitions (issue 23).

Two kinds of test per helper:

* against a plain reference written out here (the formula, not the code under test);
* against the chapter's original definition, copied below verbatim except that the
  notebook globals it read (``ALPHA``, ``ORDER_ALPHA``, ``PAPER``, ``GAP_N``, ...) are
  parameters: the package function must return the *same* numbers (bit for bit), so that
  the chapter pass that replaces each definition by an import changes no computed result.
  Where the package differs from a chapter in the last bit (``np.hypot`` against
  ``math.hypot``, ``m − lo`` against ``hi − m``), the test says so and checks the
  difference is at most a few ulps.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy import stats

from fedbandit.accounting.allocation import mechanism_budget
from fedbandit.accounting.calibration import central_sigma, ldp_total_variance
from fedbandit.accounting.composition import gaussian_noise_scale, split_budget_optimal
from fedbandit.experiments import (
    claim,
    claim_difference,
    claim_estimate_gap,
    claim_order,
    claim_slope,
    claim_slope_gap,
    fit_exponent_t,
    mean_and_se,
    mean_below,
    mean_within,
    means_not_distinguished,
    regret_interval,
    t_interval,
)
from fedbandit.experiments.statistics import (
    claim_mean,
    fit_polylog,
    fit_power_law,
    held_out_worst_case,
    mean_above_level,
    mean_and_half_width,
    ordering_summary,
    ratio_and_se,
    spearman_rho,
    welch_dof,
    worst_case_runs,
)
from fedbandit.mechanisms.psco import error_proxy
from fedbandit.protocols import create
from fedbandit.theory.ddg import ddg_mean_mse_by_bits
from fedbandit.theory.linear import fixed_batch_noise_levels, kappa, nearest_divisor, optimal_batch_size
from fedbandit.theory.psco import error_proxy_local_slope, supremum_factor_slope

# runs of a configuration: few, finite, moderate values (a regret or an error)
RUNS = arrays(np.float64, st.integers(2, 12), elements=st.floats(-1e3, 1e3, allow_nan=False, width=64))
ALPHAS = st.sampled_from([1e-3, 0.005, 0.01, 0.025, 0.05, 0.2])


def paired_runs():
    return st.integers(2, 12).flatmap(lambda n: st.tuples(
        arrays(np.float64, n, elements=st.floats(-1e3, 1e3, allow_nan=False)),
        arrays(np.float64, n, elements=st.floats(-1e3, 1e3, allow_nan=False))))


# ---------------------------------------------------------------------------------------
# Plain references: the formulas written out
# ---------------------------------------------------------------------------------------


def test_claim_order_is_the_paired_t_interval_at_confidence_one_minus_two_alpha():
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=7), rng.normal(0.5, 1.0, size=7)
    alpha = 0.01
    d = b - a
    half = stats.t.ppf(1 - alpha, d.size - 1) * d.std(ddof=1) / math.sqrt(d.size)  # one-sided quantile = two-sided at 1-2α
    c = claim_order("q", a, b, alpha=alpha, paired=True)
    assert c.confidence == pytest.approx(1 - 2 * alpha)
    assert c.low == pytest.approx(d.mean() - half, rel=1e-12) and c.high == pytest.approx(d.mean() + half, rel=1e-12)


def test_claim_order_welch_uses_welch_satterthwaite_dof():
    rng = np.random.default_rng(2)
    a, b = rng.normal(size=5), rng.normal(1.0, 3.0, size=9)
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    nu = (va + vb) ** 2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1))
    half = stats.t.ppf(1 - 0.005, nu) * math.sqrt(va + vb)
    c = claim_order("q", a, b, alpha=0.005)
    assert c.low == pytest.approx(b.mean() - a.mean() - half, rel=1e-12)
    assert c.high == pytest.approx(b.mean() - a.mean() + half, rel=1e-12)


def test_orderings_decide_as_the_one_sided_t_test():
    a = np.array([1.0, 1.2, 0.9, 1.1])
    far, near = a + np.array([2.0, 2.1, 1.9, 2.05]), a + np.array([0.1, -0.1, 0.05, -0.02])
    assert mean_below(a, far, alpha=0.01, paired=True)
    assert not mean_below(far, a, alpha=0.01, paired=True)
    assert not mean_below(a, near, alpha=0.01, paired=True)
    assert means_not_distinguished(a, near, alpha=0.01, paired=True)
    assert not means_not_distinguished(a, far, alpha=0.01, paired=True)
    # the boundary: t statistic of the paired difference against the quantile, written out
    d = near - a
    t_stat = d.mean() / (d.std(ddof=1) / 2.0)
    for alpha in (0.01, 0.1, 0.3, 0.45):
        assert mean_below(a, near, alpha=alpha, paired=True) == (t_stat > stats.t.ppf(1 - alpha, 3))


def test_mean_within_establishes_or_only_fails_to_contradict_the_band():
    rng = np.random.default_rng(3)
    b = rng.normal(100.0, 1.0, size=30)
    a = b * 1.02 + rng.normal(0.0, 0.1, size=30)  # 2 % above, paired
    assert mean_within(a, b, 0.05, alpha=0.01)  # inside a 5 % band, established
    assert not mean_within(a, b, 0.01, alpha=0.01)  # outside 1 %: not established ...
    assert not mean_within(a, b, 0.01, alpha=0.01, establish=False)  # ... and contradicted
    few = slice(0, 2)
    assert mean_within(a[few], b[few], 0.05, alpha=1e-3, establish=False)  # two runs contradict nothing


def test_mean_above_level_is_the_lower_one_sided_bound():
    x = np.array([1.0, 1.5, 2.0, 2.5, 3.0])
    lower = x.mean() - stats.t.ppf(0.95, 4) * x.std(ddof=1) / math.sqrt(5)
    assert mean_above_level(x, lower - 1e-9, alpha=0.05)
    assert not mean_above_level(x, lower + 1e-9, alpha=0.05)


def test_ratio_and_se_is_the_delta_method():
    r, se = ratio_and_se((3.0, 0.3), (2.0, 0.1))
    assert r == 1.5
    assert se == pytest.approx(1.5 * math.sqrt(0.1**2 + 0.05**2), rel=1e-15)
    # and it is the first-order spread of the ratio of two independent normal means (Monte Carlo, 2 % of se)
    rng = np.random.default_rng(4)
    draws = rng.normal(300.0, 3.0, 400_000) / rng.normal(200.0, 1.0, 400_000)
    assert ratio_and_se((300.0, 3.0), (200.0, 1.0))[1] == pytest.approx(draws.std(), rel=0.02)
    with pytest.raises(ValueError, match="denominator"):
        ratio_and_se((1.0, 0.1), (0.0, 0.1))


def test_claim_estimate_gap_is_welch_on_two_standard_errors():
    c = claim_estimate_gap("q", (1.3, 0.1), (1.0, 0.2), 6, 9, confidence=0.99, estimator="delta method")
    va, vb = 0.1**2, 0.2**2
    nu = (va + vb) ** 2 / (va**2 / 5 + vb**2 / 8)
    half = stats.t.ppf(0.995, nu) * math.sqrt(va + vb)
    assert c.estimate == pytest.approx(0.3) and c.high - c.estimate == pytest.approx(half, rel=1e-12)
    assert c.method == f"delta method, Student t, {nu:.3g} dof"
    assert c.admits("no difference")


def test_mean_and_half_width_is_the_student_t_half_width():
    v = np.array([2.0, 4.0, 3.0])
    m, h = mean_and_half_width(v)
    assert m == 3.0
    assert h == pytest.approx(stats.t.ppf(0.975, 2) * 1.0 / math.sqrt(3), rel=1e-12)  # s = 1


def test_ordering_summary_groups_by_the_ordering_each_claim_establishes():
    def at(low, high):
        return claim_slope("q", (low + high) / 2, (high - low) / 2 / stats.norm.ppf(0.975), math.inf,
                           alternatives={"no difference": 0.0})

    claims = {0.5: at(-1.0, 1.0), 1.0: at(0.5, 2.0), 2.0: at(-3.0, -1.0), 5.0: at(0.1, 0.4)}
    assert ordering_summary(claims, when_above="A lower", when_below="B lower") == \
        "A lower at ε = 1, 5; B lower at ε = 2; not distinguished at ε = 0.5"
    assert ordering_summary({}, when_above="a", when_below="b") == ""


def test_fit_polylog_recovers_the_exponent_of_a_power_of_the_logarithm():
    t = np.geomspace(10, 1e6, 12)
    slope, intercept, se = fit_polylog(t, 3.0 * np.log(t) ** 2.5)
    assert slope == pytest.approx(2.5, abs=1e-12) and intercept == pytest.approx(math.log(3.0)) and se < 1e-10
    with pytest.raises(ValueError, match="x"):
        fit_polylog([1.0, 10.0], [1.0, 2.0])


def test_spearman_rho_is_pearson_on_ranks():
    rng = np.random.default_rng(5)
    a, b = rng.normal(size=9), rng.normal(size=9)
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))  # no ties: ranks 0..8
    ref = np.corrcoef(ra, rb)[0, 1]
    assert spearman_rho(a, b) == pytest.approx(ref, abs=1e-12)
    assert spearman_rho([1, 2, 3, 4], [10, 20, 30, 40]) == 1.0


def test_worst_case_runs_and_held_out_by_brute_force():
    rng = np.random.default_rng(6)
    values = rng.normal(size=(4, 6, 5))  # (points, instances, runs)
    means, runs, index = worst_case_runs(values)
    held = held_out_worst_case(values)
    for p in range(4):
        best = max(range(6), key=lambda g: (sum(values[p, g]) / 5, -g))
        assert index[p] == best and np.array_equal(runs[p], values[p, best])
        for s in range(5):
            others = [r for r in range(5) if r != s]
            g_s = max(range(6), key=lambda g: (sum(values[p, g, r] for r in others) / 4, -g))
            assert held[p, s] == values[p, g_s, s]
    assert means.shape == (4, 6)
    # the held-out worst case is unbiased where the maximum of the means is not: all instances equal
    flat = np.random.default_rng(7).normal(size=(2000, 8, 3))
    assert worst_case_runs(flat)[1].mean() > 0.5  # selection bias of the max of 8 means of 3 runs
    assert abs(held_out_worst_case(flat).mean()) < 4 * 1 / math.sqrt(6000)  # mean 0, s.e. 1/sqrt(6000)
    with pytest.raises(ValueError, match="values"):
        held_out_worst_case(np.ones((3, 1)))


def test_claim_slope_gap_defaults_to_the_smaller_dof_of_the_two_fits():
    x = [10, 100, 1000]
    fa = fit_exponent_t(x, [[1.0, 1.2, 0.9], [3.1, 3.3, 2.8], [10.0, 9.5, 10.6]])
    fb = fit_exponent_t(x, [[1.0, 1.1], [2.1, 2.0], [4.0, 4.2]])
    assert claim_slope_gap("q", fa, fb) == claim_slope_gap("q", fa, fb, min(fa.dof, fb.dof))
    with pytest.raises(ValueError, match="dof"):
        claim_slope_gap("q", (0.5, 0.1), (0.4, 0.1))


def test_gaussian_noise_scale_is_the_classical_gaussian_mechanism():
    assert gaussian_noise_scale(0.5, 1e-5) == pytest.approx(math.sqrt(2 * math.log(1.25e5)) / 0.5, rel=1e-15)
    pairs = np.array([mechanism_budget(1.0, 1e-8, m) for m in (1, 5, 50)])
    assert gaussian_noise_scale(pairs[:, 0], pairs[:, 1]).shape == (3,)
    # split_budget_optimal picks the pair of its two with the smaller scale: never noisier than basic composition's
    opt = split_budget_optimal(1.0, 1e-8, 20)
    assert gaussian_noise_scale(*opt) <= gaussian_noise_scale(1.0 / 20, 1e-8 / 20) * (1 + 1e-12)
    with pytest.raises(ValueError, match="delta0"):
        gaussian_noise_scale(1.0, 0.0)


def test_supremum_factor_slope_and_local_proxy_slope_written_out():
    g = lambda n, b: math.sqrt(math.log(max(n / b, math.e)))  # noqa: E731
    assert supremum_factor_slope(1e4, 10, 1e6, 40) == pytest.approx(
        math.log(g(1e6, 40) / g(1e4, 10)) / math.log(100), rel=1e-14)
    assert supremum_factor_slope(10.0, 10, 20.0, 20) == 0.0  # one release at both ends: no factor
    n = 10**6
    ref = math.log(error_proxy("concurrent", 10 * n, 1.0, 1e-8, k=2) / error_proxy("concurrent", n, 1.0, 1e-8, k=2)) / math.log(10)
    assert error_proxy_local_slope("concurrent", n, 1.0, 1e-8, k=2) == pytest.approx(ref, rel=1e-12)
    assert error_proxy_local_slope("concurrent", 10**17, 1.0, 1e-8, k=1) == pytest.approx(1 / 3, abs=0.01)


def test_fixed_batch_noise_levels_written_out():
    T = 10_000
    assert nearest_divisor(T, 26) == 25 and nearest_divisor(T, 22.5) == 20  # 20 and 25 tie at 22.5: the smaller
    assert nearest_divisor(T, 30) == 25 and nearest_divisor(97, 50) == 97
    st_ = fixed_batch_noise_levels()
    K = T // 25
    kap = math.floor(math.log2(K)) + 1
    assert st_["B"] == 25 and st_["K"] == K and st_["kappa"] == kap == kappa(K)
    assert st_["sigma_ldp"] == pytest.approx(math.sqrt(ldp_total_variance(0.1, 0.1, K, 100)), rel=1e-15)
    assert st_["sigma_central"] == pytest.approx(math.sqrt(kap) * central_sigma(0.1, 0.1, K), rel=1e-15)
    # the chapter's finding: LDP's total noise is sqrt(M) times the central tree's; the authors' amplification
    # noise falls below the central tree's
    assert math.isclose(st_["sigma_ldp"] / st_["sigma_central"], math.sqrt(100), rel_tol=1e-9)
    assert not st_["sum_ok"]
    assert fixed_batch_noise_levels(100, 0.1, 0.1, T, "sqrt(T/M)")["B"] == optimal_batch_size(T, 100)
    with pytest.raises(ValueError, match="batch_size"):
        fixed_batch_noise_levels(batch_size="sqrt(T)")


def test_ddg_mean_mse_by_bits_from_the_protocols_calibration():
    bits, mse, g = ddg_mean_mse_by_bits(2.0, 2.0, 100, dim=50, clip=1.0, max_bits=14)
    assert bits[0] == max(4, math.ceil(math.log2(math.sqrt(100) * 2.0))) + 1 and bits[-1] == 14
    setting = dict(n_parties=100, dim=50, n_rounds=1, clip=1.0)
    cal = create("sum-ddg-secagg", epsilon=2.0, delta=1e-5, bits=14, k=2.0).configure(**setting).calibration()
    assert mse[-1] == pytest.approx((cal["sigma0"] ** 2 + cal["gamma"] ** 2 / 4) / 100, rel=1e-15)
    assert g == pytest.approx(create("sum-central-gaussian", epsilon=2.0, delta=1e-5).configure(**setting).noise_std() ** 2
                              / 100**2, rel=1e-15)
    finite = mse[np.isfinite(mse)]
    assert np.all(np.diff(finite) <= 0) and finite[-1] >= g  # more bits: less rounding, never below the Gaussian


# ---------------------------------------------------------------------------------------
# Equivalence with the chapters' definitions (copied; globals made parameters)
# ---------------------------------------------------------------------------------------

# chapter 2 (cell "ORDER_ALPHA = 0.005"), chapter 4 (ORDER_ALPHA = 0.01, digits=0), chapter 6 (order)
def ch2_order_claim(quantity, low, high, *, paired=False, ORDER_ALPHA=0.005):
    return claim_difference(quantity, low, high, paired=paired, confidence=1 - 2 * ORDER_ALPHA)


def ch4_order_claim(quantity, low, high, ORDER_ALPHA=0.01):
    return claim_difference(quantity, low, high, confidence=1 - 2 * ORDER_ALPHA, digits=0)


# chapter 3
def ch3_paired_claim(a, b, alpha, quantity="mean(b) − mean(a)"):
    return claim_difference(quantity, a, b, paired=True, confidence=1 - 2 * alpha)


def ch3_paired_less(a, b, alpha):
    return ch3_paired_claim(a, b, alpha).above("no difference")


def ch3_paired_same(a, b, alpha):
    return ch3_paired_claim(b, a, alpha).admits("no difference")


def ch3_paired_within(a, b, rel, alpha, PAPER):
    if PAPER:
        return ch3_paired_less((1 - rel) * b, a, alpha) and ch3_paired_less(a, (1 + rel) * b, alpha)
    return not ch3_paired_less(a, (1 - rel) * b, alpha) and not ch3_paired_less((1 + rel) * b, a, alpha)


def ch3_sem(x):
    return np.std(x, ddof=1) / np.sqrt(len(x))


def ch3_spearman(a, b):
    return stats.spearmanr(a, b)[0]


# chapter 6 (order/below/same with RES looked up: here the runs directly)
def ch6_order(ra, rb, ORDER_ALPHA=0.005):
    return claim_difference("regret", ra, rb, confidence=1 - 2 * ORDER_ALPHA, digits=0)


def ch6_below(ra, rb):
    return ch6_order(ra, rb).above("no difference")


def ch6_same(ra, rb):
    return ch6_order(ra, rb).admits("no difference")


@settings(max_examples=60, deadline=None)
@given(paired_runs(), ALPHAS)
def test_paired_orderings_equal_chapter_3s(ab, alpha):
    a, b = ab
    assert claim_order("mean(b) − mean(a)", a, b, alpha=alpha, paired=True) == ch3_paired_claim(a, b, alpha)
    assert mean_below(a, b, alpha=alpha, paired=True) == ch3_paired_less(a, b, alpha)
    assert means_not_distinguished(b, a, alpha=alpha, paired=True) == ch3_paired_same(a, b, alpha)
    assert means_not_distinguished(a, b, alpha=alpha, paired=True) == ch3_paired_same(a, b, alpha)  # symmetric
    for rel in (0.0, 0.05, 0.3):
        for paper in (True, False):
            assert mean_within(a, b, rel, alpha=alpha, establish=paper) == ch3_paired_within(a, b, rel, alpha, paper)


@settings(max_examples=60, deadline=None)
@given(RUNS, RUNS)
@example(np.array([0.0, 0.0]), np.array([2.2e-103, 0.0]))  # se⁴ underflows: welch_dof divided by zero
def test_welch_orderings_equal_chapters_2_4_and_6(a, b):
    assert claim_order("q", a, b, alpha=0.005) == ch2_order_claim("q", a, b)
    assert claim_order("q", a, b, alpha=0.01, digits=0) == ch4_order_claim("q", a, b)
    assert claim_order("regret", a, b, alpha=0.005, digits=0) == ch6_order(a, b)
    assert mean_below(a, b, alpha=0.005) == ch6_below(a, b)
    assert means_not_distinguished(a, b, alpha=0.005) == ch6_same(a, b)
    if a.size == b.size:
        assert claim_order("q", a, b, alpha=0.005, paired=True) == ch2_order_claim("q", a, b, paired=True)


@settings(max_examples=60, deadline=None)
@given(RUNS)
def test_sem_and_paired_equal_mean_and_se(x):
    # chapter 3's sem, chapter 5's paired (mean and s.e. of a paired difference), chapter 4's collect
    assert mean_and_se(x)[1] == ch3_sem(x)
    diff = x[::-1] - x
    assert mean_and_se(diff) == (diff.mean(), diff.std(ddof=1) / math.sqrt(diff.size))


@settings(max_examples=60, deadline=None)
@given(arrays(np.float64, st.integers(3, 10), elements=st.floats(-100, 100)), st.data())
def test_spearman_equals_chapter_3s(a, data):
    b = data.draw(arrays(np.float64, a.size, elements=st.floats(-100, 100)))
    ref = ch3_spearman(a, b)
    got = spearman_rho(a, b)
    assert (math.isnan(got) and math.isnan(ref)) or got == ref


# chapter 3's polylog_exponent (curve() replaced by its output x, m_)
def ch3_polylog_exponent(x, m_, t_from):
    sel = x >= t_from
    a, _, se = fit_power_law(np.log(x[sel]), m_[sel])
    return a, se, int(sel.sum())


@settings(max_examples=40, deadline=None)
@given(arrays(np.float64, st.integers(3, 20), elements=st.floats(0.1, 1e4)))
def test_fit_polylog_equals_chapter_3s_polylog_exponent(m_):
    x = np.geomspace(10, 1e5, m_.size)
    a, se, n = ch3_polylog_exponent(x, m_, x[1])
    slope, _, se_ = fit_polylog(x[x >= x[1]], m_[x >= x[1]])
    assert (slope, se_) == (a, se) and n == m_.size - 1


# chapter 5's significantly_above (ALPHA_T2 a parameter)
def ch5_significantly_above(x, level, ALPHA_T2):
    return x.mean() - stats.t.ppf(1 - ALPHA_T2, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size) > level


@settings(max_examples=60, deadline=None)
@given(RUNS, st.floats(-1e3, 1e3), ALPHAS)
def test_mean_above_level_equals_chapter_5s(x, level, alpha):
    assert mean_above_level(x, level, alpha=alpha) == ch5_significantly_above(x, level, alpha)


# chapter 5's ci and chapter 6's ci
def ch5_ci(v):
    m, _, hi = regret_interval(v)
    return m, hi - m


def ch6_ci(values):
    m, lo, hi = regret_interval(values)
    return m, m - lo


@settings(max_examples=60, deadline=None)
@given(RUNS)
def test_mean_and_half_width_equals_chapter_5s_ci_and_chapter_6s_to_an_ulp(v):
    assert mean_and_half_width(v) == ch5_ci(v)
    m, h = ch6_ci(v)  # m − lo, not hi − m: the same half-width up to the rounding of the subtraction
    assert mean_and_half_width(v)[0] == m
    assert mean_and_half_width(v)[1] == pytest.approx(h, rel=1e-12, abs=4 * np.spacing(abs(m) + h))


# chapter 4's ratio_se and ratio_gap_claim (LB_ALPHA a parameter)
def ch4_ratio_se(num, den):
    (mn, sn), (md_, sd) = num, den
    r = mn / md_
    return r, r * np.sqrt((sn / mn) ** 2 + (sd / md_) ** 2)


def ch4_ratio_gap_claim(quantity, a, b, runs_a, runs_b, LB_ALPHA, **kw):
    from fedbandit.experiments import claim
    d, se = a[0] - b[0], math.hypot(a[1], b[1])
    dof = welch_dof(a[1], runs_a, b[1], runs_b)
    conf = 1 - 2 * LB_ALPHA
    return claim(quantity, d, *t_interval(d, se, dof, conf), confidence=conf, method=f"delta method, Student t, {dof:.3g} dof",
                 alternatives={"no difference": 0.0}, **kw)


POS = st.floats(1e-3, 1e4)
SE = st.floats(0.0, 1e2)


@settings(max_examples=80, deadline=None)
@given(POS, SE, POS, SE, st.booleans())
def test_ratio_and_se_equals_chapter_4s(mn, sn, md, sd, as_numpy):
    num, den = ((np.float64(mn), np.float64(sn)), (np.float64(md), np.float64(sd))) if as_numpy else ((mn, sn), (md, sd))
    r, se = ch4_ratio_se(num, den)
    assert ratio_and_se(num, den) == (r, se)


@settings(max_examples=60, deadline=None)
@given(POS, st.floats(1e-3, 1e2), POS, st.floats(1e-3, 1e2), st.integers(2, 40), st.integers(2, 40))
def test_claim_estimate_gap_equals_chapter_4s_ratio_gap_claim(ra, ea, rb, eb, na, nb):
    ref = ch4_ratio_gap_claim("q", (ra, ea), (rb, eb), na, nb, 0.01)
    assert claim_estimate_gap("q", (ra, ea), (rb, eb), na, nb, confidence=1 - 2 * 0.01, estimator="delta method") == ref


# chapter 4's worst_case and held_out_worst (the table lookup replaced by an (N, G*S) array)
def ch4_worst_case(regret_by_n, G, S):
    means, worst_runs, worst_gap = [], [], []
    for flat in regret_by_n:
        reg = flat.reshape(G, S)
        m = reg.mean(axis=1)
        j = int(np.argmax(m))
        means.append(m)
        worst_runs.append(reg[j])
        worst_gap.append(j)
    return np.array(means), np.array(worst_runs), np.array(worst_gap)


def ch4_held_out_worst(regret_by_n, G, S):
    out = []
    for flat in regret_by_n:
        reg = flat.reshape(G, S)
        out.append([reg[int(np.argmax(np.delete(reg, s, axis=1).mean(axis=1))), s] for s in range(S)])
    return np.array(out)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 4), st.integers(1, 9), st.integers(2, 5), st.data())
def test_worst_cases_equal_chapter_4s(N, G, S, data):
    flat = data.draw(arrays(np.float64, (N, G * S), elements=st.floats(0, 1e4)))
    values = flat.reshape(N, G, S)
    means, runs, index = worst_case_runs(values)
    ref_means, ref_runs, ref_index = ch4_worst_case(flat, G, S)
    assert np.array_equal(means, ref_means) and np.array_equal(runs, ref_runs) and np.array_equal(index, ref_index)
    assert np.array_equal(held_out_worst_case(values), ch4_held_out_worst(flat, G, S))


# chapter 3's m_gap_claim, chapter 4's wc_gap and chapter 6's exponent_gap
def ch3_m_gap_claim(s_hi, se_hi, s_lo, se_lo, M_DOF, margin):
    d = s_hi - s_lo
    se = float(np.hypot(se_hi, se_lo))
    return claim_slope("gap", d, se, M_DOF, alternatives={"no difference": 0.0, f"the asserted margin {margin:g}": margin})


@settings(max_examples=80, deadline=None)
@given(st.floats(-2, 2), st.floats(1e-4, 1), st.floats(-2, 2), st.floats(1e-4, 1), st.integers(1, 8))
def test_slope_gap_equals_chapter_3s_m_gap_claim_to_an_ulp(s_hi, se_hi, s_lo, se_lo, dof):
    ref = ch3_m_gap_claim(s_hi, se_hi, s_lo, se_lo, dof, 0.3)
    got = claim_slope_gap("gap", (s_hi, se_hi), (s_lo, se_lo), dof, method=f"Student t, {dof:.3g} dof",
                          alternatives={"no difference": 0.0, "the asserted margin 0.3": 0.3})
    # math.hypot (the package) and np.hypot (the chapter) may round the combined s.e. differently in the last bit
    assert got.estimate == ref.estimate and got.method == ref.method and got.candidates == ref.candidates
    assert got.low == pytest.approx(ref.low, rel=1e-14, abs=1e-15) and got.high == pytest.approx(ref.high, rel=1e-14, abs=1e-15)


def test_exponent_gap_equals_chapter_6s():
    rng = np.random.default_rng(8)
    ms = [8, 16, 32, 64]
    fa = fit_exponent_t(ms, np.outer(np.array(ms) ** 0.75, np.ones(5)) * rng.uniform(0.8, 1.2, (4, 5)))
    fb = fit_exponent_t(ms, np.outer(np.array(ms) ** 0.5, np.ones(7)) * rng.uniform(0.8, 1.2, (4, 7)))
    ref = claim_slope_gap("q", fa, fb, min(fa.dof, fb.dof), prediction=("1/4", 0.25), alternatives={"no difference": 0.0})
    assert claim_slope_gap("q", fa, fb, prediction=("1/4", 0.25), alternatives={"no difference": 0.0}) == ref


# chapter 3's exact_verdict (LAP_EXACT_CLAIMS and EPSILONS made parameters)
def ch3_exact_verdict(claims, EPSILONS):
    below = [e for e in EPSILONS if claims[e].above("no difference")]
    above = [e for e in EPSILONS if claims[e].below("no difference")]
    same = [e for e in EPSILONS if e not in below + above]
    fmt = lambda es: ", ".join(f"{e:g}" for e in es)  # noqa: E731
    parts = ([f"Laplace lower at ε = {fmt(below)}"] if below else []) + ([f"the hybrid lower at ε = {fmt(above)}"] if above else []) \
        + ([f"not distinguished at ε = {fmt(same)}"] if same else [])
    return "; ".join(parts)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(-2, 2), st.floats(0.01, 1)), min_size=0, max_size=6))
def test_ordering_summary_equals_chapter_3s_exact_verdict(centres):
    eps = [0.5, 1.0, 2.0, 5.0, 10.0, 20.0][: len(centres)]
    claims = {e: claim_slope("q", c, s, 4.0, alternatives={"no difference": 0.0}) for e, (c, s) in zip(eps, centres)}
    assert ordering_summary(claims, when_above="Laplace lower", when_below="the hybrid lower") == \
        ch3_exact_verdict(claims, eps)


# chapter 4's noise_scale
def ch4_noise_scale(pairs):
    return np.sqrt(2 * np.log(1.25 / pairs[:, 1])) / pairs[:, 0]


@settings(max_examples=60, deadline=None)
@given(arrays(np.float64, st.tuples(st.integers(1, 30), st.just(2)), elements=st.floats(1e-12, 0.9)))
def test_gaussian_noise_scale_equals_chapter_4s(pairs):
    assert np.array_equal(gaussian_noise_scale(pairs[:, 0], pairs[:, 1]), ch4_noise_scale(pairs))


# chapter 4's proxy_slope (EPS, DELTA parameters) and sup_log_slope (the schedules' finest batches as arguments)
def ch4_proxy_slope(n, k, EPS=1.0, DELTA=1e-8):
    lo, hi = error_proxy("concurrent", n, EPS, DELTA, k=k), error_proxy("concurrent", 10 * n, EPS, DELTA, k=k)
    return math.log10(hi / lo)


def ch4_sup_log_slope(lab, schedules, lo, hi):
    def g(n):
        b = (schedules[int(n)].get(lab) or [1])[-1]
        return math.sqrt(math.log(max(n / b, math.e)))
    return math.log(g(hi) / g(lo)) / math.log(hi / lo)


@pytest.mark.parametrize("n", [10**4, 10**6, 10**9])
@pytest.mark.parametrize("k", [1, 2, 3])
def test_local_proxy_slope_equals_chapter_4s(n, k):
    assert error_proxy_local_slope("concurrent", n, 1.0, 1e-8, k=k) == ch4_proxy_slope(n, k)


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 10**6), st.integers(2, 1000), st.integers(1, 500), st.integers(1, 500), st.booleans())
def test_supremum_factor_slope_equals_chapter_4s(lo, factor, b_lo, b_hi, batched):
    hi = lo * factor
    schedules = {lo: {"x": [7 * b_lo, b_lo]} if batched else {}, hi: {"x": [9 * b_hi, b_hi]} if batched else {}}
    fin_lo, fin_hi = (b_lo, b_hi) if batched else (1, 1)
    assert supremum_factor_slope(float(lo), fin_lo, float(hi), fin_hi) == ch4_sup_log_slope("x", schedules, float(lo), float(hi))


# chapter 2's calibration_state (the package's own imports; optimal_batch_size etc. as the chapter had them)
def ch2_calibration_state(M=100, eps=0.1, delta=0.1, T=10_000, B=25):
    from fedbandit.accounting.amplification import zc_amplification_validity
    B = optimal_batch_size(T, M) if B == "sqrt(T/M)" else B
    divisors = [b for b in range(1, T + 1) if T % b == 0]
    B = min(divisors, key=lambda b: abs(b - B))
    K = T // B
    s_ldp = math.sqrt(ldp_total_variance(eps, delta, K, M))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            s_amp = create("sdp-amplification", epsilon=eps, delta=delta, force=True).configure(
                n_agents=M, dim=10, n_batches=K, batch_size=B).server_noise_std()
    except ValueError:
        s_amp = float("nan")
    s_central = math.sqrt(kappa(K)) * central_sigma(eps, delta, K)
    conds = zc_amplification_validity(min(eps, 1e6), delta, M, K, T)
    return {"B": B, "K": K, "kappa": kappa(K), "sigma_ldp": s_ldp, "sigma_amp": s_amp,
            "sigma_amp_ideal": s_ldp / math.sqrt(M), "sigma_central": s_central,
            "valid": all(c.holds for c in conds),
            "sum_ok": s_amp == s_amp and s_amp >= s_central}


def _same(a, b):
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))


@pytest.mark.parametrize("M", [10, 100, 1000])
@pytest.mark.parametrize("eps", [0.01, 1.0, 10.0])
@pytest.mark.parametrize("T,B", [(1_000, 25), (10_000, "sqrt(T/M)"), (100_000, 25)])
def test_fixed_batch_noise_levels_equals_chapter_2s_calibration_state(M, eps, T, B):
    ref = ch2_calibration_state(M, eps, 0.1, T, B)
    got = fixed_batch_noise_levels(M, eps, 0.1, T, B)
    assert got.keys() == ref.keys() and all(_same(got[k], ref[k]) for k in ref), (got, ref)


# chapter 5's ddg_prediction (DDG_SETTING a parameter, no lru_cache)
def ch5_ddg_prediction(epsilon, k, n, DDG_SETTING):
    bs = np.arange(max(4, int(np.ceil(np.log2(np.sqrt(n) * k))) + 1), 21)
    setting = dict(n_parties=n, **DDG_SETTING)
    pred = []
    for b in bs:
        try:
            cal = create("sum-ddg-secagg", epsilon=epsilon, delta=1e-5, bits=int(b), k=k).configure(**setting).calibration()
            pred.append((cal["sigma0"] ** 2 + cal["gamma"] ** 2 / 4) / n)
        except ValueError:
            pred.append(np.nan)
    g = create("sum-central-gaussian", epsilon=epsilon, delta=1e-5).configure(**setting).noise_std() ** 2 / n**2
    return bs, np.array(pred), g


@pytest.mark.parametrize("epsilon,k,n", [(0.5, 1.0, 100), (2.0, 2.0, 1000), (8.0, 4.0, 100)])
def test_ddg_mean_mse_by_bits_equals_chapter_5s_ddg_prediction(epsilon, k, n):
    setting = dict(dim=50, n_rounds=1, clip=10.0)
    bs, pred, g = ch5_ddg_prediction(epsilon, k, n, setting)
    bits, mse, g2 = ddg_mean_mse_by_bits(epsilon, k, n, dim=50, clip=10.0)
    assert np.array_equal(bits, bs) and np.array_equal(mse, pred, equal_nan=True) and g2 == g


# chapter 2's bound_curves: its sigma arithmetic is already the theory's regret_bound_ldp / _sdp / _nonprivate
def test_chapter_2s_bound_curves_are_the_theorys_regret_bounds():
    from fedbandit.theory.linear import (
        lemma67_regret_bound,
        regret_bound_ldp,
        regret_bound_nonprivate,
        regret_bound_sdp,
    )
    for eps, T, B in ((0.1, 10_000, 25), (1.0, 1_000, 10), (10.0, 100_000, 250)):
        K = T // B
        for m in (2, 17, 1000):
            assert regret_bound_ldp(T, m, 10, eps, 0.1, B) == lemma67_regret_bound(
                T, m, B, 10, math.sqrt(ldp_total_variance(eps, 0.1, K, m)))
            assert regret_bound_sdp(T, m, 10, eps, 0.1, B) == lemma67_regret_bound(
                T, m, B, 10, math.sqrt(ldp_total_variance(eps, 0.1, K, m) / m))
            assert regret_bound_nonprivate(T, m, 10, B) == lemma67_regret_bound(T, m, B, 10, 0.0)


# ---------------------------------------------------------------------------------------
# claim_mean (chapter 5's ratio_claim) and Claim.order_text (chapter 4's order_verdict)
# ---------------------------------------------------------------------------------------


def test_claim_mean_is_the_one_sample_student_t_interval():
    x = np.array([1.0, 2.0, 4.0, 7.0])
    s = math.sqrt(((x - 3.5) ** 2).sum() / 3)  # sample standard deviation, written out
    half = stats.t.ppf(0.975, 3) * s / math.sqrt(4)
    c = claim_mean("q", x, alternatives={"zero": 0.0, "seven": 7.0})
    assert c.estimate == 3.5
    assert (c.low, c.high) == (pytest.approx(3.5 - half, rel=1e-12), pytest.approx(3.5 + half, rel=1e-12))
    assert c.method == "Student t over 4 runs" and c.confidence == 0.95
    # the t quantile at 3 dof (3.18), not the normal one (1.96): 0 and 7 lie inside this interval, outside a normal one
    assert 3.5 - 1.96 * s / 2 > 0.0 and 3.5 + 1.96 * s / 2 < 7.0 and c.admits("zero") and c.admits("seven")
    # and it can exclude: a tighter sample puts 1 outside
    assert claim_mean("q", np.array([3.4, 3.5, 3.6]), alternatives={"one": 1.0}).excludes("one")
    c99 = claim_mean("q", x, confidence=0.99)
    assert c99.high - c99.estimate == pytest.approx(stats.t.ppf(0.995, 3) * s / 2, rel=1e-12)
    with pytest.raises(ValueError, match="values"):
        claim_mean("q", np.array([1.0]))


# chapter 5's ratio_claim, verbatim but for its globals (ALPHA_T2 a parameter)
def ch5_ratio_claim(quantity, ratio, reference, ALPHA_T2):
    m, se = mean_and_se(ratio)
    lo, hi = t_interval(float(m), float(se), ratio.size - 1, confidence=1 - 2 * ALPHA_T2)
    return claim(quantity, float(m), lo, hi, confidence=1 - 2 * ALPHA_T2, method=f"Student t, {ratio.size} repetitions",
                 alternatives={reference: 1.0}, digits=3)


@settings(max_examples=60, deadline=None)
@given(arrays(np.float64, st.integers(2, 12), elements=st.floats(1e-3, 1e3, allow_nan=False)), ALPHAS)
def test_claim_mean_equals_chapter_5s_ratio_claim(ratio, alpha):
    old = ch5_ratio_claim("q", ratio, "ref", alpha)
    new = claim_mean("q", ratio, confidence=1 - 2 * alpha, method=f"Student t, {ratio.size} repetitions",
                     alternatives={"ref": 1.0}, digits=3)
    assert (new.estimate, new.low, new.high, new.confidence) == (old.estimate, old.low, old.high, old.confidence)
    assert new.text() == old.text()


def test_order_text_reads_the_interval_against_no_difference():
    def c(lo, hi):
        return claim("a − b", (lo + hi) / 2, lo, hi, confidence=0.95, method="m", alternatives={"no difference": 0.0})
    assert c(0.1, 0.3).order_text("a", "b") == "a above b (a − b = 0.20 [0.10, 0.30])"
    assert c(-0.3, -0.1).order_text("a", "b") == "b above a (a − b = -0.20 [-0.30, -0.10])"
    assert c(-0.1, 0.3).order_text("a", "b") == "a and b not distinguished (a − b = 0.10 [-0.10, 0.30])"
    # another reference: the same interval read against 0.2
    with_slack = claim("a − b", 0.5, 0.3, 0.7, confidence=0.95, method="m", alternatives={"slack": 0.2})
    assert with_slack.order_text("a", "b", reference="slack").startswith("a above b")
    with pytest.raises(KeyError, match="absent"):
        c(0.1, 0.3).order_text("a", "b", reference="absent")


# chapter 4's order_verdict, verbatim
def ch4_order_verdict(c, hi, lo):
    d = c.digits
    interval = f"{hi} − {lo} = {c.estimate:.{d}f} [{c.low:.{d}f}, {c.high:.{d}f}]"
    if c.above("no difference"):
        return f"{hi} above {lo} ({interval})"
    if c.below("no difference"):
        return f"{lo} above {hi} ({interval})"
    return f"{hi} and {lo} not distinguished ({interval})"


@settings(max_examples=80, deadline=None)
@given(st.floats(-1.0, 1.0), st.floats(1e-4, 0.5), st.floats(1e-4, 0.5), st.integers(1, 12))
def test_order_text_equals_chapter_4s_order_verdict(slope_a, se_a, se_b, dof):
    c = claim_slope_gap("gap", (slope_a, se_a), (0.0, se_b), dof, alternatives={"no difference": 0.0, "slack": -0.02})
    assert c.order_text("hi", "lo") == ch4_order_verdict(c, "hi", "lo")


# ---------------------------------------------------------------------------------------
# Claim.half_widths_above: how far a verdict is from changing (the chapters' run-count notes)
# ---------------------------------------------------------------------------------------


def test_half_widths_above_uses_the_half_width_on_the_values_side():
    # an asymmetric interval, estimate 1 in [0.5, 3]: 0.5 below, 2 above
    c = claim("q", 1.0, 0.5, 3.0, confidence=0.95, method="m")
    assert c.half_widths_above(0.0) == 1.0 / 0.5  # a value below the estimate: (1 − 0) / (1 − 0.5)
    assert c.half_widths_above(5.0) == -4.0 / 2.0  # above it: (1 − 5) / (3 − 1)
    assert c.half_widths_above(1.0) == 0.0
    # beyond ±1 exactly when the interval excludes the value, on the sign's side
    for v in (-1.0, 0.4, 0.5, 0.6, 2.9, 3.0, 3.1, 7.0):
        h = c.half_widths_above(v)
        assert (h > 1.0) == (c.low > v) and (h < -1.0) == (c.high < v), v
    point = claim("q", 2.0, 2.0, 2.0, confidence=0.95, method="m")
    assert point.half_widths_above(1.0) == math.inf and point.half_widths_above(3.0) == -math.inf
    assert point.half_widths_above(2.0) == 0.0
    with pytest.raises(ValueError, match="value"):
        c.half_widths_above(math.nan)


@settings(max_examples=80, deadline=None)
@given(st.floats(-5.0, 5.0), st.floats(1e-3, 2.0), st.integers(1, 30), st.floats(-5.0, 5.0))
def test_half_widths_above_equals_the_chapters_inline_margins(slope, se, dof, thr):
    c = claim_slope("q", slope, se, dof)
    # the formulas chapters 1 and 2 computed inline before, verbatim: chapter 1's runs_margin, chapter 2's
    # orderings against no difference (02_3, 02_4's M sweep), its exponents below a threshold (02_4's T sweep)
    # and its regret differences of either sign (02_5)
    close = dict(rel=1e-9, abs=1e-12)
    assert abs(c.half_widths_above(thr)) == pytest.approx(abs(c.estimate - thr) / ((c.high - c.low) / 2), **close)
    assert c.half_widths_above(0.0) == pytest.approx(c.estimate / (c.estimate - c.low), **close)
    assert -c.half_widths_above(thr) == pytest.approx((thr - c.estimate) / (c.high - c.estimate), **close)
    assert abs(c.half_widths_above(0.0)) == pytest.approx(abs(c.estimate) / (c.high - c.estimate), **close)
