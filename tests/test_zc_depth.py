"""Tests of the pieces chapter 2 uses at the paper's full depth (Zhou & Chowdhury 2023).

The batch-at-once scoring of the private learner and the document-table path (same decisions as
the round-by-round core), the Gram-noise symmetrization option, the authors' vector-sum noise and
λ, and the amplification-lemma check (exact worst case, Monte Carlo, group-privacy route).  Each
check is shown to fail on a deliberately broken variant.
"""

import math

import numpy as np
import pytest

from fedbandit.accounting.amplification import (
    gaussian_epsilon_exact,
    group_privacy_route_epsilon,
    shuffled_gaussian_epsilon_far,
    shuffled_gaussian_epsilon_mc,
    zc_lemma_sigma0,
)
from fedbandit.accounting.calibration import (
    authors_vector_sum_constant,
    authors_vector_sum_lambda_sigma,
    authors_vector_sum_noise,
)
from fedbandit.envs.linear import RealDataLinearEnv
from fedbandit.learners import FixedBatchFedLinUCB
from fedbandit.learners.linucb import (
    TIE_TOL,
    select_arms,
    select_from_table,
    serve_from_statistics,
    table_products,
    table_scores,
    weighted_upper,
)
from fedbandit.protocols import create
from fedbandit.theory.linear import regularizer_lambda


def _spd_inv(rng, R, d):
    A = rng.standard_normal((R, d, d))
    return np.linalg.inv(A @ A.transpose(0, 2, 1) + d * np.eye(d))


@pytest.mark.parametrize("shared", [True, False])
@pytest.mark.parametrize("with_mask", [False, True])
def test_serve_from_statistics_matches_select_arms(shared, with_mask):
    rng = np.random.default_rng(3)
    n, R, M, K, d = 5, 4, 3, 7, 4
    X = rng.standard_normal((n, 1 if shared else R, M, K, d))
    X[:, :, :, 1] = X[:, :, :, 0]  # exact ties: the lowest index must win
    theta = rng.standard_normal((R, d))
    v_inv = _spd_inv(rng, R, d)
    betas = rng.random(n) + 0.5
    mask = rng.random((n, X.shape[1], M, K)) > 0.2 if with_mask else None
    if mask is not None:
        mask[..., 0] = True
    got = serve_from_statistics(X, theta, v_inv, betas, mask)
    for s in range(n):
        want = select_arms(X[s], np.broadcast_to(theta[:, None], (R, M, d)), np.broadcast_to(v_inv[:, None], (R, M, d, d)),
                           betas[s], None if mask is None else mask[s])
        np.testing.assert_array_equal(got[s], want)
    assert not np.any(got == 1)  # arm 1 ties arm 0 exactly and never wins


@pytest.mark.parametrize("with_mask", [False, True])
def test_serve_from_statistics_clips_negative_forms_like_select_arms(with_mask):
    # A noisy W̃_syn makes V indefinite: some x_kᵀ V⁻¹ x_k < 0, whose width is clipped to 0 (score = ⟨x, θ̂⟩).
    # The shared-contexts path takes the root unclipped (NaN) and repairs those rows; it must choose exactly as
    # select_arms, which clips first, for positive, zero and negative radii.
    rng = np.random.default_rng(11)
    n, R, M, K, d = 6, 5, 4, 9, 3
    X = rng.standard_normal((n, 1, M, K, d))
    theta = rng.standard_normal((R, d))
    A = rng.standard_normal((R, d, d))
    v_inv = (A + A.transpose(0, 2, 1)) / 2  # symmetric, indefinite
    betas = np.array([2.0, 0.5, 0.0, 3.0, -1.0, 1.0])
    mask = rng.random((n, 1, M, K)) > 0.2 if with_mask else None
    if mask is not None:
        mask[..., 0] = True
    quad = np.einsum("nmkd,rde,nmke->nrmk", X[:, 0], v_inv, X[:, 0])
    assert (quad < 0).mean() > 0.2  # the case under test occurs often
    got = serve_from_statistics(X, theta, v_inv, betas, mask)
    for s in range(n):
        want = select_arms(X[s], np.broadcast_to(theta[:, None], (R, M, d)), np.broadcast_to(v_inv[:, None], (R, M, d, d)),
                           betas[s], None if mask is None else mask[s])
        np.testing.assert_array_equal(got[s], want)
    # written out: argmax of ⟨x, θ̂⟩ + β √max(xᵀV⁻¹x, 0), masked arms excluded (no exact ties in these draws)
    scores = np.einsum("nmkd,rd->nrmk", X[:, 0], theta) + betas[:, None, None, None] * np.sqrt(np.maximum(quad, 0))
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    np.testing.assert_array_equal(got, scores.argmax(axis=-1))
    # and the repair matters: leaving the NaN scores in would choose otherwise
    unrepaired = np.einsum("nmkd,rd->nrmk", X[:, 0], theta) + betas[:, None, None, None] * np.sqrt(
        np.where(quad < 0, np.nan, quad))
    assert not np.array_equal(got, np.nan_to_num(unrepaired, nan=np.inf).argmax(axis=-1))


