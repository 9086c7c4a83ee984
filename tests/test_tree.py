"""Tests of the tree-based mechanism (Zhou & Chowdhury, Algorithm 2)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from fedbandit.accounting.zcdp import tree_zcdp
from fedbandit.mechanisms.tree import (
    TreeAnalyzer,
    TreeMechanism,
    TreeRandomizer,
    draw_noise,
    lowest_set_bit,
    prefix_nodes,
    prefix_noise_variance,
    tree_depth,
)


def _membership(n_steps: int) -> np.ndarray:
    """Run a noise-free randomizer on the unit vectors e_1..e_K; row k of the result
    marks which stream elements the p-sum released at step k contains."""
    rnd = TreeRandomizer(n_steps, (n_steps,), 0.0)
    rng = np.random.default_rng(0)
    rows = []
    for k in range(n_steps):
        _, alpha_hat = rnd.release(np.eye(n_steps)[k], rng)
        rows.append(alpha_hat)
    return np.array(rows)


@given(st.integers(min_value=1, max_value=300))
@settings(max_examples=40, deadline=None)
def test_each_item_enters_at_most_kappa_psums(n_steps):
    membership = _membership(n_steps)
    assert set(np.unique(membership)) <= {0.0, 1.0}
    per_item = membership.sum(axis=0)
    assert per_item.max() <= 1 + np.floor(np.log2(n_steps))
    assert tree_depth(n_steps) == 1 + int(np.floor(np.log2(n_steps)))
    # every p-sum is a contiguous dyadic block ending at its own step
    for k in range(1, n_steps + 1):
        j = lowest_set_bit(k)
        np.testing.assert_array_equal(np.flatnonzero(membership[k - 1]), np.arange(k - 2**j, k))


@given(st.integers(min_value=1, max_value=10**6))
def test_each_prefix_uses_at_most_1_plus_log_k_nodes(k):
    nodes = prefix_nodes(k)
    assert len(nodes) <= 1 + np.floor(np.log2(k))
    # the nodes' blocks tile 1..k: sorted from the top level down, each starts where
    # the previous one ended
    end = 0
    for j, i in sorted(nodes, reverse=True):
        assert (i - 1) * 2**j == end
        end = i * 2**j
    assert end == k


@given(
    n_steps=st.integers(1, 40),
    batch=st.lists(st.integers(1, 3), max_size=2),
    d=st.integers(1, 4),
    seed=st.integers(0, 2**32 - 1),
)
@settings(max_examples=40, deadline=None)
def test_noise_free_prefix_sums_are_exact(n_steps, batch, d, seed):
    rng = np.random.default_rng(seed)
    xs = rng.normal(size=(n_steps, *batch, d))
    mech = TreeMechanism(n_steps, (d,), 0.0, batch_shape=tuple(batch))
    for k in range(n_steps):
        np.testing.assert_allclose(mech.step(xs[k], rng), xs[: k + 1].sum(axis=0), atol=1e-10)


class _Distributed:
    """Algorithm 2 of Zhou & Chowdhury with S = identity: one randomizer per (run, agent),
    the server sums the agents' noisy p-sums and one analyzer per run rebuilds the prefix
    (the composition :class:`fedbandit.protocols.statistics.TreePrefix` makes)."""

    def __init__(self, n_steps, item_shape, sigma0, n_agents, runs, **kw):
        self.randomizer = TreeRandomizer(n_steps, item_shape, sigma0, batch_shape=(runs, n_agents), **kw)
        self.analyzer = TreeAnalyzer(n_steps, item_shape, batch_shape=(runs,))

    def step(self, gammas, rng, runs=None):
        j, alpha_hat = self.randomizer.release(gammas, rng, runs=runs)
        return self.analyzer.update(j, alpha_hat.sum(axis=1), runs=runs)


def test_distributed_equals_algorithm_2_loop():
    """Vectorized distributed tree = one randomizer per agent, summed by hand."""
    n_steps, runs, agents, d = 13, 2, 3, 2
    data = np.random.default_rng(1).normal(size=(n_steps, runs, agents, d, d))
    data = data + np.swapaxes(data, -1, -2)  # Gram-like symmetric stream
    vec = _Distributed(n_steps, (d, d), 0.7, agents, runs, symmetric=True)
    rng_vec = np.random.default_rng(5)
    out_vec = [vec.step(data[k], rng_vec) for k in range(n_steps)]
    # plain loop with the same noise draws: one (runs, agents, d, d) draw per step
    rng_loop = np.random.default_rng(5)
    alpha = np.zeros((5, runs, agents, d, d))
    alpha_tilde = np.zeros((5, runs, d, d))
    for k in range(1, n_steps + 1):
        j = lowest_set_bit(k)
        new = alpha[:j].sum(axis=0) + data[k - 1]
        alpha[:j] = 0
        alpha[j] = new
        free = rng_loop.standard_normal((runs, agents, d * (d + 1) // 2)) * 0.7
        z = np.zeros((runs, agents, d, d))
        for r in range(runs):
            for i in range(agents):
                upper = iter(free[r, i])
                for a in range(d):
                    for b in range(a, d):
                        z[r, i, a, b] = z[r, i, b, a] = next(upper)
        released = new + z
        for r in range(runs):
            alpha_tilde[j, r] = sum(released[r, i] for i in range(agents))
        prefix = sum(alpha_tilde[level] for level in range(5) if k >> level & 1)
        np.testing.assert_allclose(out_vec[k - 1], prefix, atol=1e-12)
        np.testing.assert_allclose(out_vec[k - 1], np.swapaxes(out_vec[k - 1], -1, -2))


def test_prefix_error_covariance_matches_theory():
    """Statistical test of the prefix-error covariance.

    With N independent trees, Cov(err_k, err_k') = M σ₀² |nodes(k) ∩ nodes(k')|.  We
    test (a) every prefix variance with a two-sided chi-square test at level 1e-4, and
    (b) every covariance entry with a z-test at level 1e-4; with 16 + 120 tests the
    Bonferroni family-wise false-alarm rate is below 1.4e-2 (the seed is fixed, so the
    test is deterministic; the rate says how unlucky a seed would have to be).
    """
    n_steps, n_runs, agents, sigma0 = 16, 20000, 3, 1.3
    rng = np.random.default_rng(2024)
    mech = _Distributed(n_steps, (1,), sigma0, agents, n_runs)
    errors = np.stack([mech.step(np.zeros((n_runs, agents, 1)), rng)[:, 0] for _ in range(n_steps)], axis=1)
    theory = np.zeros((n_steps, n_steps))
    for a in range(1, n_steps + 1):
        for b in range(1, n_steps + 1):
            theory[a - 1, b - 1] = agents * sigma0**2 * len(set(prefix_nodes(a)) & set(prefix_nodes(b)))
    np.testing.assert_allclose(np.diag(theory), agents * prefix_noise_variance(np.arange(1, 17), sigma0))
    alpha = 1e-4
    for k in range(n_steps):
        stat = np.sum(errors[:, k] ** 2) / theory[k, k]
        lo, hi = stats.chi2.ppf([alpha / 2, 1 - alpha / 2], df=n_runs)
        assert lo < stat < hi, (k, stat / n_runs)
    emp = errors.T @ errors / n_runs
    z_crit = stats.norm.ppf(1 - alpha / 2)
    for a in range(n_steps):
        for b in range(a + 1, n_steps):
            # sd of the product of two jointly Gaussian errors: sqrt(s_aa s_bb + s_ab²)
            sd = np.sqrt((theory[a, a] * theory[b, b] + theory[a, b] ** 2) / n_runs)
            assert abs(emp[a, b] - theory[a, b]) < z_crit * sd, (a, b, emp[a, b], theory[a, b])


def test_laplace_node_noise_variance():
    rng = np.random.default_rng(7)
    mech = TreeMechanism(7, (1,), 0.5, batch_shape=(40000,), noise="laplace")
    errs = np.stack([mech.step(np.zeros((40000, 1)), rng)[:, 0] for _ in range(7)], axis=1)
    # popcount(7) = 3 nodes of variance 2b² = 0.5; tolerance 5 standard errors of the
    # sample variance of a Laplace sum (kurtosis-aware bound, loose by design)
    assert errs[:, 6].var() == pytest.approx(prefix_noise_variance(7, 0.5, "laplace"), rel=0.05)


def test_tree_zcdp():
    assert tree_zcdp(16, 1.0, 1.0) == pytest.approx(5 / 2)
    assert tree_zcdp(15, 2.0, 2.0) == pytest.approx(4 / 2)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: TreeRandomizer(0, (2,), 1.0), "n_steps"),
        (lambda: TreeRandomizer(4, (2,), -1.0), "sigma0"),
        (lambda: TreeRandomizer(4, (2, 3), 1.0, symmetric=True), "symmetric"),
        (lambda: TreeRandomizer(4, (2,), 1.0, noise="cauchy"), "noise"),
        (lambda: TreeRandomizer(4, (0,), 1.0), "item_shape"),
        (lambda: TreeRandomizer(4, (2,), 1.0).release(np.zeros(3), np.random.default_rng(0)), "gamma"),
        (lambda: TreeRandomizer(4, (2,), 1.0).release(np.zeros(2), None), "rng"),
        (lambda: TreeAnalyzer(4, (2,)).update(1, np.zeros(2)), "lowest set bit"),
        (lambda: TreeRandomizer(4, (2,), 1.0, batch_shape=(2,)).release(np.zeros((1, 2)), np.random.default_rng(0),
                                                                        runs=[2]), "runs"),
        (lambda: lowest_set_bit(0), "k"),
        (lambda: prefix_noise_variance(0, 1.0), "k"),
    ],
)
def test_bad_input(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


def test_tree_refuses_steps_past_its_end():
    mech = TreeMechanism(2, (1,), 0.0)
    rng = np.random.default_rng(0)
    mech.step(np.ones(1), rng)
    mech.step(np.ones(1), rng)
    with pytest.raises(ValueError, match="n_steps"):
        mech.step(np.ones(1), rng)


def test_discrete_gaussian_node_noise_is_integer_with_tree_variance():
    """Statistical: discrete Gaussian node noise is integer-valued and its prefix variance
    is popcount(k)·σ² up to the discrete Gaussian's (slightly smaller) variance.

    20,000 draws per k (relative s.e. of a variance ≈ 0.01): a ±6 % band is a 6-s.e.
    test (false-alarm rate < 1e-8 per k).
    """
    rng = np.random.default_rng(3)
    sigma = 3.0
    tree = TreeMechanism(6, (4,), sigma, batch_shape=(5000,), noise="discrete_gaussian")
    for k in range(1, 7):
        out = tree.step(np.zeros((5000, 4)), rng)
        np.testing.assert_array_equal(out, np.round(out))
        assert out.var() == pytest.approx(bin(k).count("1") * sigma**2, rel=0.06)
    with pytest.raises(ValueError, match="symmetric"):
        draw_noise(rng, (2, 2), 1.0, "discrete_gaussian", symmetric=True)


# ----------------------------------------------------------------------------------------
# Per-run steps (runs=): trees of runs that synchronize at different times
# ----------------------------------------------------------------------------------------


@given(
    st.integers(1, 4),
    st.integers(1, 3),
    st.lists(st.lists(st.booleans(), min_size=3, max_size=3), min_size=1, max_size=20),
)
@settings(max_examples=40, deadline=None)
def test_per_run_noise_free_prefix_is_the_running_total(n_agents, d, masks):
    """Whatever steps each run takes, the noise-free prefix is its running total over the agents."""
    R = 3
    rng = np.random.default_rng(0)
    tree = _Distributed(len(masks), (d,), 0.0, n_agents, R)
    total = np.zeros((R, d))
    for mask in masks:
        idx = np.flatnonzero(mask)
        if idx.size == 0:
            continue
        x = rng.standard_normal((idx.size, n_agents, d))
        total[idx] += x.sum(axis=1)
        np.testing.assert_allclose(tree.step(x, rng, runs=idx), total[idx], atol=1e-10)
    np.testing.assert_array_equal(tree.randomizer.steps, np.sum(masks, axis=0))


def test_all_runs_at_different_steps_without_runs():
    """runs=None once the runs are at different steps = runs = every run (each its own step)."""
    a = _Distributed(8, (2,), 0.5, 2, 3)
    b = _Distributed(8, (2,), 0.5, 2, 3)
    ra, rb = np.random.default_rng(4), np.random.default_rng(4)
    x = np.random.default_rng(5).standard_normal((6, 3, 2, 2))
    for tree, rng in ((a, ra), (b, rb)):
        tree.step(x[0, :1], rng, runs=[0])
        tree.step(x[1, 1:], rng, runs=[1, 2])
    for k in range(2, 6):
        np.testing.assert_array_equal(a.step(x[k], ra), b.step(x[k], rb, runs=np.arange(3)))
    np.testing.assert_array_equal(a.randomizer.steps, [5, 5, 5])
    np.testing.assert_array_equal(a.step(x[0], ra), b.step(x[0], rb))  # back in lockstep


def test_a_run_cannot_pass_its_last_step():
    tree = _Distributed(2, (2,), 0.0, 1, 2)
    rng = np.random.default_rng(0)
    for _ in range(2):
        tree.step(np.zeros((1, 1, 2)), rng, runs=[0])
    with pytest.raises(ValueError, match="n_steps"):
        tree.step(np.zeros((1, 1, 2)), rng, runs=[0])
    with pytest.raises(ValueError, match="n_steps"):
        tree.step(np.zeros((2, 1, 2)), rng)  # run 0 is done, run 1 is not
    with pytest.raises(ValueError, match="runs"):
        tree.step(np.zeros((2, 1, 2)), rng, runs=[1, 0])
