"""Tests of fedbandit.mechanisms.psco (PSCO algorithms, hard family) and fedbandit.theory.psco."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from fedbandit.accounting.composition import group_budget, level_budget
from fedbandit.accounting.shuffle import psco_accounting, rr_flip_probability
from fedbandit.experiments.statistics import fit_power_law
from fedbandit.mechanisms.psco import (
    ContinualRelease,
    _level_counts,
    _nested_estimates,
    central_tree_psco,
    concurrent_psco,
    dyadic_batch_sizes,
    extrapolating_psco,
    hard_input_single_positions,
    local_psco,
    optimal_batch_sizes,
    prefix_sums,
    run_psco,
    sample_bernoulli_input,
    sample_hard_input,
    sequential_psco,
    sup_error,
    tree_psco,
)
from fedbandit.mechanisms.tree import TreeMechanism
from fedbandit.theory.psco import (
    bandit_regret_rate,
    big_nk,
    c_epsilon,
    concurrent_error_rate,
    predicted_error_exponent,
    predicted_regret_exponent,
    rep_nk,
    sequential_bandit_regret,
    tree_levels,
)
from reference_continual import (
    reference_concurrent,
    reference_extrapolating,
    reference_local,
)

EPS, DELTA = 1.0, 1e-6


def _uniform_layout(seed, gs, runs, n, rounding):
    """The uniforms the fast per-user path draws, level by level: (rounding (runs, n)), then
    the messages (runs, n, g_i)."""
    rng = np.random.default_rng(seed)
    v, w = [], []
    for g in gs:
        v.append(rng.random((runs, n)) if rounding else None)
        w.append(rng.random((runs, n, g)))
    return v, w


# ---------------------------------------------------------------------------------------
# Reference equivalence
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "sizes,n",
    [((7,), 30), ((12, 4), 50), ((16, 8, 2), 41), ((8, 4, 2, 1), 19), ((27, 9, 3, 1), 60)],
)
@pytest.mark.parametrize("real_values", [False, True])
def test_concurrent_per_user_matches_reference_loop(sizes, n, real_values):
    runs, seed = 3, 42
    data_rng = np.random.default_rng(7)
    x = data_rng.random((runs, n)) if real_values else (data_rng.random((runs, n)) < 0.5).astype(np.uint8)
    k = len(sizes)
    fast = concurrent_psco(x, k, EPS, DELTA, np.random.default_rng(seed), batch_sizes=sizes, sampling="per_user")
    gs = fast.info["resolution"]
    assert gs == (tuple(math.ceil(math.sqrt(b)) for b in sizes) if real_values else (1,) * k)
    eps0, delta0 = level_budget(EPS, DELTA, k)
    ps = [rr_flip_probability(b * g, *group_budget(eps0, delta0, g)) for b, g in zip(sizes, gs)]
    assert tuple(ps) == fast.info["p"]
    v, w = _uniform_layout(seed, gs, runs, n, real_values)
    for r in range(runs):
        ref = reference_concurrent(
            list(x[r]),
            sizes,
            ps,
            [w_i[r] for w_i in w],
            resolutions=gs,
            v=[v_i[r] for v_i in v] if real_values else None,
        )
        np.testing.assert_allclose(fast.path()[r], ref, rtol=1e-12, atol=1e-8)


@pytest.mark.parametrize("resolution", [1, 3])
def test_fixed_resolution_matches_reference_loop(resolution):
    runs, n, seed, sizes = 2, 36, 8, (12, 3)
    x = np.random.default_rng(3).random((runs, n))
    fast = concurrent_psco(x, 2, EPS, DELTA, np.random.default_rng(seed), batch_sizes=sizes, sampling="per_user", resolution=resolution)
    gs = (resolution, resolution)
    eps0, delta0 = level_budget(EPS, DELTA, 2)
    ps = [rr_flip_probability(b * g, *group_budget(eps0, delta0, g)) for b, g in zip(sizes, gs)]
    v, w = _uniform_layout(seed, gs, runs, n, True)
    for r in range(runs):
        ref = reference_concurrent(list(x[r]), sizes, ps, [w_i[r] for w_i in w], resolutions=gs, v=[v_i[r] for v_i in v])
        np.testing.assert_allclose(fast.path()[r], ref, atol=1e-8)


def test_local_matches_reference_loop():
    runs, n, seed = 2, 40, 3
    x = (np.random.default_rng(0).random((runs, n)) < 0.3).astype(np.uint8)
    fast = local_psco(x, 0.7, np.random.default_rng(seed))
    u = np.random.default_rng(seed).random((runs, n))
    p = 2 / (math.exp(0.7) + 1)
    for r in range(runs):
        np.testing.assert_allclose(fast.path()[r], reference_local(list(x[r]), p, u[r]), atol=1e-9)


def test_extrapolating_matches_reference_loop():
    runs, n, seed, sizes = 2, 45, 9, (12, 4)
    x = (np.random.default_rng(1).random((runs, n)) < 0.6).astype(np.uint8)
    eps0, delta0 = level_budget(EPS, DELTA, 2)
    ps = [rr_flip_probability(b, eps0, delta0) for b in sizes]
    fast = extrapolating_psco(x, 2, EPS, DELTA, np.random.default_rng(seed), batch_sizes=sizes, sampling="per_user")
    _, w = _uniform_layout(seed, (1, 1), runs, n, False)
    u = np.stack([w_i[:, :, 0] for w_i in w])
    for r in range(runs):
        ref = reference_extrapolating(list(x[r]), sizes, ps, u[:, r, :])
        np.testing.assert_allclose(fast.path()[r], ref, atol=1e-8)


@pytest.mark.parametrize("noise", ["gaussian", "laplace"])
def test_central_tree_matches_tree_mechanism(noise):
    """Same generator: the whole-stream central tree equals TreeMechanism stepped user by user."""
    runs, n, seed = 3, 37, 5
    x = np.random.default_rng(2).random((runs, n))
    fast = central_tree_psco(x, EPS, DELTA, np.random.default_rng(seed), noise=noise)
    mech = TreeMechanism(n, (1,), fast.info["scale"], batch_shape=(runs,), noise=noise)
    rng = np.random.default_rng(seed)
    slow = np.zeros((runs, n + 1))
    for t in range(n):
        slow[:, t + 1] = mech.step(x[:, t : t + 1], rng)[:, 0]
    np.testing.assert_allclose(fast.path(), slow, atol=1e-9)


def test_aggregate_and_per_user_agree_in_distribution():
    """Released batch sums of every batch: aggregate sampling vs per-user simulation.

    Two-sample chi-square per batch at level 1e-3/#batches (Bonferroni): overall false-alarm
    rate ≤ 1e-3.  The estimates are the same deterministic function of the batch sums in
    both paths (checked above against the reference loop), so agreement of the (independent)
    batch sums is agreement of the whole release.
    """
    n, sizes, runs = 24, (8, 4, 1), 20_000
    x = np.tile((np.arange(n) % 3 == 0).astype(np.uint8), (runs, 1))
    agg = concurrent_psco(x, 3, EPS, DELTA, np.random.default_rng(0), batch_sizes=sizes, return_levels=True)
    usr = concurrent_psco(x, 3, EPS, DELTA, np.random.default_rng(1), batch_sizes=sizes, sampling="per_user", return_levels=True)
    n_batches = sum(n // b for b in sizes)
    for la, lu in zip(agg.info["level_sums"], usr.info["level_sums"]):
        for j in range(la.shape[1]):
            values = np.unique(np.r_[la[:, j], lu[:, j]].round(9))
            ia = np.searchsorted(values, la[:, j].round(9))
            iu = np.searchsorted(values, lu[:, j].round(9))
            table = np.vstack([np.bincount(ia, minlength=values.size), np.bincount(iu, minlength=values.size)])
            # pool sparse cells so the chi-square approximation holds
            order = np.argsort(table.sum(axis=0))
            pooled = []
            acc = np.zeros(2)
            for col in order:
                acc = acc + table[:, col]
                if acc.sum() >= 20:
                    pooled.append(acc)
                    acc = np.zeros(2)
            if acc.sum() and pooled:
                pooled[-1] = pooled[-1] + acc
            pooled = np.array(pooled).T
            if pooled.shape[1] < 2:
                continue
            assert stats.chi2_contingency(pooled)[1] > 1e-3 / n_batches


# ---------------------------------------------------------------------------------------
# Invariants
# ---------------------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(
    a=st.integers(1, 5),
    r=st.integers(2, 4),
    k=st.integers(1, 4),
    extra=st.integers(0, 30),
    seed=st.integers(0, 2**16),
)
def test_nested_estimates_exact_without_noise(a, r, k, extra, seed):
    """With noise-free batch sums the mixed-radix estimate at t = u·b_k is exactly S_t."""
    sizes = tuple(a * r ** (k - i) for i in range(1, k + 1))
    n = sizes[0] + extra
    x = (np.random.default_rng(seed).random((2, n)) < 0.5).astype(np.uint8)
    counts = _level_counts(x, sizes)
    est = _nested_estimates([c.astype(float) for c in counts], sizes)
    s = prefix_sums(x)
    np.testing.assert_array_equal(est, s[:, :: sizes[-1]][:, : est.shape[1]])


def test_sup_error_block_shortcut_equals_full_path():
    rng = np.random.default_rng(0)
    for n, block in [(50, 1), (50, 7), (64, 8), (65, 8)]:
        x = rng.random((3, n))
        values = rng.normal(0, 5, (3, n // block + 1)) + np.arange(n // block + 1) * block * 0.5
        rel = ContinualRelease(n=n, block=block, values=values)
        full = np.max(np.abs(rel.path() - prefix_sums(x)), axis=1)
        np.testing.assert_allclose(sup_error(rel, x), full)


def test_unbiased_estimates():
    """Mean estimate at every update time equals S_t, for bits and for values in [0, 1].

    Per time a z-test with the exact variance (privacy noise of the used batches plus the
    rounding variance of their users), |z| < 5; Bonferroni over ≤ 60 times gives a
    false-alarm rate below 4e-5.
    """
    n, sizes, runs = 60, (20, 5), 40_000
    rng = np.random.default_rng(12)
    for x1 in ((rng.random(n) < 0.5).astype(np.uint8), rng.random(n)):
        x = np.tile(x1, (runs, 1))
        rel = concurrent_psco(x, 2, EPS, DELTA, rng, batch_sizes=sizes)
        s = np.r_[0.0, np.cumsum(x1)]
        times = np.arange(0, n + 1, sizes[-1])
        var = np.zeros(times.size)
        for level, (b, g, std) in enumerate(zip(sizes, rel.info["resolution"], rel.info["noise_std"])):
            frac = x1 * g - np.floor(x1 * g)
            round_var = frac * (1 - frac) / g**2  # per user
            batch_var = std**2 + round_var[: (n // b) * b].reshape(-1, b).sum(axis=1)
            for j, t in enumerate(times):
                first = 0 if level == 0 else (t // sizes[level - 1]) * sizes[level - 1] // b
                var[j] += batch_var[first : t // b].sum()
        mean = rel.values.mean(axis=0)
        z = (mean - s[times]) / np.sqrt(var / runs + 1e-30)
        assert np.all(np.abs(z[1:]) < 5), z
        # the rounding variance is small next to the privacy noise with g = ceil(sqrt(b))
        assert np.all(var[1:] < 2.5 * np.min(np.array(rel.info["noise_std"]) ** 2) * 8)


def test_error_scaling_sanity():
    """Error growth over 16x more users (fixed seed; margins are several standard errors).

    local ~ sqrt(n) (ratio 4); sequential ~ n^{1/3} asymptotically (ratio 2.5; a bit more
    at these n, where the optimal batch is still small); central ~ polylog.
    """
    rng = np.random.default_rng(4)
    errs = {}
    for n in (16_000, 256_000):
        x = sample_bernoulli_input(n, rng, runs=20)
        errs[n] = {name: sup_error(run_psco(name, x, EPS, DELTA, rng), x).mean() for name in ("local", "sequential", "central")}
    ratio = {name: errs[256_000][name] / errs[16_000][name] for name in errs[16_000]}
    assert 3.0 < ratio["local"] < 5.3
    assert 2.0 < ratio["sequential"] < 3.5
    assert ratio["central"] < 1.8
    assert errs[256_000]["sequential"] < errs[256_000]["local"]


def test_optimal_schedule_exponents():
    """The derived schedule: b_k grows like n^{1/(2k+1)} and b_1 like n^{(2k−1)/(2k+1)} (asymptotically)."""
    for k in (1, 2):
        small = optimal_batch_sizes(10**8, k, EPS, DELTA)
        large = optimal_batch_sizes(10**12, k, EPS, DELTA)
        slope_k = math.log(large[-1] / small[-1]) / math.log(1e4)
        slope_1 = math.log(large[0] / small[0]) / math.log(1e4)
        assert abs(slope_k - 1 / (2 * k + 1)) < 0.07
        assert abs(slope_1 - (2 * k - 1) / (2 * k + 1)) < 0.07


def test_accounting_guarantee():
    sizes = optimal_batch_sizes(10**5, 3, EPS, DELTA)
    acc = psco_accounting(10**5, EPS, DELTA, sizes)
    eps_total, delta_total = acc["guarantee"]
    assert eps_total <= EPS * (1 + 1e-9) and delta_total <= DELTA * (1 + 1e-9)
    for row in acc["levels"]:
        assert row["certified_delta"] <= row["delta0"]
    tree = tree_psco(np.zeros((1, 1000), dtype=np.uint8), EPS, DELTA, np.random.default_rng(0))
    assert tree.info["k"] == tree_levels(1000) == 10
    assert tree.info["batch_sizes"] == dyadic_batch_sizes(1000)


# ---------------------------------------------------------------------------------------
# The hard family Δ_{n,k}
# ---------------------------------------------------------------------------------------


def test_rep_big_formulas():
    n, k, eps = 10**6, 2, 0.8
    c = math.exp(eps) / (math.exp(2 * eps) + 1)
    assert c_epsilon(eps) == pytest.approx(c)
    assert rep_nk(n, k, eps) == pytest.approx(0.5 * n ** (1 / 5) * c ** (4 / 5))
    assert big_nk(n, k, eps) == pytest.approx(n ** (3 / 5) * c ** (2 / 5))


@settings(max_examples=50, deadline=None)
@given(n=st.floats(1e3, 1e15), k=st.integers(1, 6), eps=st.floats(0.01, 5.0))
def test_rep_of_big_batch_is_rep(n, k, eps):
    """rep_{Big_{n,k}, k−1} = rep_{n,k}: the induction step of the lower bound keeps the run length."""
    assert rep_nk(big_nk(n, k, eps), k - 1, eps) == pytest.approx(rep_nk(n, k, eps), rel=1e-9)


def test_rep_threshold_ladder_and_inflation():
    """rep_threshold inverts rep_{n,k}; the ladder of the induction keeps rep; the window variance of runs."""
    from fedbandit.theory.psco import big_ladder, rep_threshold, window_variance_inflation

    for k in (1, 2, 3):
        for eps in (0.1, 1.0):
            for r in (2, 5):
                assert rep_nk(rep_threshold(k, eps, r), k, eps) == pytest.approx(r, rel=1e-9)
            ladder = big_ladder(1e7, k, eps)
            assert len(ladder) == k + 1 and all(a > b for a, b in zip(ladder, ladder[1:]))
            for j, v in enumerate(ladder):
                assert rep_nk(v, k - j, eps) == pytest.approx(rep_nk(1e7, k, eps), rel=1e-9)
    assert window_variance_inflation(1) == 1.0 and window_variance_inflation(4) == pytest.approx(17 / 5)
    # the inflation is the variance ratio of long windows of the family, measured (40 000 windows of 300 users:
    # relative s.e. of a variance ≈ 0.7 %; 5 % tolerance)
    n, eps = 12_000_000, 0.25
    r = max(1, int(rep_nk(n, 2, eps)))
    x = sample_hard_input(n, 2, eps, np.random.default_rng(2), prefix_length=0)[0]
    w = x[: (n // 300) * 300].reshape(-1, 300).sum(axis=1)
    assert w.var() / (300 / 4) == pytest.approx(window_variance_inflation(r), rel=0.05)
    with pytest.raises(ValueError, match="run_length"):
        rep_threshold(2, 1.0, 0)


def test_hard_input_structure():
    n, k, eps = 5_000, 1, 1.0
    rep = max(1, int(rep_nk(n, k, eps)))
    rng = np.random.default_rng(0)
    for ell in (0, 3, rep):
        x = sample_hard_input(n, k, eps, rng, runs=4, prefix_length=ell, prefix_value=1)
        assert x.shape == (4, n) and x.dtype == np.uint8
        assert np.all(x[:, :ell] == 1)
        singles = hard_input_single_positions(n, k, eps, ell)
        assert singles[0] == ell and np.all(np.diff(singles) == rep + 1)
        for s in singles[:-1]:
            block = x[:, s + 1 : s + 1 + rep]
            assert np.all(block == block[:, :1])  # rep copies of one bit


def test_hard_input_bits_are_fair_coins():
    """Single and repeated bits are Ber(1/2): binomial tests at level 1e-4 each."""
    n, k, eps = 200_000, 1, 1.0
    rep = max(1, int(rep_nk(n, k, eps)))
    x = sample_hard_input(n, k, eps, np.random.default_rng(1), runs=3, prefix_length=0)
    pos = hard_input_single_positions(n, k, eps, 0)
    singles = x[:, pos].ravel()
    repeated = x[:, pos[:-1] + 1].ravel()
    for bits in (singles, repeated):
        assert stats.binomtest(int(bits.sum()), bits.size, 0.5).pvalue > 1e-4
    # the repeated bit is independent of the single bit before it
    table = np.histogram2d(x[:, pos[:-1]].ravel(), x[:, pos[:-1] + 1].ravel(), bins=2)[0]
    assert stats.chi2_contingency(table)[1] > 1e-4
    assert rep >= 1


def test_hard_input_default_prefix_varies():
    x = sample_hard_input(3_000, 2, 1.0, np.random.default_rng(3), runs=50)
    assert x.shape == (50, 3_000)


# ---------------------------------------------------------------------------------------
# Theory helpers
# ---------------------------------------------------------------------------------------


def test_theory_exponents():
    assert predicted_error_exponent("local") == 0.5
    assert predicted_error_exponent("sequential") == pytest.approx(1 / 3)
    assert predicted_error_exponent("concurrent", 3) == pytest.approx(1 / 7)
    assert predicted_error_exponent("tree") == 0.0
    assert predicted_regret_exponent("concurrent", 1) == pytest.approx(2 / 3)
    assert predicted_regret_exponent("sequential") == 0.6
    assert predicted_regret_exponent("local") == 0.75
    ns = np.geomspace(1e3, 1e9, 7)
    slope, _, _ = fit_power_law(ns, concurrent_error_rate(ns, 2, 1.0))
    assert slope == pytest.approx(0.2)
    slope, _, _ = fit_power_law(ns, bandit_regret_rate(ns, 2, 1.0))
    assert slope == pytest.approx(0.6)
    b = np.geomspace(1, 1e6, 2001)
    best = b[np.argmin(sequential_bandit_regret(1e10, b))]
    assert best == pytest.approx(0.25 ** 0.8 * 1e10**0.6, rel=0.05)  # B* = (n^{3/4}/4)^{4/5}


# ---------------------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------------------


def test_bad_inputs():
    rng = np.random.default_rng(0)
    x = np.zeros((2, 100), dtype=np.uint8)
    with pytest.raises(ValueError, match="k"):
        concurrent_psco(x, 0, EPS, DELTA, rng)
    with pytest.raises(ValueError, match="k"):
        concurrent_psco(x, 9, EPS, DELTA, rng)
    with pytest.raises(ValueError, match="k"):
        optimal_batch_sizes(100, 0, EPS, DELTA)
    with pytest.raises(ValueError, match="k"):
        sample_hard_input(100, 0, EPS, rng)
    with pytest.raises(ValueError, match="batch_sizes"):
        concurrent_psco(x, 2, EPS, DELTA, rng, batch_sizes=(10, 4))
    with pytest.raises(ValueError, match="batch_sizes"):
        concurrent_psco(x, 2, EPS, DELTA, rng, batch_sizes=(200, 10))
    with pytest.raises(ValueError, match="batch_sizes"):
        concurrent_psco(x, 2, EPS, DELTA, rng, batch_sizes=(10,))
    with pytest.raises(ValueError, match="batch_sizes"):
        psco_accounting(100, EPS, DELTA, (10, 10))
    with pytest.raises(ValueError, match="x"):
        concurrent_psco(np.full((1, 10), 1.5), 1, EPS, DELTA, rng)
    with pytest.raises(ValueError, match="x"):
        local_psco(np.full(10, -0.1), EPS, rng)
    with pytest.raises(ValueError, match="x"):
        central_tree_psco(np.full(10, np.nan), EPS, DELTA, rng)
    with pytest.raises(ValueError, match="x"):
        tree_psco(np.full((1, 1, 10), 0.5), EPS, DELTA, rng)
    for bad_eps in (0.0, -1.0, math.inf):
        with pytest.raises(ValueError, match="epsilon"):
            concurrent_psco(x, 1, bad_eps, DELTA, rng)
    for bad_delta in (0.0, 1.0, 2.0):
        with pytest.raises(ValueError, match="delta"):
            sequential_psco(x, EPS, bad_delta, rng)
    with pytest.raises(ValueError, match="delta"):
        run_psco("local", x, EPS, 0.0, rng)
    with pytest.raises(TypeError, match="rng"):
        concurrent_psco(x, 1, EPS, DELTA, None)
    with pytest.raises(ValueError, match="sampling"):
        concurrent_psco(x, 1, EPS, DELTA, rng, sampling="fast")
    with pytest.raises(ValueError, match="name"):
        run_psco("magic", x, EPS, DELTA, rng)
    with pytest.raises(ValueError, match="k"):
        run_psco("concurrent", x, EPS, DELTA, rng)
    with pytest.raises(ValueError, match="prefix_length"):
        sample_hard_input(1000, 1, EPS, rng, prefix_length=10**6)
    with pytest.raises(ValueError, match="prefix_value"):
        sample_hard_input(1000, 1, EPS, rng, prefix_value=2)
    with pytest.raises(ValueError, match="times"):
        local_psco(x, EPS, rng).estimates([101])
    with pytest.raises(ValueError, match="x"):
        sup_error(local_psco(x, EPS, rng), np.zeros((2, 99)))
    with pytest.raises(ValueError, match="n"):
        rep_nk(0, 1, EPS)
    with pytest.raises(ValueError, match="epsilon"):
        c_epsilon(0.0)
    with pytest.raises(ValueError, match="algorithm"):
        predicted_error_exponent("quantum")


# ------------------------------------------------ block-by-block Bernoulli input (chapter 4's long range)


def test_blockwise_sampler_is_the_bit_path_draw_for_draw():
    """Fed the block counts of a stream of bits, the blockwise path releases what concurrent_psco releases on the bits.

    The bit path's aggregate sampling draws every level's counts with sample_rr_counts in level order; the
    blockwise path does the same from _nest_counts of the finest counts; with the same generator state the
    releases agree exactly, and so do the sup errors computed from the blocks (last bit and tail included).
    """
    from fedbandit.mechanisms.psco import _blockwise_sup_error, _nest_counts, _released_sums

    for n, k in [(10_007, 2), (5_000, 3), (999, 1)]:
        x = (np.random.default_rng(n).random((3, n)) < 0.4).astype(np.uint8)
        sizes = optimal_batch_sizes(n, k, 1.0, 1e-6)
        rel = concurrent_psco(x, k, 1.0, 1e-6, np.random.default_rng(7), batch_sizes=sizes)
        a = sizes[-1]
        nb = n // a
        finest = x[:, : nb * a].reshape(3, nb, a).sum(axis=2, dtype=np.int64)
        eps0, delta0 = level_budget(1.0, 1e-6, k)
        ps = [rr_flip_probability(b, eps0, delta0) for b in sizes]
        values = _nested_estimates(_released_sums(_nest_counts(finest, n, sizes), sizes, ps, np.random.default_rng(7)),
                                   sizes)
        np.testing.assert_array_equal(values, rel.values)
        last = x[:, a - 1: nb * a: a].astype(float)
        np.testing.assert_array_equal(_blockwise_sup_error(values, finest, last, x[:, nb * a:].sum(axis=1)),
                                      sup_error(rel, x))


def test_blockwise_sampler_has_the_law_of_the_bit_path():
    """Two-sample Kolmogorov–Smirnov test, 4000 runs each, at a false-alarm rate of 1e-3, per (k, mean)."""
    from fedbandit.mechanisms.psco import bernoulli_concurrent_sup_error

    n, runs = 3_000, 4_000
    bit_path = {}
    for k, mean in [(1, 0.5), (2, 0.5), (3, 0.2)]:
        sizes = optimal_batch_sizes(n, k, 1.0, 1e-6)
        blocks = bernoulli_concurrent_sup_error(n, k, 1.0, 1e-6, np.random.default_rng(1), runs=runs, mean=mean,
                                                batch_sizes=sizes)
        rng = np.random.default_rng(2)
        x = sample_bernoulli_input(n, rng, runs=runs, mean=mean)
        bits = bit_path[k] = sup_error(concurrent_psco(x, k, 1.0, 1e-6, rng, batch_sizes=sizes), x)
        assert stats.ks_2samp(blocks, bits).pvalue > 1e-3, (k, mean, blocks.mean(), bits.mean())
    # the test has power: the sampler run on another schedule (b_k doubled) is told apart
    wrong = bernoulli_concurrent_sup_error(n, 2, 1.0, 1e-6, np.random.default_rng(3), runs=runs,
                                           batch_sizes=tuple(2 * b for b in optimal_batch_sizes(n, 2, 1.0, 1e-6)))
    assert stats.ks_2samp(wrong, bit_path[2]).pvalue < 1e-3


def test_bernoulli_blocks_moments():
    """Each block's count is Bin(a, mean) and holds its last bit; the rest is Bin(n mod a, mean) (z-tests, |z| < 5)."""
    from fedbandit.mechanisms.psco import _bernoulli_blocks

    n, a, runs, mean = 1_003, 10, 20_000, 0.3
    finest, last, tail = _bernoulli_blocks(n, a, runs, mean, np.random.default_rng(4))
    assert finest.shape == last.shape == (runs, n // a) and tail.shape == (runs,)
    assert np.all((last == 0) | (last == 1)) and np.all(last <= finest) and np.all(finest - last <= a - 1)
    for v, m_, var in ((finest, a * mean, a * mean * (1 - mean)), (last, mean, mean * (1 - mean)),
                       (tail, 3 * mean, 3 * mean * (1 - mean))):
        z = (v.mean() - m_) / math.sqrt(var / v.size)
        assert abs(z) < 5, (v.shape, v.mean(), m_)
    # the last bit is one of the block's bits: cov(last, count) = mean (1 − mean)
    cov = np.mean((last - mean) * (finest - a * mean))
    assert abs(cov - mean * (1 - mean)) < 5 * math.sqrt(np.var((last - mean) * (finest - a * mean)) / last.size)


def test_blockwise_sampler_refuses_bad_input():
    from fedbandit.mechanisms.psco import bernoulli_concurrent_sup_error

    with pytest.raises(ValueError, match="k"):
        bernoulli_concurrent_sup_error(100, 9, 1.0, 1e-6, np.random.default_rng(0))
    with pytest.raises(ValueError, match="runs"):
        bernoulli_concurrent_sup_error(10**9, 3, 1.0, 1e-6, np.random.default_rng(0), runs=1000, batch_sizes=(1000, 10, 1))
    with pytest.raises(ValueError, match="mean"):
        bernoulli_concurrent_sup_error(100, 1, 1.0, 1e-6, np.random.default_rng(0), mean=1.5)


@pytest.mark.parametrize("n,runs,k", [(1000, 3, 1), (12_345, 2, 2), (4096, 1, 2)])
def test_sup_error_of_an_extrapolating_release_is_the_full_path_supremum(n, runs, k):
    """sup_error of a release with slopes (computed block by block) equals, bit for bit, the maximum over every
    t = 0..n of |Ŝ_t − S_t| from the release's full path (the definition); a wrong offset inside a block, or a
    dropped last partial block, breaks it."""
    from fedbandit.mechanisms.psco import prefix_sums, run_psco, sample_bernoulli_input, sup_error

    rng = np.random.default_rng(n)
    x = sample_bernoulli_input(n, rng, runs=runs)
    rel = run_psco("extrapolating", x, 1.0, 1e-8, rng, k=k)
    assert rel.slopes is not None
    np.testing.assert_array_equal(sup_error(rel, x), np.max(np.abs(rel.path() - prefix_sums(x)), axis=1))


@pytest.mark.parametrize("name", ["local", "tree", "central"])
def test_sup_error_of_a_one_user_block_release_is_the_full_path_supremum(name):
    """The one-pass sup error of releases on blocks of one user (bits in) equals max_t |Ŝ_t − S_t| over the full
    path, bit for bit (an off-by-one between the estimates and the prefix sums breaks it)."""
    from fedbandit.mechanisms.psco import prefix_sums, run_psco, sample_bernoulli_input, sup_error

    rng = np.random.default_rng(5)
    x = sample_bernoulli_input(3001, rng, runs=2)
    rel = run_psco(name, x, 1.0, 1e-8, rng)
    assert rel.block == 1 and rel.slopes is None
    np.testing.assert_array_equal(sup_error(rel, x), np.max(np.abs(rel.path() - prefix_sums(x)), axis=1))


@pytest.mark.parametrize("m", list(range(1, 17)))
def test_small_batch_counts_column_by_column_are_the_written_out_count(m):
    """randomized_response._sample_small_counts counts Z = #{z < m : u > F_c(z)} one cdf column at a time; with
    the same generator state it returns, count for count and dtype, the comparison of u with every column of
    the row F_c written out and summed (fails if a column is skipped or the comparison is not strict)."""
    from fedbandit.mechanisms.randomized_response import _sample_small_counts, _small_count_cdf

    ones = np.random.default_rng(m).integers(0, m + 1, size=(3, 4000))
    for q0 in (0.01, 0.3, 0.5):
        table = _small_count_cdf(m, q0, 1.0 - q0)
        u = np.random.default_rng(11).random(ones.shape)
        want = np.zeros(ones.shape, dtype=np.int64)
        for r in range(ones.shape[0]):
            for i in range(ones.shape[1]):
                want[r, i] = sum(u[r, i] > table[ones[r, i], z] for z in range(m))
        got = _sample_small_counts(ones, m, q0, 1.0 - q0, np.random.default_rng(11))
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("sizes", [(8, 4, 2, 1), (24, 6, 2), (64, 8, 1), (1000, 10), (2**10, 2**5, 1)])
def test_nested_counts_are_the_sums_of_their_batches(sizes):
    """psco._nest_counts (integer counts: slots added one by one for short ratios) gives every level's batch
    counts as the finest counts of each batch added up, written out batch by batch; float counts too (the
    general path).  Fails if a slot of a parent batch is dropped or the levels are misaligned."""
    from fedbandit.mechanisms.psco import _nest_counts

    n = 10_007
    for finest in (np.random.default_rng(2).integers(0, 9, size=(2, n // sizes[-1])),
                   np.random.default_rng(3).random((2, n // sizes[-1]))):
        got = _nest_counts(finest, n, sizes)
        assert len(got) == len(sizes)
        for level, b in enumerate(sizes):
            per = b // sizes[-1]  # finest batches per batch of this level
            want = np.array([[finest[r, j * per:(j + 1) * per].sum() for j in range(n // b)] for r in range(2)])
            assert got[level].dtype == finest.dtype
            np.testing.assert_allclose(got[level], want, rtol=1e-12, atol=0)
            if finest.dtype.kind == "i":
                np.testing.assert_array_equal(got[level], want)