def test_serve_check_can_fail_without_the_off_diagonal_weight():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((20, 1, 5, 30, 4))
    theta, v_inv = rng.standard_normal((3, 4)) * 0.01, _spd_inv(rng, 3, 4)
    good = serve_from_statistics(X, theta, v_inv, np.full(20, 5.0))
    # the broken quadratic form: the upper triangle without doubling the off-diagonal terms
    iu, ju = np.triu_indices(4)
    broken_q = np.einsum("nrmkq,rq->nrmk", X[..., iu] * X[..., ju], v_inv[:, iu, ju])
    scores = np.einsum("nrmkd,rd->nrmk", np.broadcast_to(X, (20, 3, 5, 30, 4)), theta) + 5.0 * np.sqrt(np.maximum(broken_q, 0))
    assert not np.array_equal(good, scores.argmax(axis=-1))
    assert np.allclose(weighted_upper(v_inv)[:, 1], 2 * v_inv[:, 0, 1])


def test_table_scores_and_selection_match_features():
    rng = np.random.default_rng(1)
    N, d, R, n, M, K = 40, 5, 3, 4, 2, 6
    table = rng.standard_normal((N, d))
    theta, v_inv = rng.standard_normal((R, d)), _spd_inv(rng, R, d)
    ids = rng.integers(0, N, (n, R, M, K))
    mask = rng.random((n, R, M, K)) > 0.3
    mask[..., 0] = True
    betas = rng.random(n)
    for products in (None, table_products(table)):
        lin, width = table_scores(table, theta, v_inv, products)
        got = select_from_table(lin, width, ids, betas, mask)
        want = serve_from_statistics(table[ids], theta, v_inv, betas, mask)
        np.testing.assert_array_equal(got, want)
    with pytest.raises(ValueError, match="betas"):
        select_from_table(lin, width, ids, betas[:2], mask)


