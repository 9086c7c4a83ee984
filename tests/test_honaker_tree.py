"""The full binary tree with Honaker's best linear estimator (issue 24): mechanism and protocols.

Formulas are written out here, not taken from the code under test: the bottom-up estimate of a
level-j node has variance v_j = 2^j σ²/(2^{j+1} − 1) (from 1/v_j = 1/σ² + 1/(2 v_{j−1}),
v_0 = σ²), and the prefix at k the sum of v_j over the set bits of k.  They are checked against
a first-principles computation: the generalized-least-squares (GLS) estimate of the prefix from
every node the full tree has released by step k, whose covariance is a (HᵀH)⁻¹ aᵀ σ² for the
node-incidence matrix H.  Statistical checks have their false-alarm rate stated.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from fedbandit.mechanisms.honaker_tree import (
    FullTreeRandomizer,
    HonakerAnalyzer,
    HonakerTreeMechanism,
    honaker_level_variance,
    honaker_max_prefix_variance,
    honaker_prefix_variance,
)

#: False-alarm rate of every statistical check in this file (per check).
ALPHA = 1e-4


def _v(j):
    # the derived level variance, in units of σ²
    return 2.0**j / (2.0 ** (j + 1) - 1.0)


def _formula(k):
    return sum(_v(j) for j in range(k.bit_length()) if k >> j & 1)


def _released_nodes(k):
    """Every node of the full tree closed by step k: (level, first, last) with last ≤ k, as the
    randomizer releases them (step s releases levels 0..ν(s), the node of level l ending at s)."""
    out = []
    for s in range(1, k + 1):
        nu = (s & -s).bit_length() - 1
        for level in range(nu + 1):
            out.append((level, s - 2**level + 1, s))
    return out


def _incidence(k):
    nodes = _released_nodes(k)
    H = np.zeros((len(nodes), k))
    for r, (_, a, b) in enumerate(nodes):
        H[r, a - 1 : b] = 1.0
    return H


def test_level_variance_is_the_gls_variance_of_a_complete_subtree_root():
    """The GLS estimate of the root sum of a complete subtree of depth j from all its noisy nodes
    (i.i.d. unit noise) has variance 1ᵀ(HᵀH)⁻¹1 = v_j = 2^j/(2^{j+1} − 1)."""
    for j in range(7):
        H = _incidence(2**j)  # the subtree of [1, 2^j]: every node closed by step 2^j
        ones = np.ones(2**j)
        gls = ones @ np.linalg.solve(H.T @ H, ones)
        assert gls == pytest.approx(_v(j), rel=1e-10)
        assert honaker_level_variance(j, 1.0) == pytest.approx(_v(j), rel=1e-14)
        assert honaker_level_variance(j, 2.5) == pytest.approx(6.25 * _v(j), rel=1e-14)


@pytest.mark.parametrize("n", [13, 16])
def test_prefix_variance_is_the_gls_variance_from_everything_released(n):
    """At every step k: the online estimate's stated variance = the written-out formula = the GLS
    variance of the prefix [1, k] given every node released by step k; strictly below the plain
    tree's popcount(k) for k ≥ 2 and equal to it at k = 1; the maximum over k as stated."""
    got = []
    for k in range(1, n + 1):
        H = _incidence(k)
        a = np.ones(k)
        gls = a @ np.linalg.solve(H.T @ H, a)
        got.append(gls)
        assert honaker_prefix_variance(k) == pytest.approx(_formula(k), rel=1e-12)
        assert gls == pytest.approx(_formula(k), rel=1e-10), k
        tree = bin(k).count("1")
        assert gls <= tree + 1e-12 and (k == 1 or gls < tree - 1e-3)
    assert honaker_max_prefix_variance(n) == pytest.approx(max(got), rel=1e-10)
    for K in range(1, 300):
        assert honaker_max_prefix_variance(K) == pytest.approx(max(_formula(k) for k in range(1, K + 1)), rel=1e-12)


def _gls_estimates(nodes_by_step, n):
    """The GLS prefix estimates from the released nodes (by step), per entry (reference)."""
    out = []
    for k in range(1, n + 1):
        H = _incidence(k)
        y = np.concatenate([nodes_by_step[s][: (s & -s).bit_length()] for s in range(1, k + 1)])  # (rows, ...)
        beta = np.linalg.lstsq(H, y.reshape(y.shape[0], -1), rcond=None)[0]
        out.append(beta.sum(axis=0).reshape(y.shape[1:]))
    return np.stack(out)


