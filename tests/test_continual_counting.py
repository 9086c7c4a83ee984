"""Tests of the binary, logarithmic and hybrid mechanisms (Chan, Shi & Song) and of Fact 1."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from fedbandit.accounting.counting import (
    binary_counter_scale,
    hybrid_counter_scales,
    per_item_counter_scale,
)
from fedbandit.audit.epsilon import audit_epsilon_split
from fedbandit.mechanisms import continual_counting as cc
from fedbandit.mechanisms.continual_counting import (
    BinaryMechanism,
    HybridMechanism,
    LogarithmicMechanism,
    PerItemLaplaceMechanism,
    binary_noise_variance,
    draw_standard_laplace,
    floor_log2,
    hybrid_noise_variance,
    hybrid_sd_bound_by_level,
    lowest_set_bit_index,
    per_item_noise_variance,
)
from fedbandit.theory.consensus import fact1_error_bound, hybrid_error_bound
from reference_consensus_ucb import (
    TextbookBinary,
    TextbookHybrid,
    TextbookPerItemLaplace,
)


def _textbook_outputs(xs, eps, seed, sens=1.0):
    rng = np.random.default_rng(seed)
    h = TextbookHybrid(eps, sens)
    return np.array([h.step(x, draw_standard_laplace(rng, 1)[0]) for x in xs])


def test_bit_helpers():
    n = np.array([1, 2, 3, 4, 6, 8, 12, 1023, 1024, (1 << 21) + 6])
    assert np.array_equal(floor_log2(n), [int(v).bit_length() - 1 for v in n])
    assert np.array_equal(lowest_set_bit_index(n), [(int(v) & -int(v)).bit_length() - 1 for v in n])


def test_hybrid_equals_textbook_on_one_stream():
    xs = np.random.default_rng(3).random(3000)  # crosses 2^11: the tree storage grows past 8 levels
    m = HybridMechanism(0.7, (1,))
    rng = np.random.default_rng(5)
    out = np.array([m.step(x, rng)[0] for x in xs])
    assert np.allclose(out, _textbook_outputs(xs, 0.7, 5), rtol=0, atol=1e-9)
    assert np.allclose(m.true_sum[0], xs.sum())
    assert m.count[0] == xs.size


def test_hybrid_large_count_path(monkeypatch):
    """The frexp path used beyond the lookup tables gives the same outputs."""
    monkeypatch.setattr(cc, "_TABLE_BITS", 3)
    xs = np.random.default_rng(4).random(700)
    m = HybridMechanism(1.3, (1,), sensitivity=2.0)
    rng = np.random.default_rng(9)
    out = np.array([m.step(x, rng)[0] for x in xs])
    assert np.allclose(out, _textbook_outputs(xs, 1.3, 9, sens=2.0), rtol=0, atol=1e-9)


def test_hybrid_per_stream_counts_and_masks():
    """Streams advancing at different times equal independent textbook streams with the same draws."""
    rng_data = np.random.default_rng(0)
    E, steps = 5, 400
    masks = rng_data.random((steps, E)) < np.array([0.9, 0.5, 0.1, 1.0, 0.3])
    xs = rng_data.random((steps, E))
    eps = np.array([0.5, 1.0, 2.0, 4.0, 8.0])
    m = HybridMechanism(eps, (E,))
    refs = [TextbookHybrid(e) for e in eps]
    rng_a, rng_b = np.random.default_rng(11), np.random.default_rng(11)
    for s in range(steps):
        out = m.step(xs[s], rng_a, where=masks[s])
        idx = np.flatnonzero(masks[s])
        z = draw_standard_laplace(rng_b, idx.size)
        for zz, e in zip(z, idx):
            refs[e].step(xs[s, e], zz)
        assert np.allclose(out, [r.out for r in refs], atol=1e-9)
    assert np.array_equal(m.count, masks.sum(axis=0))


def test_step_flat_increment_matches_output_change():
    m = HybridMechanism(1.0, (3, 4))
    rng = np.random.default_rng(2)
    data = np.random.default_rng(1)
    for _ in range(300):
        idx = data.choice(12, size=5, replace=False)
        before = m.value_at(idx)
        inc = m.step_flat_increment(idx, data.random(5), rng)
        assert np.allclose(m.value_at(idx) - before, inc, atol=1e-9)


@pytest.mark.parametrize("n", [1, 2, 3, 7, 8, 100, 300])
def test_hybrid_noise_variance(n):
    """Statistical: sample variance of 20000 streams within 10% of the exact formula.

    The sample variance of 20000 draws of a Laplace sum has relative s.d. below 1.7%
    (kurtosis <= 6), so 10% is about 6 s.d.: false-alarm rate < 1e-8 per case.
    """
    E = 20_000
    m = HybridMechanism(1.0, (E,))
    rng = np.random.default_rng(100 + n)
    for _ in range(n):
        m.step(0.0, rng)
    assert abs(m.value.var() / hybrid_noise_variance(n, 1.0) - 1) < 0.10
    assert abs(m.value.mean()) < 6 * np.sqrt(hybrid_noise_variance(n, 1.0) / E)


def test_binary_mechanism():
    T = 100
    xs = np.random.default_rng(0).random(T)
    m = BinaryMechanism(T, 1.0, (1,))
    rng = np.random.default_rng(1)
    out = [m.step(x, rng)[0] for x in xs]
    # textbook: noisy p-sums over the set bits of t, node noise Lap(bit_length(T)/eps)
    rng2 = np.random.default_rng(1)
    alpha_hat, ref = {}, []
    for t, x in enumerate(xs, start=1):
        i = (t & -t).bit_length() - 1
        alpha_hat[i] = xs[t - (1 << i): t].sum() + draw_standard_laplace(rng2, 1)[0] * T.bit_length()
        ref.append(sum(alpha_hat[j] for j in range(T.bit_length()) if (t >> j) & 1))
    assert np.allclose(out, ref, atol=1e-9)
    with pytest.raises(ValueError, match="horizon"):
        m.step(0.5, rng)
    E = 20_000
    mb = BinaryMechanism(64, 2.0, (E,))
    for _ in range(7):
        v = mb.step(0.0, rng)
    assert abs(v.var() / binary_noise_variance(7, 64, 2.0) - 1) < 0.10


def test_binary_and_per_item_equal_textbook_with_increments():
    """Binary (horizon 300) and per-item Laplace streams: outputs equal the textbook loops on the
    same draws, and step_flat_increment returns the output change."""
    data = np.random.default_rng(3)
    E, steps = 4, 300
    eps = np.array([0.5, 1.0, 2.0, 4.0])
    for make, ref in ((lambda: BinaryMechanism(steps, eps, (E,), sensitivity=2.0),
                       lambda e: TextbookBinary(steps, e, 2.0)),
                      (lambda: PerItemLaplaceMechanism(eps, (E,), sensitivity=2.0),
                       lambda e: TextbookPerItemLaplace(e, 2.0))):
        m = make()
        refs = [ref(e) for e in eps]
        rng_a, rng_b = np.random.default_rng(5), np.random.default_rng(5)
        for _ in range(steps):
            idx = np.flatnonzero(data.random(E) < 0.7)
            x = 2.0 * data.random(idx.size) - 1.0
            before = m.value_at(idx)
            inc = m.step_flat_increment(idx, x, rng_a)
            z = draw_standard_laplace(rng_b, idx.size)
            for e, xx, zz in zip(idx, x, z):
                refs[e].step(xx, zz)
            assert np.allclose(m.value_at(idx) - before, inc, atol=1e-9)
            assert np.allclose(m.value, [r.out for r in refs], atol=1e-9)


def test_scales_come_from_the_accounting_rules():
    """Every mechanism's Laplace scale is the rule's (bit for bit), scalar or per stream."""
    eps = np.array([0.3, 1.0, 7.0])
    h = HybridMechanism(eps, (3,), sensitivity=1.5)
    assert np.array_equal(h._c, hybrid_counter_scales(eps, 1.5)[0]) and np.array_equal(h._c, 2 * 1.5 / eps)
    b = BinaryMechanism(100, eps, (3,), sensitivity=1.5)
    assert np.array_equal(b.node_scale, binary_counter_scale(eps, 100, 1.5)) and np.allclose(b.node_scale, 7 * 1.5 / eps)
    p = PerItemLaplaceMechanism(0.5, (3,), sensitivity=1.5)
    assert p.scale == per_item_counter_scale(0.5, 1.5) == 3.0
    assert np.array_equal(LogarithmicMechanism(eps, (3,))._scale, 1.0 / eps)


@pytest.mark.parametrize("n", [1, 10, 200])
def test_per_item_noise_variance(n):
    """Statistical: sample variance of 20000 streams within 10% of 2 n (s/eps)^2 (as for the hybrid test:
    relative s.d. of the sample variance below 1.7%, false-alarm rate < 1e-8 per case)."""
    E = 20_000
    m = PerItemLaplaceMechanism(2.0, (E,), sensitivity=0.5)
    rng = np.random.default_rng(200 + n)
    for _ in range(n):
        m.step(0.0, rng)
    assert abs(m.value.var() / per_item_noise_variance(n, 2.0, 0.5) - 1) < 0.10


def test_hybrid_beats_per_item_only_at_large_counts():
    """The exact variances: the per-item counter's grows linearly, the hybrid's polylogarithmically,
    so the hybrid is better at large counts only (about n > 10^4 at any epsilon)."""
    n = np.array([100, 1000, 2**20])
    ratio = hybrid_noise_variance(n, 1.0) / per_item_noise_variance(n, 1.0)
    assert ratio[0] > 1 and ratio[1] > 1 and ratio[2] < 0.1
    # the std-width bound g(k) dominates the exact hybrid standard deviation at every count
    counts = np.arange(1, 5000)
    assert np.all(np.sqrt(hybrid_noise_variance(counts, 1.0)) <= 2.0 * hybrid_sd_bound_by_level()[floor_log2(counts)])


def test_logarithmic_mechanism_releases_at_powers_of_two():
    E = 20_000
    m = LogarithmicMechanism(1.0, (E,))
    rng = np.random.default_rng(0)
    prev = m.value.copy()
    for n in range(1, 17):
        v = m.step(1.0, rng)
        if n & (n - 1):  # not a power of two: output unchanged
            assert np.array_equal(v, prev)
        else:  # a release: sum n plus (log2 n + 1) Lap(1/eps)
            k = n.bit_length() - 1
            assert abs(v.mean() - n) < 0.1
            assert abs(v.var() / (2.0 * (k + 1)) - 1) < 0.1
        prev = v.copy()


@pytest.mark.parametrize("n", [4, 16, 100, 1023])
def test_fact1_with_constant_3_holds(n):
    """Statistical test of Fact 1 (error <= c (1/eps) (log2 t)^1.5 ln(1/delta) w.p. 1 - delta).

    With c = 3 the exceedance frequency over 10000 streams must not exceed delta by more
    than a one-sided binomial test at level 1e-4 allows (false-alarm rate 1e-4 per case).
    The explicit bound of :func:`hybrid_error_bound` is checked the same way.
    """
    E = 10_000
    m = HybridMechanism(1.0, (E,))
    rng = np.random.default_rng(n)
    for _ in range(n):
        err = np.abs(m.step(0.0, rng))
    for delta in (0.1, 0.01):
        limit = stats.binom.ppf(1 - 1e-4, E, delta) / E
        assert np.mean(err > fact1_error_bound(n, 1.0, delta, constant=3.0)) <= limit
        assert np.mean(err > hybrid_error_bound(n, 1.0, delta)) <= limit


def test_fact1_literal_constant_fails_at_moderate_counts():
    """Documents a finding: Fact 1 with constant 1 (as printed) is violated, e.g. at t = 1023.

    At t = 1023, delta = 0.01 the exceedance frequency is about 6%; we assert > 3% (the
    binomial false-alarm rate of this assertion, if the truth were <= 1%, is < 1e-20).
    """
    E = 10_000
    m = HybridMechanism(1.0, (E,))
    rng = np.random.default_rng(7)
    for _ in range(1023):
        err = np.abs(m.step(0.0, rng))
    assert np.mean(err > fact1_error_bound(1023, 1.0, 0.01)) > 0.03


def _hybrid_release_batch(eps, sensitivity=1.0):
    def mech(dataset, rng, n):
        m = HybridMechanism(eps, (n,), sensitivity=sensitivity)
        return np.stack([m.step(x, rng) for x in dataset], axis=1)  # (n, len)

    return mech


def _diff_statistic(outputs):
    # Change of the released prefix when the differing item (position 2, 0-based) enters.
    return outputs[:, 2] - outputs[:, 1]


def test_audit_hybrid_never_above_claim():
    """The audit of the hybrid mechanism (epsilon = 1) gives no lower bound above 1.

    The bound holds with probability 0.95 for a correct mechanism (Clopper-Pearson), so this
    test's false-alarm rate is at most 5% for a correct implementation (fixed seed).
    """
    d0 = np.zeros(4)
    d1 = d0.copy()
    d1[2] = 1.0
    res = audit_epsilon_split(_hybrid_release_batch(1.0), d0, d1, _diff_statistic, 100_000,
                              vectorized=True, rng=np.random.default_rng(0))
    assert res.epsilon_lower <= 1.0
    assert res.epsilon_lower > 0.1  # the attack does see the item (a sanity check of the audit)


def test_audit_detects_under_noised_hybrid():
    """A hybrid mechanism calibrated for items of width 0.1 leaks items of width 1: detected."""
    d0 = np.zeros(4)
    d1 = d0.copy()
    d1[2] = 1.0

    def broken(dataset, rng, n):
        m = HybridMechanism(1.0, (n,), sensitivity=0.1)
        m._check_range = lambda xf: None  # the bug: the range check was bypassed too
        return np.stack([m.step(x, rng) for x in dataset], axis=1)

    res = audit_epsilon_split(broken, d0, d1, _diff_statistic, 20_000, vectorized=True,
                              rng=np.random.default_rng(1))
    assert res.epsilon_lower > 1.0


def test_audit_per_item_laplace_never_above_claim():
    """The audit of the per-item Laplace counter (epsilon = 1) gives no lower bound above 1
    (Clopper-Pearson at 95%: false-alarm rate at most 5% for a correct mechanism, fixed seed)."""
    d0 = np.zeros(4)
    d1 = d0.copy()
    d1[2] = 1.0

    def mech(dataset, rng, n):
        m = PerItemLaplaceMechanism(1.0, (n,))
        return np.stack([m.step(x, rng) for x in dataset], axis=1)

    res = audit_epsilon_split(mech, d0, d1, _diff_statistic, 100_000, vectorized=True, rng=np.random.default_rng(3))
    assert 0.3 < res.epsilon_lower <= 1.0


def test_bad_inputs():
    with pytest.raises(ValueError, match="epsilon"):
        PerItemLaplaceMechanism(-1.0, (3,))
    with pytest.raises(ValueError, match="epsilon"):
        HybridMechanism(0.0, (3,))
    with pytest.raises(ValueError, match="epsilon"):
        HybridMechanism(np.array([1.0, -1.0]), (2,))
    with pytest.raises(ValueError, match="sensitivity"):
        HybridMechanism(1.0, (3,), sensitivity=0.0)
    with pytest.raises(ValueError, match="n_steps"):
        BinaryMechanism(0, 1.0)
    m = HybridMechanism(1.0, (3,))
    with pytest.raises(ValueError, match="sensitivity"):
        m.step(np.array([0.0, 2.0, 0.0]), np.random.default_rng(0))
    with pytest.raises(TypeError, match="rng"):
        m.step(0.0, None)
    with pytest.raises(ValueError, match="broadcast"):
        HybridMechanism(np.ones(4), (3,))


@settings(max_examples=30, deadline=None)
@given(bits=st.lists(st.integers(0, 1), min_size=1, max_size=150), seed=st.integers(0, 2**16))
def test_hybrid_output_minus_truth_is_data_independent(bits, seed):
    """Property: the error (output - running sum) depends on the draws only, not on the data."""
    xs = np.array(bits, dtype=float)
    a = HybridMechanism(2.0, (1,))
    b = HybridMechanism(2.0, (1,))
    ra, rb = np.random.default_rng(seed), np.random.default_rng(seed)
    for x in xs:
        ea = a.step(x, ra)[0] - a.true_sum[0]
        eb = b.step(0.0, rb)[0]
        assert abs(ea - eb) < 1e-9


@pytest.mark.parametrize("n", [3, 12, 300, 511, 512])
def test_hybrid_sd_factor_matches_a_monte_carlo_of_the_mechanism(n):
    """Statistical: the sample s.d. of 20000 streams' noise within 5 % of ``(2/ε) e(n)``.

    The sample variance of 20000 draws of a Laplace sum has relative s.d. below 1.7 %
    (kurtosis <= 6), so the sample s.d. has relative s.d. below 0.9 %: 5 % is more than
    5 s.d., a false-alarm rate below 1e-7 per case.  Written out: e(n)^2 = 2 (k + 1) +
    2 popcount(n - 2^k) k^2; at n = 300 (k = 8, tau = 44 = 0b101100) it is 18 + 384 = 402,
    against the level bound's 2 * 9 + 2 * 512 = 1042.
    """
    from fedbandit.mechanisms.continual_counting import hybrid_sd_factor

    E, eps = 20_000, 0.5
    m = HybridMechanism(eps, (E,))
    rng = np.random.default_rng(700 + n)
    for _ in range(n):
        m.step(0.0, rng)
    k = n.bit_length() - 1
    e2 = 2 * (k + 1) + 2 * bin(n - 2**k).count("1") * k**2
    assert math.isclose(float(hybrid_sd_factor(n)) ** 2, e2, rel_tol=1e-12)
    assert abs(m.value.std() / ((2 / eps) * math.sqrt(e2)) - 1) < 0.05
    if n == 300:
        assert e2 == 402 and math.isclose(float(hybrid_sd_bound_by_level()[8]) ** 2, 1042.0)


def test_hybrid_counter_exact_width_uses_the_exact_sd():
    from fedbandit.protocols import create

    n = np.array([1, 2, 300, 1023, 1024])
    exact = create("counter-hybrid", epsilon=1.0, width_sd="exact").randomizer
    bound = create("counter-hybrid", epsilon=1.0).randomizer
    k = np.array([0, 1, 8, 9, 10])
    pop = np.array([0, 0, 3, 9, 0])
    assert np.allclose(exact.sd_factor(n), np.sqrt(2 * (k + 1) + 2 * pop * k**2))
    assert np.allclose(bound.sd_factor(n), np.sqrt(2 * (k + 1) + 2 * k**3))
    # consensus counts: the exact factor at floor(n̂)
    assert np.allclose(exact.sd_factor_float(np.array([300.7, 1.0])), np.sqrt([402.0, 2.0]))
    with pytest.raises(ValueError, match="width_sd"):
        create("counter-hybrid", epsilon=1.0, width_sd="max")


def test_hybrid_counter_level_bound_at_real_counts_matches_floor_log2():
    """sd_factor_float (the level bound, read from the float's exponent bits) against g(floor(log2 n̂))
    computed count by count with math.frexp, on counts n̂ >= 1 around every power of two and on a
    non-contiguous view (the decentralized learner passes one slice of its consensus state)."""
    from fedbandit.protocols import create

    bound = create("counter-hybrid", epsilon=1.0).randomizer
    g = hybrid_sd_bound_by_level()
    pows = 2.0 ** np.arange(0, 64)
    n_hat = np.concatenate([[1.0], pows, np.nextafter(pows[1:], 0.0), np.nextafter(pows, np.inf), 1.5 * pows,
                            np.random.default_rng(3).uniform(1.0, 5e4, 500)])
    want = np.array([g[math.frexp(float(x))[1] - 1] for x in n_hat])
    assert np.array_equal(bound.sd_factor_float(n_hat), want)
    state = np.stack([n_hat[:300].reshape(3, 100), np.zeros((3, 100))], axis=1)  # (A, 2, n): the counts are a view
    assert np.array_equal(bound.sd_factor_float(state[:, 0]), want[:300].reshape(3, 100))


def test_hybrid_tree_column_tables_match_the_bits():
    """The hybrid mechanism's column tables against tau and rest computed count by count with Python
    integers (level j in column j + 1, column 0 for "none"), including counts around powers of two."""
    ns = sorted({1, 2, 3, 5, 6, 7, 12, 255, 256, 257, 1000, (1 << 19) + 1, (1 << 20) - 1}
                | set(np.random.default_rng(0).integers(1, 1 << cc._TABLE_BITS, 300).tolist()))
    for n in ns:
        tau = n - (1 << (n.bit_length() - 1))
        rest = tau & (tau - 1)
        want_write = 0 if tau == 0 else (tau & -tau).bit_length()  # lowest set bit index + 1
        want_read = 0 if rest == 0 else (rest & -rest).bit_length()
        assert (cc._HYB_WRITE_COL[n], cc._HYB_READ_COL[n]) == (want_write, want_read), n


@pytest.mark.parametrize("eps", [1.3, np.array([0.5, 1.0, 2.0, 4.0, 8.0, 16.0])[:, None]])
def test_hybrid_level_table_path_equals_the_where_path(eps):
    """The step's noise scale from the level table (log releases and nodes sharing one b) equals,
    bit for bit, the plain where(power of two, b, b k) path, for outputs and increments alike."""
    fast = HybridMechanism(eps, (6, 4), track_true=False)
    plain = HybridMechanism(eps, (6, 4), track_true=False)
    assert fast._c_level is fast._c
    plain._c_level = np.array(plain._c, dtype=float, copy=True)  # equal values, another object: the where path
    data, rng_f, rng_p = np.random.default_rng(3), np.random.default_rng(8), np.random.default_rng(8)
    for s in range(600):
        idx = data.choice(24, size=10, replace=False)
        x = data.random(10)
        step = "step_flat" if s % 3 else "step_flat_increment"
        assert np.array_equal(getattr(fast, step)(idx, x, rng_f), getattr(plain, step)(idx, x, rng_p)), s
    assert fast.count.max() > 256  # counts through several levels and powers of two
    assert np.array_equal(fast.value, plain.value)
    ns = np.arange(1, 5000)
    want = [1.0 if n & (n - 1) == 0 else float(n.bit_length() - 1) for n in ns.tolist()]
    assert np.array_equal(cc._HYB_NOISE_LEVEL[ns], want)