@pytest.mark.parametrize("R", [1, 7])
def test_table_scores_are_the_written_out_forms(R):
    """⟨x, θ̂_r⟩ and √max(0, xᵀ V_r⁻¹ x) of every row and run, summed entry by entry here, both ways (run by
    run from the table, and one product with table_products) and with an indefinite V⁻¹ (a noisy Gram), whose
    negative forms are clipped at 0."""
    rng = np.random.default_rng(7)
    N, d = 30, 4
    table = rng.standard_normal((N, d))
    theta = rng.standard_normal((R, d))
    v_inv = rng.standard_normal((R, d, d))
    v_inv = v_inv + v_inv.transpose(0, 2, 1)  # symmetric, indefinite
    lin_want, width_want = np.zeros((R, N)), np.zeros((R, N))
    for r in range(R):
        for i in range(N):
            x = table[i]
            lin_want[r, i] = sum(x[a] * theta[r, a] for a in range(d))
            form = sum(x[a] * v_inv[r, a, b] * x[b] for a in range(d) for b in range(d))
            width_want[r, i] = math.sqrt(max(form, 0.0))
    assert (width_want == 0).any() and (width_want > 0).any()  # both kinds of rows occur
    for products in (None, table_products(table)):
        lin, width = table_scores(table, theta, v_inv, products)
        np.testing.assert_allclose(lin, lin_want, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(width, width_want, rtol=1e-9, atol=1e-9)


def test_select_from_table_equals_the_flattened_gather():
    """select_from_table (one run at a time) against the plain computation it replaced: every arm's
    score gathered from the flattened (R·N) tables at once, radius times width plus the linear term,
    padded arms at −inf, the tie rule over the arms; bit for bit, shared (Rc = 1) and per-run ids,
    ties included (repeated rows)."""
    rng = np.random.default_rng(3)
    N, R, n, M, K = 30, 4, 5, 3, 7
    lin, width = rng.standard_normal((R, N)), rng.random((R, N))
    lin[:, 1::3], width[:, 1::3] = lin[:, ::3], width[:, ::3]  # tied rows
    betas = rng.random(n)
    for Rc in (1, R):
        ids = rng.integers(0, N, (n, Rc, M, K))
        mask = rng.random((n, Rc, M, K)) > 0.3
        mask[..., 0] = True
        for m in (None, mask):
            flat = np.broadcast_to(ids, (n, R, M, K)) + N * np.arange(R).reshape(1, R, 1, 1)
            scores = np.take(width.reshape(-1), flat) * betas[:, None, None, None] + np.take(lin.reshape(-1), flat)
            if m is not None:
                scores = np.where(np.broadcast_to(m, scores.shape), scores, -np.inf)
            best = scores.max(axis=3, keepdims=True)
            want = (scores >= best - TIE_TOL * np.maximum(1.0, np.abs(best))).argmax(axis=3)
            np.testing.assert_array_equal(select_from_table(lin, width, ids, betas, m), want)


def _real_env(n_runs=2, seed=5):
    rng = np.random.default_rng(0)
    inst = {"features": np.abs(rng.standard_normal((80, 6))) + 0.01, "query": np.sort(np.r_[np.arange(12), rng.integers(0, 12, 68)]),
            "theta": rng.standard_normal(6) * 0.3}
    return RealDataLinearEnv(inst, n_agents=3, n_runs=n_runs, seed=seed, block_size=5)


def test_real_env_lazy_features_are_the_table_rows():
    env = _real_env()
    b = env.block(0)
    assert b._features is None
    f = b.features
    np.testing.assert_array_equal(f[b.mask], env.arm_features[b.arm_ids][b.mask])
    assert np.all(f[~b.mask] == 0.0)


class _WithoutTable:
    """The same environment with the table hidden: the learner scores every arm of every round."""

    def __init__(self, env):
        self._env = env
        self.n_runs, self.n_agents, self.dim = env.n_runs, env.n_agents, env.dim

    def iter_blocks(self, horizon):
        from dataclasses import replace

        for b in self._env.iter_blocks(horizon):
            yield replace(b, _features=b.features, arm_ids=None, table=None)


def test_table_path_makes_the_same_decisions_as_the_feature_path():
    env = _real_env()
    learner = FixedBatchFedLinUCB(create("silo-ldp", epsilon=1.0, delta=0.1), horizon=40, batch_size=4, n_agents=3, dim=6,
                                  reward_bound=None, beta_scale=0.1)
    a = learner.run(env, np.random.default_rng(2), record_arms=True)
    b = learner.run(_WithoutTable(_real_env()), np.random.default_rng(2), record_arms=True)
    np.testing.assert_array_equal(a.extras["arms"], b.extras["arms"])
    np.testing.assert_array_equal(a.regret, b.regret)


@pytest.mark.parametrize("name", ["silo-ldp", "central"])
def test_gram_noise_average_scales_only_the_off_diagonal_noise(name):
    out = {}
    for g in ("mirror", "average"):
        proto = create(name, epsilon=1.0, delta=0.1, gram_noise=g)
        learner = FixedBatchFedLinUCB(proto, horizon=8, batch_size=8, n_agents=3, dim=4)
        learner.protocol.reset(n_runs=2, rng=np.random.default_rng(0))
        bias = np.zeros((2, 3, 4))
        gram = np.zeros((2, 3, 4, 4))
        out[g] = learner.protocol.synchronize(bias, gram)  # zero data: the output is the noise
        assert learner.protocol.accounting().as_dict() == FixedBatchFedLinUCB(
            create(name, epsilon=1.0, delta=0.1), horizon=8, batch_size=8, n_agents=3, dim=4).protocol.accounting().as_dict()
    (bm, gm), (ba, ga) = out["mirror"], out["average"]
    np.testing.assert_array_equal(bm, ba)
    diag = np.eye(4, dtype=bool)
    np.testing.assert_array_equal(gm[..., diag], ga[..., diag])
    np.testing.assert_allclose(ga[..., ~diag], gm[..., ~diag] / math.sqrt(2), rtol=1e-12)
    assert not np.allclose(ga, gm)  # the check can fail: the two differ off the diagonal
    np.testing.assert_array_equal(ga, np.swapaxes(ga, -1, -2))
    with pytest.raises(ValueError, match="gram_noise"):
        create(name, epsilon=1.0, delta=0.1, gram_noise="halve")


def test_authors_vector_sum_noise_and_lambda():
    # The authors' code at their Fig. 2b setting: per-coordinate node noise 14.96, λ 4260.
    assert authors_vector_sum_noise(0.2, 0.1, 10) == pytest.approx(14.9557, rel=1e-4)
    sigma = authors_vector_sum_lambda_sigma(0.2, 0.1, 400, 10)
    assert regularizer_lambda(sigma, 10, 400, 0.01, lam_min=10) == pytest.approx(4259.3, rel=1e-4)
    assert authors_vector_sum_constant(0.1, 10, 65) == pytest.approx((math.log(1000) / (2 * math.log(4 * 65**2 / 0.1))) ** 2)
    p = FixedBatchFedLinUCB(create("sdp-vector-sum", epsilon=0.2, delta=0.1, split="none", noise="authors"), horizon=10_000,
                            batch_size=25, n_agents=100, dim=10).protocol
    assert [m.noise_std() for m in p.randomizer.levels] == pytest.approx([14.9557] * 9, rel=1e-3)
    a = p.accounting()
    assert a.status == "unproven" and "not proven private" in a.notes
    eps_ar, eps_rep = p.randomizer.gaussian_approx_epsilon(), p.randomizer.gaussian_approx_epsilon("replace")
    mu = 3 * math.sqrt(2) / p.randomizer.levels[0].noise_std()
    assert eps_ar == pytest.approx(gaussian_epsilon_exact(mu, 0.1), rel=1e-3) and eps_rep > eps_ar
    # the check can fail: the theorem's constant is covered ("claimed"), and ten times the noise is not the authors'
    q = FixedBatchFedLinUCB(create("sdp-vector-sum", epsilon=0.2, delta=0.1), horizon=10_000, batch_size=25, n_agents=100,
                            dim=10).protocol
    assert q.accounting().status == "claimed"
    assert q.randomizer.levels[0].noise_std() > 10 * p.randomizer.levels[0].noise_std()


def test_lemma_sigma0_formulas():
    e, dl, M, n = 0.2, 0.1, 100, 64
    assert zc_lemma_sigma0(e, dl, M, n) == pytest.approx(
        math.sqrt(math.log(1 / dl) * math.log1p(1 / (n * dl)) * math.log(M / dl)) / (e * math.sqrt(M)))
    assert zc_lemma_sigma0(e, dl, M, n, variant="ideal") == pytest.approx(math.sqrt(8 * (math.log(2 / dl) + e) / M) / e)
    with pytest.raises(ValueError, match="variant"):
        zc_lemma_sigma0(e, dl, M, n, variant="paper")
    with pytest.raises(ValueError, match="n_records"):
        zc_lemma_sigma0(e, dl, M, 0)


def test_shuffled_gaussian_far_pair_is_the_unamplified_gaussian_and_clones_amplify():
    s0, M, delta = 0.9, 50, 1e-3
    far = shuffled_gaussian_epsilon_far(s0, delta)
    assert far == pytest.approx(gaussian_epsilon_exact(1 / s0, delta))
    mc_far = shuffled_gaussian_epsilon_mc(s0, M, 60.0, delta, n_samples=20_000, rng=np.random.default_rng(0))
    assert abs(mc_far - far) < 0.1 * far
    # the check can fail: with the other agents' sums equal to the target's (clones) the shuffle hides it
    mc_clones = shuffled_gaussian_epsilon_mc(s0, M, 0.0, delta, n_samples=20_000, rng=np.random.default_rng(0))
    assert mc_clones < 0.5 * far
    # one agent alone: nothing to hide among, the Monte Carlo curve is the Gaussian's
    assert shuffled_gaussian_epsilon_mc(s0, 1, 0.0, delta, n_samples=50_000, rng=np.random.default_rng(1)) == pytest.approx(far, rel=0.1)


def test_group_privacy_route_is_an_upper_bound_that_degrades_with_n():
    s0, M, delta = 2.0, 100, 0.1
    e1, e0 = group_privacy_route_epsilon(s0, 1, M, delta)
    assert e1 <= e0 and math.isfinite(e1)
    assert e1 >= shuffled_gaussian_epsilon_mc(s0, M, 1.0, delta, n_samples=10_000, rng=np.random.default_rng(0)) - 0.02
    assert not math.isfinite(group_privacy_route_epsilon(s0, 32, M, delta)[0])