def test_streaming_estimate_equals_the_gls_estimate_on_the_same_noisy_nodes():
    """Exactly (same draws): the randomizer's nodes are the true node sums plus its noise, and the
    analyzer's prefix at every step is the GLS estimate from every node released so far."""
    n, item = 11, (3,)
    rng = np.random.default_rng(4)
    data = np.random.default_rng(1).normal(size=(n,) + item)
    mech = FullTreeRandomizer(n, item, 0.7)
    ana = HonakerAnalyzer(n, item)
    nodes_by_step, prefixes = {}, []
    for k in range(1, n + 1):
        j, nodes, z = mech.release(data[k - 1], rng, return_noise=True)
        assert j == (k & -k).bit_length() - 1 and nodes.shape == (mech.kappa,) + item
        for level in range(mech.kappa):
            true = data[k - 2**level : k].sum(axis=0) if level <= j else 0.0
            np.testing.assert_allclose(nodes[level], true + z[level], atol=1e-12)
            if level > j:
                assert np.all(nodes[level] == 0) and np.all(z[level] == 0)
        nodes_by_step[k] = nodes
        prefixes.append(ana.update(j, nodes))
    np.testing.assert_allclose(np.stack(prefixes), _gls_estimates(nodes_by_step, n), atol=1e-10)
    # the central mechanism: the same numbers from the same draws
    central = HonakerTreeMechanism(n, item, 0.7)
    rng = np.random.default_rng(4)
    np.testing.assert_allclose(np.stack([central.step(data[k], rng) for k in range(n)]), np.stack(prefixes), atol=1e-12)


def test_per_run_steps_equal_each_run_alone():
    """runs= (runs at different steps, batch axes (runs, agents)): each run's nodes and prefixes are
    those of a lockstep tree fed that run's elements, with the noise the call drew for it."""
    n, R, A, D = 8, 3, 2, 2
    schedule = [[0, 1, 2], [0, 2], [1], [0, 1, 2], [2], [0, 2], [0, 1, 2], [1, 2], [0], [1], [0, 1]]
    data = np.random.default_rng(9).normal(size=(len(schedule), R, A, D))
    mech = FullTreeRandomizer(n, (D,), 1.0, batch_shape=(R, A))
    ana = HonakerAnalyzer(n, (D,), batch_shape=(R,))
    rng = np.random.default_rng(5)
    got_nodes = {r: [] for r in range(R)}
    got_prefix = {r: [] for r in range(R)}
    for step, runs in enumerate(schedule):
        j, nodes, z = mech.release(data[step, runs], rng, runs=runs, return_noise=True)
        assert nodes.shape == (len(runs), A, mech.kappa, D)
        pref = ana.update(j, nodes.sum(axis=1), runs=runs)
        for i, r in enumerate(runs):
            got_nodes[r].append((data[step, r], z[i]))
            got_prefix[r].append(pref[i])
    # with σ = 0 the nodes are the true node sums, per run, whatever the schedule
    mech0 = FullTreeRandomizer(n, (D,), 0.0, batch_shape=(R, A))
    ana0 = HonakerAnalyzer(n, (D,), batch_shape=(R,))
    seen = {r: [] for r in range(R)}
    for step, runs in enumerate(schedule):
        j, nodes = mech0.release(data[step, runs], rng, runs=runs)
        pref = ana0.update(j, nodes.sum(axis=1), runs=runs)
        for i, r in enumerate(runs):
            seen[r].append(data[step, r].sum(axis=0))
            np.testing.assert_allclose(pref[i], np.sum(seen[r], axis=0), atol=1e-12)
            k = len(seen[r])
            for level in range(mech0.kappa):
                want = np.sum(seen[r][k - 2**level :], axis=0) if level <= (k & -k).bit_length() - 1 else 0.0
                np.testing.assert_allclose(nodes[i].sum(axis=0)[level], want, atol=1e-12)
    # with noise: each run's prefix is the lockstep estimate from that run's own noisy nodes
    for r in range(R):
        solo = HonakerAnalyzer(n, (D,))
        for k, ((x, z), p) in enumerate(zip(got_nodes[r], got_prefix[r]), start=1):
            truth = np.zeros((mech.kappa, D))
            for level in range((k & -k).bit_length()):
                truth[level] = sum(got_nodes[r][s][0].sum(axis=0) for s in range(k - 2**level, k))
            noisy = truth + z.sum(axis=0)
            np.testing.assert_allclose(solo.update((k & -k).bit_length() - 1, noisy), p, atol=1e-10)


