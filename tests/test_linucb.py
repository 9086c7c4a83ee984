"""Tests of the vectorized LinUCB core (fedbandit.learners.linucb)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedbandit.learners.linucb import (
    feature_products,
    gather_played,
    regularized_inverse,
    select_arms,
    sherman_morrison_update,
    ucb_scores,
)


def _rows_keep_their_floats() -> bool:
    """Whether BLAS computes a GEMM row the same whatever the rows around it: OpenBLAS's Haswell kernels
    (also chosen on AVX2 Zen cores), on which the padded products are established bit for bit. Other
    kernels may round a remainder block differently; there the padded scores are checked to rounding."""
    from threadpoolctl import threadpool_info

    archs = {i.get("architecture") for i in threadpool_info() if i.get("user_api") == "blas"}
    return bool(archs) and archs <= {"Haswell", "Zen"} and all(
        i.get("internal_api") == "openblas" for i in threadpool_info() if i.get("user_api") == "blas")


def _spd(rng, shape, d):
    A = rng.standard_normal(shape + (d, d))
    return A @ np.swapaxes(A, -1, -2) + d * np.eye(d)


def _loop_scores(X, theta, v_inv, beta):
    R, M, d = theta.shape
    K = X.shape[2]
    out = np.zeros((R, M, K))
    for r in range(R):
        for m in range(M):
            for k in range(K):
                x = X[r if X.shape[0] > 1 else 0, m, k]
                out[r, m, k] = x @ theta[r, m] + beta * np.sqrt(max(x @ v_inv[r, m] @ x, 0.0))
    return out


@settings(max_examples=30, deadline=None)
@given(r=st.integers(1, 4), m=st.integers(1, 3), k=st.integers(1, 7), d=st.integers(1, 5), shared=st.booleans(), seed=st.integers(0, 10**6))
def test_scores_match_loop_both_paths(r, m, k, d, shared, seed):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((1 if shared else r, m, k, d))
    theta = rng.standard_normal((r, m, d))
    v_inv = np.linalg.inv(_spd(rng, (r, m), d))
    s = ucb_scores(X, theta, v_inv, 0.7)
    np.testing.assert_allclose(s, _loop_scores(X, theta, v_inv, 0.7), rtol=1e-10, atol=1e-12)


def test_shared_and_broadcast_paths_agree():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((1, 3, 6, 4))
    theta = rng.standard_normal((5, 3, 4))
    v_inv = np.linalg.inv(_spd(rng, (5, 3), 4))
    beta = rng.random((5, 3))
    a = ucb_scores(X, theta, v_inv, beta)
    b = ucb_scores(np.repeat(X, 5, axis=0), theta, v_inv, beta)
    np.testing.assert_allclose(a, b, rtol=1e-12)


def test_select_arms_ties_and_mask():
    X = np.zeros((1, 1, 4, 2))
    X[0, 0, :, 0] = [1.0, 2.0, 2.0, 3.0]
    theta = np.array([[[1.0, 0.0]]])
    v_inv = np.zeros((1, 1, 2, 2))
    assert select_arms(X, theta, v_inv, 0.0)[0, 0] == 3
    mask = np.array([[[True, True, True, False]]])
    assert select_arms(X, theta, v_inv, 0.0, mask)[0, 0] == 1  # tie 1/2 -> lowest index
    # Scores equal up to rounding count as tied.
    X[0, 0, 2, 0] = 2.0 + 1e-13
    assert select_arms(X, theta, v_inv, 0.0, mask)[0, 0] == 1


def test_negative_quadratic_form_is_clipped():
    X = np.ones((1, 1, 2, 2))
    theta = np.zeros((1, 1, 2))
    v_inv = -np.eye(2)[None, None]
    np.testing.assert_array_equal(ucb_scores(X, theta, v_inv, 1.0), np.zeros((1, 1, 2)))


@settings(max_examples=30, deadline=None)
@given(d=st.integers(1, 6), seed=st.integers(0, 10**6))
def test_sherman_morrison(d, seed):
    rng = np.random.default_rng(seed)
    V = _spd(rng, (2, 3), d)
    x = rng.standard_normal((2, 3, d))
    v_inv = np.linalg.inv(V)
    sherman_morrison_update(v_inv, x)
    np.testing.assert_allclose(v_inv, np.linalg.inv(V + x[..., :, None] * x[..., None, :]), rtol=1e-8, atol=1e-12)


def test_regularized_inverse_and_bad_input():
    rng = np.random.default_rng(0)
    G = _spd(rng, (3,), 4)
    np.testing.assert_allclose(regularized_inverse(G, 2.0), np.linalg.inv(G + 2 * np.eye(4)))
    with pytest.raises(ValueError, match="lam"):
        regularized_inverse(G, 0.0)
    with pytest.raises(ValueError, match="gram"):
        regularized_inverse(np.zeros((3, 4)), 1.0)


def test_feature_products():
    x = np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(feature_products(x), [1, 2, 3, 4, 6, 9])


def test_gather_played():
    a = np.arange(2 * 3 * 4).reshape(2, 3, 4)
    arms = np.array([[0, 1, 2], [3, 2, 1]])
    np.testing.assert_array_equal(gather_played(a, arms), [[0, 5, 10], [15, 18, 21]])
    shared = a[:1]
    np.testing.assert_array_equal(gather_played(shared, arms), [[0, 5, 10], [3, 6, 9]])


def test_shape_errors_name_the_argument():
    theta = np.zeros((2, 3, 4))
    v_inv = np.zeros((2, 3, 4, 4))
    with pytest.raises(ValueError, match="dimension"):
        ucb_scores(np.zeros((2, 3, 5, 5)), theta, v_inv, 1.0)
    with pytest.raises(ValueError, match="agents"):
        ucb_scores(np.zeros((2, 2, 5, 4)), theta, v_inv, 1.0)
    with pytest.raises(ValueError, match="runs"):
        ucb_scores(np.zeros((3, 3, 5, 4)), theta, v_inv, 1.0)
    with pytest.raises(ValueError, match="v_inv"):
        ucb_scores(np.zeros((2, 3, 5, 4)), theta, np.zeros((2, 3, 4, 3)), 1.0)


def test_update_and_gather_shape_errors():
    with pytest.raises(ValueError, match="v_inv"):
        sherman_morrison_update(np.zeros((2, 3, 3)), np.zeros((2, 4)))
    with pytest.raises(ValueError, match="arms"):
        gather_played(np.zeros((1, 2, 3)), np.zeros(2, dtype=int))
    with pytest.raises(ValueError, match="arrays_by_arm"):
        gather_played(np.zeros((1, 3, 3)), np.zeros((2, 2), dtype=int))


@pytest.mark.parametrize("beta", [np.nan, np.inf, -np.inf, np.array([[1.0], [np.nan]])])
def test_ucb_scores_refuse_a_non_finite_beta(beta):
    # a NaN radius made every score NaN (and the arg-max then picked arm 0 silently)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((1, 1, 3, 2))
    theta = rng.standard_normal((2, 1, 2))
    v_inv = np.broadcast_to(np.eye(2), (2, 1, 2, 2)).copy()
    for f in (ucb_scores, select_arms):
        with pytest.raises(ValueError, match="beta"):
            f(X, theta, v_inv, beta)


@pytest.mark.parametrize("rc_shared", [False, True])
@pytest.mark.parametrize("R", [1, 3])
def test_scalar_beta_fast_path_is_bit_identical(R, rc_shared):
    # select_arms/ucb_scores multiply a scalar beta as it is and skip broadcasting features with R runs:
    # the scores must be the very floats of the plain form (beta broadcast to (R, M), features broadcast)
    rng = np.random.default_rng(11)
    M, K, d = 4, 20, 5
    X = rng.standard_normal((1 if rc_shared else R, M, K, d))
    theta = rng.standard_normal((R, M, d))
    v_inv = np.linalg.inv(_spd(rng, (R, M), d))
    for beta in (0.0, 1.3, 7.25):
        plain = np.broadcast_to(X, (R, M, K, d))
        quad = np.maximum(np.einsum("rmkd,rmkd->rmk", np.matmul(plain, v_inv), plain), 0.0)
        want = np.matmul(plain, theta[..., None])[..., 0] + np.full((R, M), beta)[..., None] * np.sqrt(quad)
        got = ucb_scores(X, theta, v_inv, beta)
        assert np.array_equal(got, ucb_scores(X, theta, v_inv, np.full((R, M), beta)))
        if not (rc_shared and R > 1):  # the shared-features GEMM layout rounds differently (tested above)
            assert np.array_equal(got, want)
        arms = select_arms(X, theta, v_inv, beta)
        assert np.array_equal(arms, select_arms(X, theta, v_inv, np.full((R, M), beta)))


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_argmax_with_ties_along_any_axis(axis):
    # _argmax_with_ties skips moveaxis for the last axis: every axis must agree with a plain loop
    from fedbandit.learners.linucb import _argmax_with_ties

    rng = np.random.default_rng(5)
    scores = np.round(rng.standard_normal((3, 4, 6)), 1)  # rounded: many exact ties
    got = _argmax_with_ties(scores, axis, 1e-9)
    moved = np.moveaxis(scores, axis, -1)
    want = np.empty(moved.shape[:-1], dtype=np.int64)
    for idx in np.ndindex(*moved.shape[:-1]):
        row = moved[idx]
        best = row.max()
        want[idx] = np.flatnonzero(row >= best - 1e-9 * max(1.0, abs(best)))[0]
    assert np.array_equal(got, want)


@pytest.mark.parametrize("R", [5, 6, 14])
def test_padded_gemm_rows_give_the_plain_scores(R):
    # With R % 8 == 6 runs the shared-features scoring appends two zero runs to the statistics' operand of its
    # GEMMs (whole kernel blocks: faster) and reads back the first R rows: the scores must be the very floats of
    # the same products taken without padding, and serve_from_statistics must choose as the written-out argmax.
    from fedbandit.learners.linucb import _gemm_rows, serve_from_statistics, weighted_upper

    assert (_gemm_rows(R) != R) == (R % 8 == 6)
    rng = np.random.default_rng(R)
    M, K, d = 3, 40, 5
    X = rng.standard_normal((1, M, K, d))
    theta = rng.standard_normal((R, M, d))
    v_inv = np.linalg.inv(_spd(rng, (R, M), d))
    beta = rng.random((R, M)) + 0.5
    # the plain form of the agents-first path: products of the upper triangle, unpadded GEMMs
    XT = np.ascontiguousarray(X[0].transpose(0, 2, 1))  # (M, d, K)
    PT = np.concatenate([XT[:, i : i + 1] * XT[:, i:] for i in range(d)], axis=1)  # (M, q, K)
    quad = np.matmul(weighted_upper(v_inv.transpose(1, 0, 2, 3)), PT)
    lin = np.matmul(np.ascontiguousarray(theta.transpose(1, 0, 2)), XT)
    want = lin + np.sqrt(np.maximum(quad, 0.0)) * beta.T[:, :, None]
    got = ucb_scores(X, theta, v_inv, beta)
    if _rows_keep_their_floats():
        assert np.array_equal(got, want.transpose(1, 0, 2))
    else:
        np.testing.assert_allclose(got, want.transpose(1, 0, 2), rtol=1e-12, atol=1e-12)
    assert np.array_equal(select_arms(X, theta, v_inv, beta), want.argmax(axis=-1).T)
    # a batch served from one statistics per run: the written-out scores' arg-max (no near ties in these draws)
    n = 4
    Xn = rng.standard_normal((n, 1, M, K, d))
    th, vi, betas = theta[:, 0], v_inv[:, 0], rng.random(n) + 0.5
    scores = np.einsum("nmkd,rd->nrmk", Xn[:, 0], th) + betas[:, None, None, None] * np.sqrt(
        np.maximum(np.einsum("nmkd,rde,nmke->nrmk", Xn[:, 0], vi, Xn[:, 0]), 0.0))
    assert np.array_equal(serve_from_statistics(Xn, th, vi, betas), scores.argmax(axis=-1))
