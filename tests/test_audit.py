"""Tests of fedbandit.audit.epsilon: epsilon lower bounds from Clopper-Pearson intervals."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize, stats

from fedbandit.audit.epsilon import (
    AuditResult,
    _cp_lower,
    _cp_upper,
    audit_epsilon,
    audit_epsilon_split,
    clopper_pearson,
    epsilon_lower_bound,
    is_neighbouring,
    min_trials,
    select_threshold,
)

D0 = [0.0, 0.0, 0.0]
D1 = [0.0, 1.0, 0.0]  # replace-one neighbour of D0; the counting query changes by 1


def laplace_counting(b):
    """Vectorized Laplace mechanism for the sum (sensitivity 1): epsilon = 1/b."""

    def mech(dataset, rng, n):
        return np.sum(dataset) + rng.laplace(0.0, b, size=n)

    return mech


def gaussian_counting(sigma):
    def mech(dataset, rng, n):
        return np.sum(dataset) + rng.normal(0.0, sigma, size=n)

    return mech


def gaussian_true_epsilon(sigma, delta):
    """Exact epsilon(delta) of the Gaussian mechanism with sensitivity 1 (Balle & Wang 2018)."""

    def gap(eps):
        return (stats.norm.cdf(-eps * sigma + 1 / (2 * sigma))
                - math.exp(eps) * stats.norm.cdf(-eps * sigma - 1 / (2 * sigma)) - delta)

    return optimize.brentq(gap, 1e-9, 100.0)


def identity(out):
    return out


def test_laplace_bound_below_and_near_truth():
    """epsilon = 1: the audited bound lies in [1/1.25, 1] (fixed seed; 100k trials per dataset)."""
    res = audit_epsilon_split(laplace_counting(1.0), D0, D1, identity, 100_000, vectorized=True,
                              rng=np.random.default_rng(0))
    assert isinstance(res, AuditResult)
    assert 1.0 / 1.25 <= res.epsilon_lower <= 1.0
    assert res.tpr_ci[0] <= res.tpr <= res.tpr_ci[1] and res.fpr_ci[0] <= res.fpr <= res.fpr_ci[1]


def test_gaussian_bound_below_and_near_truth():
    """sigma = 1, delta = 0.01 (true epsilon 2.318): the bound lies in [eps/1.25, eps]."""
    delta = 0.01
    eps_true = gaussian_true_epsilon(1.0, delta)
    assert abs(eps_true - 2.3178) < 1e-3
    res = audit_epsilon_split(gaussian_counting(1.0), D0, D1, identity, 200_000, delta=delta, vectorized=True,
                              rng=np.random.default_rng(1))
    assert eps_true / 1.25 <= res.epsilon_lower <= eps_true


def test_repeated_audits_never_exceed_truth():
    """20 independent audits of the Laplace mechanism at the optimal attack (threshold 1.5).

    At thresholds >= 1 the attack's population TPR/FPR ratio is exactly e^epsilon, so each
    audit exceeds the truth with probability at most (1 - 0.999)/2; the false-alarm rate of
    this test is below 20 * 0.0005 = 1%.
    """
    rng = np.random.default_rng(2)
    for _ in range(20):
        res = audit_epsilon(laplace_counting(1.0), D0, D1, identity, 1.5, 5_000, confidence=0.999,
                            vectorized=True, rng=rng)
        assert res.epsilon_lower <= 1.0


def test_broken_mechanism_gives_large_bound():
    """Noise forgotten: the output is the exact count, and the audit proves epsilon > 5."""

    def broken(dataset, rng, n):
        return np.full(n, float(np.sum(dataset)))

    res = audit_epsilon(broken, D0, D1, identity, 0.5, 10_000, vectorized=True, rng=np.random.default_rng(3))
    assert res.epsilon_lower > 5.0
    assert res.tpr == 1.0 and res.fpr == 0.0


def test_scalar_mode_matches_vectorized_law():
    """Non-vectorized mode: mechanism(dataset, rng) -> one output; bound valid and positive."""

    def mech(dataset, rng):
        return float(np.sum(dataset) + rng.laplace(0.0, 1.0))

    res = audit_epsilon(mech, D0, D1, identity, 1.0, 3_000, rng=np.random.default_rng(4))
    assert 0.0 < res.epsilon_lower <= 1.0


def test_run_grid_backend_and_cache(tmp_path):
    kwargs = dict(vectorized=True, backend="serial", n_chunks=4, cache_dir=tmp_path, cache_key="laplace-b1-identity")
    r1 = audit_epsilon(laplace_counting(1.0), D0, D1, identity, 1.0, 20_000, rng=np.random.default_rng(5), **kwargs)
    assert 0.8 <= r1.epsilon_lower <= 1.0
    assert any(tmp_path.rglob("*.pkl"))
    r2 = audit_epsilon(laplace_counting(1.0), D0, D1, identity, 1.0, 20_000, rng=np.random.default_rng(5), **kwargs)
    assert r2 == r1  # same key and base seed: read back from the cache
    with pytest.raises(ValueError, match="cache_key"):
        audit_epsilon(laplace_counting(1.0), D0, D1, identity, 1.0, 100, rng=np.random.default_rng(5),
                      vectorized=True, backend="serial", cache_dir=tmp_path)


def test_clopper_pearson_and_bound_arithmetic():
    n, alpha = 50, 0.025
    assert clopper_pearson(0, n, alpha) == (0.0, pytest.approx(1 - alpha ** (1 / n)))
    assert clopper_pearson(n, n, alpha) == (pytest.approx(alpha ** (1 / n)), 1.0)
    lo, hi = clopper_pearson(20, n, alpha)
    assert lo < 0.4 < hi
    # more trials with the same rates give a larger bound
    e1, _, _ = epsilon_lower_bound(60, 100, 20, 100)
    e2, _, _ = epsilon_lower_bound(6000, 10_000, 2000, 10_000)
    assert 0 < e1 < e2 < math.log(3)
    # delta makes the bound smaller
    assert epsilon_lower_bound(6000, 10_000, 2000, 10_000, delta=0.1)[0] < e2


@pytest.mark.parametrize("confidence,delta", [(0.95, 0.0), (0.99, 0.0), (0.95, 0.05), (0.5, 0.3)])
def test_min_trials_is_tight(confidence, delta):
    n = min_trials(confidence, delta)
    best = epsilon_lower_bound(n, n, 0, n, delta=delta, confidence=confidence)[0]
    assert best > 0
    if n > 1:
        m = n - 1
        assert epsilon_lower_bound(m, m, 0, m, delta=delta, confidence=confidence)[0] == 0


def test_select_threshold_separate_split():
    rng = np.random.default_rng(6)
    s0 = rng.laplace(0, 1, 50_000)
    s1 = 1 + rng.laplace(0, 1, 50_000)
    t = select_threshold(s0, s1)
    # any threshold >= 1 (or <= 0, by symmetry) attains e^eps; the chosen one scores near 1
    k1, k0 = np.sum(s1 > t), np.sum(s0 > t)
    assert epsilon_lower_bound(k1, s1.size, k0, s0.size)[0] > 0.85


def _select_threshold_plain(s0, s1, *, delta=0.0, confidence=0.95, n_candidates=200, slack=0.0):
    """select_threshold as first written: every candidate scored by epsilon_lower_bound, one by one."""
    s0, s1 = np.asarray(s0, dtype=float).reshape(-1), np.asarray(s1, dtype=float).reshape(-1)
    pooled = np.concatenate([s0, s1])
    q = np.linspace(0.0, 1.0, n_candidates + 2)[1:-1]
    low = 5.0 / pooled.size
    if low < q[0]:
        tail = np.geomspace(low, q[0], 40)
        q = np.concatenate([tail, q, 1.0 - tail])
    cand = np.quantile(pooled, q)
    gaps = [(s0.max() + s1.min()) / 2.0, (s1.max() + s0.min()) / 2.0]
    cand = np.unique(np.concatenate([cand, gaps]))
    s0s, s1s = np.sort(s0), np.sort(s1)
    best, best_t = -1.0, float(cand[0])
    for t in cand:
        k0 = s0.size - np.searchsorted(s0s, t, side="right")
        k1 = s1.size - np.searchsorted(s1s, t, side="right")
        eps, _, _ = epsilon_lower_bound(k1, s1.size, k0, s0.size, delta=delta, confidence=confidence, slack=slack)
        if eps > best:
            best, best_t = eps, float(t)
    return best_t


@pytest.mark.parametrize("case", range(12))
def test_select_threshold_is_the_plain_candidate_loop(case):
    # the vectorized scoring (both Clopper–Pearson bounds of every candidate in one beta.ppf call each)
    # picks the same threshold, bit for bit, as scoring the candidates one by one: continuous and tied
    # statistics, separated splits (k = 0 and k = n), unequal sizes, δ and slack
    rng = np.random.default_rng(100 + case)
    n0, n1 = [(40, 40), (2_000, 2_000), (50_000, 50_000), (300, 700)][case % 4]
    kind = case % 3
    if kind == 0:
        s0, s1 = rng.standard_normal(n0), 0.7 + rng.standard_normal(n1)
    elif kind == 1:  # integer statistics: many ties
        s0, s1 = rng.poisson(3.0, n0).astype(float), rng.poisson(4.0, n1).astype(float)
    else:  # separated: a perfect threshold exists
        s0, s1 = rng.uniform(0, 1, n0), rng.uniform(2, 3, n1)
    kw = [dict(), dict(delta=1e-5, confidence=0.995), dict(confidence=0.99, slack=0.003)][case // 4]
    got, want = select_threshold(s0, s1, **kw), _select_threshold_plain(s0, s1, **kw)
    assert got == want and type(got) is float
    # and each candidate's scoring bounds are the scalar Clopper–Pearson ones, written out (and clopper_pearson's)
    alpha = (1 - kw.get("confidence", 0.95)) / 2
    k1 = np.unique(np.concatenate([[0, 1, 2, n1 - 1, n1], rng.integers(0, n1 + 1, 100)]))
    k0 = np.unique(np.concatenate([[0, 1, 2, n0 - 1, n0], rng.integers(0, n0 + 1, 100)]))
    lo, hi = _cp_lower(k1, n1, alpha), _cp_upper(k0, n0, alpha)
    assert lo.tolist() == [0.0 if k == 0 else float(stats.beta.ppf(alpha, int(k), n1 - int(k) + 1)) for k in k1]
    assert hi.tolist() == [1.0 if k == n0 else float(stats.beta.ppf(1 - alpha, int(k) + 1, n0 - int(k))) for k in k0]
    assert lo.tolist() == [clopper_pearson(int(k), n1, alpha)[0] for k in k1]
    assert hi.tolist() == [clopper_pearson(int(k), n0, alpha)[1] for k in k0]


def test_neighbouring_relations():
    assert is_neighbouring([1, 2, 3], [1, 5, 3], "replace_one")
    assert is_neighbouring([1, 2, 3], [1, 2, 3], "replace_one")
    assert not is_neighbouring([1, 2, 3], [0, 5, 3], "replace_one")
    assert not is_neighbouring([1, 2], [1, 2, 3], "replace_one")
    assert is_neighbouring([1, 2], [1, 9, 2], "add_remove_one")
    assert is_neighbouring([1, 9, 2], [1, 2], "add_remove_one")
    assert not is_neighbouring([1, 2], [2, 1, 3], "add_remove_one")
    assert not is_neighbouring([1, 2], [1, 2], "add_remove_one")
    rows0 = np.zeros((4, 2))
    rows1 = rows0.copy()
    rows1[2] = [1.0, -1.0]
    assert is_neighbouring(rows0, rows1)  # elements may be arrays
    assert is_neighbouring("abc", "xyz", lambda a, b: True)


def test_bad_inputs():
    mech = laplace_counting(1.0)
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="not neighbouring"):
        audit_epsilon(mech, [0, 0, 0], [1, 1, 0], identity, 0.5, 1000, vectorized=True, rng=rng)
    with pytest.raises(ValueError, match="not neighbouring"):
        audit_epsilon(mech, [0, 0], [0, 0, 0], identity, 0.5, 1000, vectorized=True, rng=rng)
    with pytest.raises(ValueError, match="not neighbouring"):
        audit_epsilon(mech, D0, D1, identity, 0.5, 1000, vectorized=True, rng=rng,
                      neighbouring=lambda a, b: False)
    with pytest.raises(ValueError, match="neighbouring"):
        audit_epsilon(mech, D0, D1, identity, 0.5, 1000, rng=rng, neighbouring="swap_two")
    with pytest.raises(ValueError, match="n_trials"):
        audit_epsilon(mech, D0, D1, identity, 0.5, 5, vectorized=True, rng=rng)
    with pytest.raises(ValueError, match="n_select"):
        audit_epsilon_split(mech, D0, D1, identity, 20, confidence=0.9999, vectorized=True, rng=rng)
    for bad in (0.0, 1.0, 1.5, -0.2):
        with pytest.raises(ValueError, match="confidence"):
            audit_epsilon(mech, D0, D1, identity, 0.5, 1000, confidence=bad, vectorized=True, rng=rng)
    with pytest.raises(ValueError, match="delta"):
        audit_epsilon(mech, D0, D1, identity, 0.5, 1000, delta=1.0, vectorized=True, rng=rng)
    with pytest.raises(TypeError, match="mechanism"):
        audit_epsilon("not callable", D0, D1, identity, 0.5, 1000, rng=rng)
    with pytest.raises(TypeError, match="rng"):
        audit_epsilon(mech, D0, D1, identity, 0.5, 1000, vectorized=True, rng=None)
