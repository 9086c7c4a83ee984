"""Tests of fedbandit.mechanisms.randomized_response: shufflers, the concurrent shuffle model, RR summation and its accounting."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from fedbandit._validation import check_batch_sizes
from fedbandit.accounting.composition import advanced_composition, level_budget
from fedbandit.accounting.shuffle import (
    local_rr_flip_probability,
    rr_estimator_variance,
    rr_flip_probability,
    rr_message_probabilities,
    rr_shuffle_delta,
    rr_shuffle_delta_exact,
)
from fedbandit.mechanisms.randomized_response import (
    RRShuffleSummation,
    randomized_round,
    rr_debias,
    rr_randomize,
    sample_rr_counts,
    unary_resolution,
    unary_round,
)
from fedbandit.protocols.intermediaries import (
    Allocation,
    ConcurrentShuffleModel,
    ConcurrentShufflers,
    MixedRadixServer,
    Shuffler,
)

# ---------------------------------------------------------------------------------------
# Accounting
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("epsilon", [0.3, 1.0, 2.5])
@pytest.mark.parametrize("p", [0.2, 0.6, 0.95])
def test_delta_single_user_is_local_rr(epsilon, p):
    """m = 1: the protocol is plain randomized response, δ(ε) = max(0, q1 − e^ε q0) + max(0, q0' ...)."""
    q0, q1 = p / 2, 1 - p / 2
    e = math.exp(epsilon)
    exact = max(0.0, q1 - e * q0) + max(0.0, (1 - q1) - e * (1 - q0))
    assert rr_shuffle_delta(epsilon, 1, p) == pytest.approx(exact, abs=1e-15)


@pytest.mark.parametrize("m", [2, 5, 12, 30])
@pytest.mark.parametrize("epsilon,p", [(0.5, 0.3), (1.0, 0.1), (1.0, 0.5), (2.0, 0.05)])
def test_blanket_bound_dominates_exact_worst_case(m, epsilon, p):
    """The blanket bound is an upper bound on the exact δ over every dataset of the others."""
    bound = rr_shuffle_delta(epsilon, m, p)
    worst = max(
        rr_shuffle_delta_exact(epsilon, np.r_[np.ones(c), np.zeros(m - 1 - c)].astype(int), p) for c in range(m)
    )
    assert worst <= bound * (1 + 1e-9) + 1e-15
    # and it is not loose by orders of magnitude (all-zero others is close to the worst case)
    assert bound <= 5 * worst + 1e-12


@settings(max_examples=30, deadline=None)
@given(
    m=st.integers(1, 5000),
    epsilon=st.floats(0.05, 3.0),
    p1=st.floats(0.001, 0.999),
    p2=st.floats(0.001, 0.999),
)
def test_delta_is_monotone_in_p(m, epsilon, p1, p2):
    lo, hi = sorted((p1, p2))
    assert rr_shuffle_delta(epsilon, m, hi) <= rr_shuffle_delta(epsilon, m, lo) + 1e-12


@pytest.mark.parametrize("m", [1, 7, 100, 10_000, 10**7])
@pytest.mark.parametrize("epsilon,delta", [(1.0, 1e-6), (0.2, 1e-8)])
def test_flip_probability_meets_target_and_is_minimal(m, epsilon, delta):
    p = rr_flip_probability(m, epsilon, delta)
    assert 0 < p <= local_rr_flip_probability(epsilon) * (1 + 1e-12)
    assert rr_shuffle_delta(epsilon, m, p) <= delta
    if m > 1:
        assert rr_shuffle_delta(epsilon, m, p * 0.999) > delta


def _blanket_delta_unbinned(epsilon, m, p):
    """δ(ε) of the privacy-blanket bound with every N summed: Σ_N P(N) h_N(ε), N ~ Bin(m − 1, p).

    Written out: h_N(ε) = Σ_z max(P_N(z) − e^ε Q_N(z), 0) with P_N = Bin(N, ½) ∗ Bernoulli(q1)
    and Q_N = Bin(N, ½) ∗ Bernoulli(q0), q0 = p/2, q1 = 1 − p/2 (Balle, Bell, Gascón & Nissim
    2019), i.e. P_N(z) = (1 − q1) b_N(z) + q1 b_N(z − 1) with b_N the Bin(N, ½) pmf, summed
    over every z.  N outside mean ± 12 sd (mass < 1e-32) is left out, so this is at most the
    exact bound.
    """
    q0, q1 = p / 2.0, 1.0 - p / 2.0
    e = math.exp(epsilon)
    others = m - 1
    mu, sd = others * p, math.sqrt(others * p * (1.0 - p))
    total = 0.0
    for n in range(max(0, int(mu - 12 * sd)), min(others, int(mu + 12 * sd) + 1) + 1):
        z = np.arange(n + 2)
        b, b_prev = stats.binom.pmf(z, n, 0.5), stats.binom.pmf(z - 1, n, 0.5)
        big_p = (1.0 - q1) * b + q1 * b_prev
        big_q = (1.0 - q0) * b + q0 * b_prev
        total += stats.binom.pmf(n, others, p) * float(np.sum(np.maximum(big_p - e * big_q, 0.0)))
    return total


#: Relative excess of the binned δ over the unbinned one that the test allows: with 512 bins
#: the left-edge rounding costs 0.1-0.3 % in these settings (measured); right edges would
#: make δ about 1 % too small (and an unbinned sum would give 0 excess).
BINNING_TOLERANCE = 5e-3


@pytest.mark.parametrize(("m", "epsilon", "p"), [(10**6, 0.1, 0.0052), (10**6, 0.2, 0.00266), (4 * 10**6, 0.2, 0.000668)])
def test_binned_blanket_delta_upper_bounds_the_unbinned_sum(m, epsilon, p):
    """At m ≥ 10⁶ the window of N holds more than 512 values and rr_shuffle_delta bins it,
    taking h at each bin's left edge: h_N is non-increasing in N, so that rounds δ up.  The
    binned δ must be an upper bound on the sum over every N (the certificate is conservative),
    and close to it (at most :data:`BINNING_TOLERANCE` above)."""
    exact = _blanket_delta_unbinned(epsilon, m, p)
    binned = rr_shuffle_delta(epsilon, m, p)
    assert 1e-10 < exact < 1e-5  # the regime the protocols certify (δ of a per-message budget)
    assert binned >= exact, (binned, exact, binned / exact - 1)
    assert binned <= exact * (1 + BINNING_TOLERANCE), (binned, exact, binned / exact - 1)


def test_flip_probability_large_batches_give_constant_error():
    """m·p → λ(ε, δ): the debiased batch sum has O(sqrt(log(1/δ))/ε) error whatever m (Cheu et al. 2019)."""
    stds = [math.sqrt(rr_estimator_variance(m, rr_flip_probability(m, 1.0, 1e-6))) for m in (10**4, 10**6, 10**8)]
    assert max(stds) / min(stds) < 1.05
    assert 1.0 < stds[-1] < 4 * math.sqrt(math.log(1e6))


def test_level_budget_composes_back():
    for k in (1, 2, 3, 10, 24):
        eps0, delta0 = level_budget(1.0, 1e-6, k)
        basic = (k * eps0, k * delta0)
        adv = advanced_composition(eps0, delta0, k, 0.5e-6) if k > 1 else basic
        assert min(basic[0], adv[0]) <= 1.0 + 1e-9
        assert (basic[1] <= 1e-6 * (1 + 1e-9)) if basic[0] <= 1 + 1e-9 else adv[1] <= 1e-6 * (1 + 1e-9)


# ---------------------------------------------------------------------------------------
# Randomizer, analyzer, aggregate sampling
# ---------------------------------------------------------------------------------------


def test_rr_debias_unbiased_and_variance():
    """Per-user simulation: mean and variance of the debiased sum.

    z-test on the mean with |z| < 4.5 and a chi-square-style bound on the variance; the
    false-alarm rate is below 1e-4.
    """
    rng = np.random.default_rng(1)
    m, p, runs = 50, 0.4, 20_000
    bits = (rng.random(m) < 0.3).astype(np.uint8)
    msgs = rr_randomize(np.tile(bits, (runs, 1)), p, rng)
    est = rr_debias(msgs.sum(axis=1), m, p)
    var = rr_estimator_variance(m, p)
    z = (est.mean() - bits.sum()) / math.sqrt(var / runs)
    assert abs(z) < 4.5
    assert abs(est.var() / var - 1) < 0.06


def _exact_count_pmf(c, m, p):
    q0, q1 = rr_message_probabilities(p)
    return np.convolve(stats.binom.pmf(np.arange(c + 1), c, q1), stats.binom.pmf(np.arange(m - c + 1), m - c, q0))


@pytest.mark.parametrize("m,c", [(1, 0), (1, 1), (4, 3), (16, 5), (40, 17)])
def test_aggregate_counts_agree_with_per_user_simulation(m, c):
    """Aggregate sampling of Z (inverse-cdf table for m ≤ 16, binomials above) against the
    exact pmf and against the per-user simulation (chi-square tests, each at level 1e-4)."""
    rng = np.random.default_rng(m * 100 + c)
    p = 0.35
    runs = 40_000
    z_agg = sample_rr_counts(np.full(runs, c), m, p, rng)
    bits = np.zeros((runs, m), dtype=np.uint8)
    bits[:, :c] = 1
    z_user = rr_randomize(bits, p, rng).sum(axis=1)
    pmf = _exact_count_pmf(c, m, p)
    support = pmf > 5.0 / runs  # pool the thin tails into one cell
    for z in (z_agg, z_user):
        counts = np.bincount(z, minlength=m + 1)
        obs = np.r_[counts[support], counts[~support].sum()]
        exp = np.r_[pmf[support], pmf[~support].sum()] * runs
        keep = exp > 0
        chi2 = float(np.sum((obs[keep] - exp[keep]) ** 2 / exp[keep]))
        assert stats.chi2.sf(chi2, keep.sum() - 1) > 1e-4
    # two-sample
    table = np.vstack([np.bincount(z_agg, minlength=m + 1), np.bincount(z_user, minlength=m + 1)])
    table = table[:, table.sum(axis=0) > 0]
    assert stats.chi2_contingency(table)[1] > 1e-4


def test_randomized_round_unbiased():
    """Mean of rounded bits equals x (z-test |z| < 4.5, false-alarm rate < 1e-5 per value)."""
    rng = np.random.default_rng(3)
    x = np.array([0.0, 0.1, 0.5, 0.9, 1.0])
    bits = randomized_round(np.tile(x, (50_000, 1)), rng)
    se = np.sqrt(np.maximum(x * (1 - x), 1e-12) / 50_000)
    assert np.all(np.abs(bits.mean(axis=0) - x) < 4.5 * se + 1e-12)


def test_summation_protocol_object():
    proto = RRShuffleSummation(200, 1.0, 1e-6)
    assert proto.certified_delta <= 1e-6
    assert proto.randomizer(1, 0.0) == 1 and proto.randomizer(0, 0.999999) == 0
    assert proto.analyzer(np.ones(200, dtype=int)) == pytest.approx((200 - 200 * proto.q0) / (1 - proto.p))
    est = proto.sample_estimate(np.array([0, 100, 200]), np.random.default_rng(0))
    assert est.shape == (3,)
    assert "RRShuffleSummation" in repr(proto)


def test_unary_round_per_level_is_unbiased_and_independent():
    """resolution=(g_1, ..., g_k): one independent unbiased rounding per level, from one draw.

    z-test of E[u_i] = g_i x per level (|z| < 4.5, false alarm < 1e-4 over the 6 tests),
    the levels' roundings uncorrelated (|r| < 4.5/sqrt(N)), and the draw is the single-g
    rounding's, level by level, from the same generator state.
    """
    x = np.array([0.13, 0.5, 0.77])
    gs = (1, 3)
    n = 40_000
    u = unary_round(np.broadcast_to(x, (n, 3)), gs, np.random.default_rng(4))
    assert u.shape == (2, n, 3) and u.dtype == np.int64
    for i, g in enumerate(gs):
        frac = g * x - np.floor(g * x)
        z = (u[i].mean(axis=0) - g * x) / np.sqrt(frac * (1 - frac) / n)
        assert np.all(np.abs(z) < 4.5), (g, z)
        assert np.all((u[i] >= np.floor(g * x)) & (u[i] <= np.ceil(g * x)))
    r = np.corrcoef(u[0][:, 0], u[1][:, 0])[0, 1]
    assert abs(r) < 4.5 / math.sqrt(n)
    one = unary_round(x[None], 3, np.random.default_rng(9))
    both = unary_round(x[None], (3, 3), np.random.default_rng(9))
    np.testing.assert_array_equal(both[0], one)
    assert unary_resolution(1) == 1 and unary_resolution(16) == 4 and unary_resolution(17) == 5
    bits = unary_round(np.array([0, 1], dtype=np.uint8), (2, 5), np.random.default_rng(0))
    np.testing.assert_array_equal(bits, [[0, 2], [0, 5]])


# ---------------------------------------------------------------------------------------
# Shufflers and the concurrent model
# ---------------------------------------------------------------------------------------


def test_shuffler_lifecycle():
    rng = np.random.default_rng(0)
    sh = Shuffler(index=0)
    assert not sh.active
    with pytest.raises(RuntimeError, match="inactive"):
        sh.submit(1)
    sh.open(3, start=1)
    with pytest.raises(RuntimeError, match="active"):
        sh.open(2, start=1)
    for msg in (5, 6, 7):
        sh.submit(msg)
    assert sh.full
    with pytest.raises(RuntimeError, match="full"):
        sh.submit(8)
    out = sh.release(rng)
    assert sorted(out.tolist()) == [5, 6, 7] and not sh.active


def test_shuffler_release_is_uniform_permutation():
    """All 6 orders of 3 messages equally likely (chi-square, level 1e-4)."""
    rng = np.random.default_rng(1)
    counts = {}
    for _ in range(6000):
        sh = Shuffler(index=0)
        sh.open(3, start=1)
        for msg in "abc":
            sh.submit(msg)
        key = "".join(sh.release(rng))
        counts[key] = counts.get(key, 0) + 1
    assert len(counts) == 6
    assert stats.chisquare(list(counts.values())).pvalue > 1e-4


def _model(batch_sizes, eps=1.0, delta=1e-4):
    k = len(batch_sizes)
    eps0, delta0 = level_budget(eps, delta, k)
    protocols = [RRShuffleSummation(b, eps0, delta0) for b in batch_sizes]
    return ConcurrentShuffleModel(k, MixedRadixServer(batch_sizes, protocols)), protocols


def test_model_transcript_structure():
    """≤ k active shufflers; every user in exactly one released batch per level (complete batches);
    each release is a permutation of the messages its users sent."""
    sizes = (12, 4, 2)
    model, _ = _model(sizes)
    n = 30
    bits = (np.random.default_rng(0).random(n) < 0.5).astype(int)
    tr = model.run(bits, np.random.default_rng(1))
    assert np.all(tr.active_counts[1:] == 3)
    for level, b in enumerate(sizes):
        rel = [r for r in tr.releases if r.tag == level]
        assert [(r.start, r.end) for r in rel] == [(j * b + 1, (j + 1) * b) for j in range(n // b)]
        assert all(r.messages.size == b for r in rel)
    # releases happen in time order
    ends = [r.end for r in tr.releases]
    assert ends == sorted(ends)


def test_model_matches_per_user_fast_path():
    """Same generator: the message-level model and the vectorized per-user path give identical estimates."""
    from fedbandit.mechanisms.psco import concurrent_psco

    sizes = (16, 4, 2)
    model, _ = _model(sizes, eps=1.0, delta=1e-4)
    bits = (np.random.default_rng(5).random(37) < 0.4).astype(np.uint8)
    tr = model.run(bits, np.random.default_rng(11))
    fast = concurrent_psco(bits, 3, 1.0, 1e-4, np.random.default_rng(11), batch_sizes=sizes, sampling="per_user")
    np.testing.assert_allclose(fast.path()[0], tr.estimates, rtol=1e-12, atol=1e-9)


def test_concurrent_shufflers_schedule_and_refusals():
    from fedbandit.protocols.statistics import GaussianTree

    s = ConcurrentShufflers()
    assert s.batch_sizes is None and "configured" in s.describe()
    s.set_batch_sizes((8, 4), 20)
    assert s.k == 2 and not s.local and "[8, 4]" in s.describe()
    assert ConcurrentShufflers((1,)).local and "local" in ConcurrentShufflers((1,)).describe()
    with pytest.raises(ValueError, match="batch_sizes"):
        ConcurrentShufflers((8, 3))
    with pytest.raises(ValueError, match="batch_sizes"):
        ConcurrentShufflers((8, 4)).set_batch_sizes((8, 4), 6)
    with pytest.raises(ValueError, match="gaussian-tree.*concurrent-shufflers"):
        ConcurrentShufflers((4,)).check(GaussianTree("zcdp"))
    np.testing.assert_array_equal(s.deliver(np.arange(3)), np.arange(3))


def test_model_refuses_allocating_active_shuffler():
    class Greedy:
        def allocate(self, t, inactive, releases):
            return [Allocation(0, 3, lambda v, u: v)]

        def estimate(self, t, releases):
            return 0.0

    with pytest.raises(RuntimeError, match="active shuffler"):
        ConcurrentShuffleModel(1, Greedy()).run(np.zeros(5), np.random.default_rng(0))


# ---------------------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------------------


def test_bad_inputs():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="epsilon"):
        rr_flip_probability(10, 0.0, 1e-6)
    with pytest.raises(ValueError, match="delta"):
        rr_flip_probability(10, 1.0, 1.0)
    with pytest.raises(ValueError, match="delta"):
        rr_flip_probability(10, 1.0, 0.0)
    with pytest.raises(ValueError, match="n_users"):
        rr_flip_probability(0, 1.0, 1e-6)
    with pytest.raises(ValueError, match="p"):
        rr_shuffle_delta(1.0, 10, 1.5)
    with pytest.raises(ValueError, match="k"):
        level_budget(1.0, 1e-6, 0)
    with pytest.raises(ValueError, match="k"):
        ConcurrentShuffleModel(0, None)
    with pytest.raises(ValueError, match="x"):
        randomized_round([0.5, 1.2], rng)
    with pytest.raises(ValueError, match="x"):
        randomized_round([-1, 0], rng)
    with pytest.raises(ValueError, match="bits"):
        rr_randomize([0.5], 0.3, rng)
    with pytest.raises(TypeError, match="rng"):
        randomized_round([0.5], None)
    with pytest.raises(ValueError, match="ones"):
        sample_rr_counts([5], 3, 0.3, rng)
    with pytest.raises(ValueError, match="batch_sizes"):
        check_batch_sizes("batch_sizes", (8, 3), 20)
    with pytest.raises(ValueError, match="batch_sizes"):
        check_batch_sizes("batch_sizes", (4, 8), 20)
    with pytest.raises(ValueError, match="batch_sizes"):
        check_batch_sizes("batch_sizes", (32, 8), 20)
    with pytest.raises(ValueError, match="batch_sizes"):
        check_batch_sizes("batch_sizes", (8, 4), 20, k=3)
    with pytest.raises(ValueError, match="batch_sizes"):
        check_batch_sizes("batch_sizes", (8, 0), 20)