def test_released_prefixes_are_unbiased_with_the_derived_variance():
    """Central mechanism, R = 20 000 independent runs, n = 12 steps, σ = 1.7: per step k, (1) the
    mean error is 0 (z-test against the derived standard deviation, Bonferroni over n); (2) the
    sum of squared errors over σ² v(k) is χ²_R (two-sided, Bonferroni over n), v(k) the written-out
    Σ_{bits j} 2^j/(2^{j+1} − 1).  False-alarm rate ≤ 2·ALPHA.  The derived variance is strictly
    below the plain tree's popcount(k) σ² at every k ≥ 2, and the measured one is too: the plain
    tree's variance lies above the χ² interval wherever they differ by more than 10 %."""
    n, R, sigma = 12, 20_000, 1.7
    mech = HonakerTreeMechanism(n, (1,), sigma, batch_shape=(R,))
    rng = np.random.default_rng(11)
    x = np.random.default_rng(3).uniform(-1, 1, (n, R, 1))
    e = np.stack([mech.step(x[t], rng)[:, 0] for t in range(n)]) - np.cumsum(x[:, :, 0], axis=0)  # (n, R)
    var = np.array([sigma**2 * _formula(k) for k in range(1, n + 1)])
    zq = stats.norm.isf(ALPHA / (2 * n))
    assert np.all(np.abs(e.mean(axis=1)) / np.sqrt(var / R) < zq)
    ss = np.sum(e**2, axis=1) / var
    lo, hi = stats.chi2.ppf(ALPHA / (2 * n), R), stats.chi2.isf(ALPHA / (2 * n), R)
    assert np.all((ss > lo) & (ss < hi)), ss / R
    tree = np.array([sigma**2 * bin(k).count("1") for k in range(1, n + 1)])
    assert np.all(var[1:] < tree[1:]) and var[0] == pytest.approx(tree[0])
    far = tree > 1.1 * var
    assert far.sum() >= n - 3 and np.all(np.sum(e**2, axis=1)[far] / tree[far] < lo)


def test_sensitivity_one_released_node_per_level():
    """Brute force over the full tree's released nodes: element t enters one node per level, so
    the largest column norm² of the node-incidence matrix is κ = ⌊log₂ K⌋ + 1 -- the tree's count,
    reached by element 1 (the accounting of the tree applies unchanged)."""
    for K in (1, 2, 5, 8, 13, 16, 31):
        H = _incidence(K)
        cols = (H**2).sum(axis=0)
        kappa = int(math.floor(math.log2(K))) + 1
        assert cols.max() == kappa and cols[0] == kappa
        assert FullTreeRandomizer(K, (1,), 1.0).kappa == kappa
        # every row is a dyadic node: one node per (level, index) closing by K
        assert len({(lvl, b) for lvl, _, b in _released_nodes(K)}) == H.shape[0]


@pytest.mark.parametrize("names", [("silo-ldp-honaker", "silo-ldp"), ("central-honaker", "central")])
def test_protocols_release_the_honaker_estimate_at_the_trees_calibration(names):
    """At equal (ε, δ) and calibration the full tree's σ₀ is the tree's (a record enters one node
    per level); the stated prefix variance is M σ₀² (silo) or σ₀² (central) times the written
    formula, below the tree's at every k ≥ 2; the accounting spends the target; the measured
    variance of the prefix at every batch over 3000 runs matches the statement (χ² two-sided,
    Bonferroni over K, false-alarm ALPHA)."""
    from fedbandit.protocols import create

    name, tree_name = names
    M, d, K, Bs, R = 3, 2, 8, 2, 3000
    setting = dict(n_agents=M, dim=d, n_batches=K, batch_size=Bs)
    p = create(name, epsilon=1.0, delta=1e-5).configure(**setting)
    t = create(tree_name, epsilon=1.0, delta=1e-5).configure(**setting)
    assert p.sigma0 == t.sigma0 and p.accounting().status == "verified"
    assert p.accounting().epsilon == pytest.approx(t.accounting().epsilon, rel=1e-12)
    parties = M if name.startswith("silo") else 1
    stated = np.array([p.prefix_noise_variance(k) for k in range(1, K + 1)])
    np.testing.assert_allclose(stated, [parties * p.sigma0**2 * _formula(k) for k in range(1, K + 1)], rtol=1e-12)
    assert np.all(stated[1:] < [t.prefix_noise_variance(k) for k in range(2, K + 1)])
    assert p.server_noise_std() ** 2 == pytest.approx(stated.max(), rel=1e-12)
    p.reset(n_runs=R, rng=np.random.default_rng(2))
    rng = np.random.default_rng(4)
    tb = np.zeros((R, d))
    lo, hi = stats.chi2.ppf(ALPHA / (2 * K), R * d), stats.chi2.isf(ALPHA / (2 * K), R * d)
    for k in range(K):
        b = rng.uniform(-1, 1, (R, M, d))
        ub, _ = p.synchronize(b, np.zeros((R, M, d, d)))
        tb += b.sum(axis=1)
        assert lo < np.sum((ub - tb) ** 2) / stated[k] < hi, k
    # the parties send every node closing at k: Σ_k (ν(k) + 1) = 2K − 1 node vectors of D floats each, M parties
    D = d + d * (d + 1) // 2
    assert p.communication.payload == M * D * (2 * K - 1 if name.startswith("silo") else K)


def test_draws_go_through_the_planted_noise_site():
    """The power checks mutate the code through the "tree" site: inside planted_noise(f) the
    released noise is f times the noise of the same draws outside it."""
    from fedbandit.audit import planted_noise

    def noise(factor=None):
        m = FullTreeRandomizer(6, (2,), 1.3, batch_shape=(2,))
        rng = np.random.default_rng(8)
        if factor is None:
            return np.stack([m.release(np.ones((2, 2)), rng, return_noise=True)[2] for _ in range(6)])
        with planted_noise(factor, sites=("tree",)):
            return np.stack([m.release(np.ones((2, 2)), rng, return_noise=True)[2] for _ in range(6)])

    base = noise()
    assert np.count_nonzero(base) == 2 * 2 * (1 + 2 + 1 + 3 + 1 + 2)  # ν(k) + 1 released levels at k = 1..6
    np.testing.assert_allclose(noise(0.25), 0.25 * base, rtol=1e-12)


def _honaker_pair_specs():
    from fedbandit.audit.end_to_end import pair_end_to_end_specs

    return [s for s in pair_end_to_end_specs() if "-honaker" in s.protocol]


@pytest.mark.parametrize("spec", _honaker_pair_specs(), ids=lambda s: s.name)
def test_every_learner_pair_of_the_honaker_protocols_audits_below_its_claim_with_power(spec):
    """The assembled end-to-end audits of the full-tree protocols with the other learners (the
    super agent, FedUCB's adaptive schedule -- per-run steps --, the concurrent LinUCB):
    Clopper–Pearson lower bounds at 99 % (false alarm ≤ 1 % per audit, fixed seed) at or below
    the claim, and above it for the power check's noise cut."""
    import warnings

    from fedbandit.audit import audit_end_to_end

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rep = audit_end_to_end(spec, 6000, rng=np.random.default_rng(3), confidence=0.99)
    assert rep.status == "verified" and rep.consistent, (rep.name, rep.epsilon_lower, rep.claimed_epsilon)
    assert rep.power_shown, (rep.name, rep.broken_result.epsilon_lower, rep.claimed_epsilon)


def test_bad_inputs_raise_naming_the_parameter():
    from fedbandit.protocols import Shuffler, StatisticsProtocol
    from fedbandit.protocols.statistics import GaussianFullTree, HonakerPrefix

    with pytest.raises(ValueError, match="sigma0"):
        FullTreeRandomizer(4, (1,), -1.0)
    with pytest.raises(ValueError, match="level"):
        honaker_level_variance(-1)
    with pytest.raises(ValueError, match="calibration"):
        GaussianFullTree("amplification-authors")
    m = FullTreeRandomizer(2, (1,), 1.0)
    m.release(np.zeros(1), np.random.default_rng(0))
    m.release(np.zeros(1), np.random.default_rng(0))
    with pytest.raises(ValueError, match="n_steps"):
        m.release(np.zeros(1), np.random.default_rng(0))
    with pytest.raises(ValueError, match="gamma"):
        FullTreeRandomizer(2, (2,), 1.0).release(np.zeros(3), np.random.default_rng(0))
    with pytest.raises(ValueError, match="j must be"):
        HonakerAnalyzer(4, (1,)).update(1, np.zeros((3, 1)))
    p = StatisticsProtocol(GaussianFullTree(), Shuffler(), HonakerPrefix(), name="x", epsilon=1.0, delta=1e-5)
    with pytest.raises(ValueError, match="no shuffle accounting"):
        p.configure(n_agents=3, dim=2, n_batches=4, batch_size=2)


def test_state_held_per_randomizer():
    """The memory the chapter compares, from the randomizers' own arrays (written out): the tree and the
    full tree κ p-sums; the dense square root its n draws and the exact prefix; the banded one b − 1
    w's, their sum and the prefix -- independent of the batch axes."""
    from fedbandit.mechanisms.matrix_factorization import BandedSqrtRandomizer, SqrtToeplitzRandomizer
    from fedbandit.mechanisms.tree import TreeAnalyzer, TreeRandomizer

    for n, b in ((400, 4), (13, 20)):
        kappa = int(math.floor(math.log2(n))) + 1
        for batch in ((), (2, 3)):
            assert TreeRandomizer(n, (5,), 1.0, batch_shape=batch).state_elements == kappa
            assert FullTreeRandomizer(n, (5,), 1.0, batch_shape=batch).state_elements == kappa
            assert HonakerAnalyzer(n, (5,), batch_shape=batch).state_elements == kappa
            assert TreeAnalyzer(n, (5,), batch_shape=batch).state_elements == kappa
            assert SqrtToeplitzRandomizer(n, (5,), 1.0, batch_shape=batch).state_elements == n + 1
            assert BandedSqrtRandomizer(n, (5,), 1.0, b, batch_shape=batch).state_elements == min(b, n) + 1
