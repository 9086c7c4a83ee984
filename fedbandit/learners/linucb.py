"""The LinUCB core, vectorized over (runs, agents).

LinUCB (Li et al. 2010; OFUL of Abbasi-Yadkori, Pál & Szepesvári 2011): with
V = λI + Σ x xᵀ and θ̂ = V⁻¹ Σ x y, play

    a = argmax_a ⟨x_a, θ̂⟩ + β ‖x_a‖_{V⁻¹}.

This module holds only that core, on arrays with leading axes (runs R, agents M), so that
every federated linear learner of the book (fixed-batch federated LinUCB of Zhou &
Chowdhury 2023, DP20's FedUCB, concurrent-shuffle LinUCB) shares it:

* :func:`regularized_inverse` -- batched (λI + G)⁻¹;
* :func:`sherman_morrison_update` -- (V + x xᵀ)⁻¹ from V⁻¹ in O(d²), used between
  synchronizations so that no d × d inverse is recomputed every round;
* :func:`ucb_scores` / :func:`select_arms` -- optimistic scores and the arg-max over arms;
* :func:`serve_from_statistics` / :func:`table_scores` + :func:`select_from_table` -- the
  arms of many rounds at once when every agent of a run is served from the same statistics
  (the private fixed-batch learner within a batch), from the rounds' features or, when the
  arms are rows of a fixed table (the real-data instance's documents), from the table's
  scores computed once per synchronization.

Contexts shared across runs
---------------------------
When the context array has a run axis of length 1 while the statistics have R > 1 runs
(the environments' ``shared_contexts=True``), ‖x‖²_{V⁻¹} = Σ_{i,j} x_i x_j (V⁻¹)_ij is
computed as one matrix product of the d² feature products (formed once per agent, not
once per run) with the R flattened matrices V⁻¹: per agent an (R × d²) by (d² × K)
product, which BLAS does far faster than R·M small (K × d)(d × d) products.  Both paths give the same scores up to rounding.
The products are taken over the upper triangle only (d(d+1)/2 of them, the off-diagonal ones
weighted 2 through :func:`weighted_upper`), which halves the work of the product.

One set of statistics per run
-----------------------------
When every agent of a run is served from the same V⁻¹ and θ̂ for many rounds (the private
fixed-batch learner serves a whole batch from the last synchronization), the work is one
product per chunk of rounds: the (rounds·agents·arms) × d(d+1)/2 feature products against the
R × d(d+1)/2 weighted matrices, the compute floor of exact scoring (d(d+1)/2 multiply-adds per
arm, agent, round and run).  When the arms are rows of a fixed table of N features
(``RoundBlock.arm_ids``), the scores of all N rows are computed once per synchronization
(N·d² per run instead of B·M·K·d(d+1)/2) and every round gathers its arms' scores.

Ties in the arg-max (up to a relative tolerance, :data:`TIE_TOL`) go to the lowest arm
index, so that decisions do not depend on floating-point rounding.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from fedbandit._validation import check_array, check_float_in_range, check_nonnegative_float, check_positive_float

__all__ = [
    "regularized_inverse",
    "sherman_morrison_update",
    "feature_products",
    "weighted_upper",
    "serve_from_statistics",
    "table_products",
    "table_scores",
    "select_from_table",
    "ucb_scores",
    "select_arms",
    "TIE_TOL",
    "TABLE_DIRECT_RUNS",
    "gather_played",
]


def regularized_inverse(gram, lam: float) -> np.ndarray:
    """(λI + G)⁻¹ for a batch of d × d matrices ``gram`` (any leading axes).

    ``G`` may be a noisy (even indefinite) Gram matrix; the inverse is computed with
    LU (``numpy.linalg.inv``), not Cholesky, so it exists whenever λI + G is nonsingular.
    """
    lam = check_positive_float("lam", lam)
    gram = check_array("gram", gram, finite=False)
    if gram.ndim < 2 or gram.shape[-1] != gram.shape[-2]:
        raise ValueError(f"gram must have shape (..., d, d), got {gram.shape}")
    d = gram.shape[-1]
    return np.linalg.inv(gram + lam * np.eye(d))


def _require_arrays(**arrays) -> None:
    """Cheap type check of the per-round helpers' array arguments (their shapes are checked below)."""
    for name, a in arrays.items():
        if not isinstance(a, np.ndarray) or a.dtype.kind not in "biuf":  # (dtype.kind: ~20x cheaper than issubdtype)
            raise TypeError(f"{name} must be a numeric numpy array, got {type(a).__name__}")


def _float_array(name, value) -> np.ndarray:
    """``value`` as a float array, refused by name if it is not numeric (no copy of a float array, no
    scan of its entries: the per-segment helpers run inside the learners' loops)."""
    if isinstance(value, np.ndarray) and value.dtype == np.float64:
        return value
    if isinstance(value, (str, bytes, dict, set)) or value is None:
        raise TypeError(f"{name} must be a numeric array, got {value!r:.80}")
    try:
        return np.asarray(value, dtype=float)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a numeric array, got {value!r:.80}") from exc


def _check_mask(mask, shape) -> np.ndarray | None:
    """None, or a bool array (rounds, runs or 1, agents, arms) broadcastable to ``shape``."""
    if mask is None:
        return None
    m = mask if isinstance(mask, np.ndarray) else np.asarray(mask)
    if m.dtype != bool:
        raise TypeError(f"mask must be None or a bool array, got dtype {m.dtype}")
    ok = m.ndim == 4 and m.shape[0] == shape[0]
    if ok:
        try:
            ok = np.broadcast_shapes(m.shape, tuple(shape)) == tuple(shape)
        except ValueError:
            ok = False
    if not ok:
        raise ValueError(f"mask must have shape {tuple(shape)} (axis 1 may be 1), got {m.shape}")
    return m


def sherman_morrison_update(v_inv: np.ndarray, x: np.ndarray) -> np.ndarray:
    """In place: V⁻¹ ← (V + x xᵀ)⁻¹ = V⁻¹ − (V⁻¹x)(V⁻¹x)ᵀ / (1 + xᵀV⁻¹x).

    Parameters
    ----------
    v_inv : ndarray, shape (..., d, d)
        Symmetric inverses, updated in place (and returned).
    x : ndarray, shape (..., d)
        One feature vector per matrix.
    """
    _require_arrays(v_inv=v_inv, x=x)
    if x.ndim < 1 or v_inv.shape[:-1] != x.shape or v_inv.shape[-1] != x.shape[-1]:
        raise ValueError(f"v_inv must have shape x.shape + (d,) = {x.shape + x.shape[-1:]}, got {v_inv.shape}")
    z = np.matmul(v_inv, x[..., None])[..., 0]
    denom = 1.0 + np.einsum("...i,...i->...", x, z)
    v_inv -= z[..., :, None] * (z / denom[..., None])[..., None, :]
    return v_inv


def feature_products(features: np.ndarray) -> np.ndarray:
    """Products x_i x_j for i ≤ j along the last axis (row-major upper triangle).

    ``features`` of shape (..., d) gives (..., d(d+1)/2); with the weights 1 (i = j) and
    2 (i < j) on the upper triangle of a symmetric A, ⟨products, w·triu(A)⟩ = xᵀ A x.
    """
    _require_arrays(features=features)
    if features.ndim < 1:
        raise ValueError(f"features must have at least one axis, got shape {features.shape}")
    d = features.shape[-1]
    # d slices instead of fancy indexing: much faster for the (M, K, d) arrays used here.
    return np.concatenate([features[..., i : i + 1] * features[..., i:] for i in range(d)], axis=-1)


def weighted_upper(matrices: np.ndarray) -> np.ndarray:
    """The upper triangle of symmetric ``matrices`` (..., d, d), off-diagonal entries doubled.

    Row-major, the order of :func:`feature_products`: ⟨feature_products(x), weighted_upper(A)⟩ = xᵀ A x
    for symmetric A (for a nearly symmetric A, such as a computed inverse, the quadratic form
    of its upper triangle).
    """
    matrices = _float_array("matrices", matrices)
    if matrices.ndim < 2 or matrices.shape[-1] != matrices.shape[-2]:
        raise ValueError(f"matrices must have shape (..., d, d), got {matrices.shape}")
    d = matrices.shape[-1]
    index, weights = _upper_index(d)
    # take along the flattened last two axes (a copy into C order first): far cheaper than indexing both
    flat = np.take(matrices.reshape(matrices.shape[:-2] + (d * d,)), index, axis=-1)
    flat *= weights
    return flat


@functools.lru_cache(maxsize=64)
def _upper_index(d: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`weighted_upper`'s flat row-major upper-triangle index of a d × d matrix and its weights
    (1 on the diagonal, 2 off it), built once per d (callers score one period at a time)."""
    iu, ju = np.triu_indices(d)
    index, weights = iu * d + ju, np.where(iu == ju, 1.0, 2.0)
    index.flags.writeable = weights.flags.writeable = False  # shared by every call
    return index, weights


def _gemm_rows(rows: int) -> int:
    """The rows to give the statistics' operand of a scoring product: ``rows``, or ``rows + 2`` when
    ``rows % 8 == 6`` (zero rows appended, their results never read).

    OpenBLAS's double GEMM on this book's x86 kernels (Haswell, as on AVX2 Zen cores) takes the
    rows in blocks of 8 and a remainder; a remainder of 6 costs two passes (4 + 2), each about as
    slow as a whole block, so two zero rows make 8k + 6 rows ~30 % cheaper (R = 6 runs: 265 against
    181 µs for one 55 × 5000 product of M = K = 100, d = 10).  Every output element is the same
    dot product, accumulated in the same order, so on those kernels a run's scores are the same
    floats either way (tests/test_linucb.py::test_padded_gemm_rows_give_the_plain_scores); on
    others they are still a function of R, as the padding is.  Other remainders gain nothing, and
    an odd one would move its last row to another kernel: they are left alone.
    """
    return rows + 2 if rows % 8 == 6 else rows


def _padded_rows(a: np.ndarray, rows: int, axis: int) -> np.ndarray:
    """``a`` with zero slices appended along ``axis`` up to ``rows``, C-contiguous (``a`` itself, or its
    contiguous copy, when it has them)."""
    if a.shape[axis] == rows:
        return np.ascontiguousarray(a)
    shape = list(a.shape)
    shape[axis] = rows
    out = np.zeros(shape)
    out[(slice(None),) * (axis % a.ndim) + (slice(0, a.shape[axis]),)] = a
    return out


def _check_shapes(features, theta_hat, v_inv):
    _require_arrays(features=features, theta_hat=theta_hat, v_inv=v_inv)
    if features.ndim != 4:
        raise ValueError(f"features must have shape (runs or 1, agents, arms, d), got {features.shape}")
    if theta_hat.ndim != 3:
        raise ValueError(f"theta_hat must have shape (runs, agents, d), got {theta_hat.shape}")
    R, M, d = theta_hat.shape
    if v_inv.shape != (R, M, d, d):
        raise ValueError(f"v_inv must have shape {(R, M, d, d)}, got {v_inv.shape}")
    Rc, Mf, _, df = features.shape
    if df != d:
        raise ValueError(f"features have dimension {df} but the learner's statistics have dimension {d}")
    if Mf != M:
        raise ValueError(f"features have {Mf} agents but the statistics have {M}")
    if Rc not in (1, R):
        raise ValueError(f"features must have 1 or {R} runs on axis 0, got {Rc}")
    return R, M, d


def _scores(features, theta_hat, v_inv, beta, mask):
    """Scores in the cheapest layout: (scores, agents_first) with scores (M, R, K) if
    ``agents_first`` else (R, M, K)."""
    R, M, d = _check_shapes(features, theta_hat, v_inv)
    try:
        b = np.asarray(beta, dtype=float)
        # a scalar radius multiplies as it is (the same products); an array is checked and broadcast
        beta = b if b.ndim == 0 else np.broadcast_to(b, (R, M))
    except (TypeError, ValueError):
        raise TypeError(f"beta must be a number or an array broadcastable to (runs, agents) = {(R, M)}, "
                        f"got {beta!r:.80}") from None
    if not (math.isfinite(b) if b.ndim == 0 else np.isfinite(b).all()):  # a NaN or infinite radius makes every score NaN or inf
        raise ValueError(f"beta must be finite (a confidence radius in [0, inf)), got {b if b.ndim else float(b)!r:.80}")
    if mask is not None:
        _require_arrays(mask=mask)
        if mask.shape != features.shape[:-1]:
            raise ValueError(f"mask must have shape {features.shape[:-1]} (features without d), got {mask.shape}")
    if features.shape[0] == 1 and R > 1:
        # Layout (M, ·, K) keeps K, the longest axis, contiguous: the d² feature products
        # are then a fast broadcast multiply and both products below are BLAS GEMMs.
        XT = np.ascontiguousarray(features[0].transpose(0, 2, 1))  # (M, d, K)
        K, q = XT.shape[2], d * (d + 1) // 2
        PT = np.empty((M, q, K))  # the products x_i x_j, i <= j (row-major), one multiply per i
        k = 0
        for i in range(d):
            np.multiply(XT[:, i : i + 1, :], XT[:, i:, :], out=PT[:, k : k + d - i, :])
            k += d - i
        Rp = _gemm_rows(R)  # (zero runs appended when that makes the products whole GEMM blocks)
        G = _padded_rows(weighted_upper(v_inv.transpose(1, 0, 2, 3)), Rp, 1)  # (M, Rp, q), agents first
        quad = np.matmul(G, PT)[:, :R]  # (M, R, K): x_kᵀ V⁻¹ x_k, exact for symmetric V⁻¹
        scores = np.matmul(_padded_rows(theta_hat.transpose(1, 0, 2), Rp, 1), XT)[:, :R]  # (M, R, K)
        np.maximum(quad, 0.0, out=quad)
        np.sqrt(quad, out=quad)
        quad *= beta if beta.ndim == 0 else beta.T[:, :, None]
        scores += quad
        if mask is not None:
            scores = np.where(mask[0][:, None, :], scores, -np.inf)
        return scores, True
    X = features if features.shape[0] == R else np.broadcast_to(features, (R,) + features.shape[1:])
    XV = np.matmul(X, v_inv)  # (R, M, K, d)
    quad = np.einsum("rmkd,rmkd->rmk", XV, X)
    scores = np.matmul(X, theta_hat[..., None])[..., 0]
    np.maximum(quad, 0.0, out=quad)
    scores += (beta if beta.ndim == 0 else beta[..., None]) * np.sqrt(quad)
    if mask is not None:
        scores = np.where(np.broadcast_to(mask, (R,) + mask.shape[1:]), scores, -np.inf)
    return scores, False


def ucb_scores(features, theta_hat, v_inv, beta, mask=None) -> np.ndarray:
    """Optimistic scores ⟨x_a, θ̂⟩ + β ‖x_a‖_{V⁻¹} of every arm.

    Parameters
    ----------
    features : ndarray, shape (Rc, M, K, d)
        Arm features; ``Rc`` is R, or 1 when every run sees the same contexts.
    theta_hat : ndarray, shape (R, M, d)
    v_inv : ndarray, shape (R, M, d, d)
        V⁻¹ per run and agent (symmetric).
    beta : float or array broadcastable to (R, M)
        Confidence radius β.
    mask : ndarray of bool, shape (Rc, M, K), optional
        False for padded arms, which get score −inf.

    Returns
    -------
    ndarray, shape (R, M, K)
        Scores (possibly a transposed view).  Negative values of the quadratic form
        (possible when V is a noisy, indefinite matrix) are clipped at 0 before the
        square root.
    """
    scores, agents_first = _scores(features, theta_hat, v_inv, beta, mask)
    return scores.transpose(1, 0, 2) if agents_first else scores


#: Relative tolerance within which UCB scores count as tied (the lowest arm wins; :func:`select_arms`).
TIE_TOL = 1e-9


def select_arms(features, theta_hat, v_inv, beta, mask=None, *, tie_tol: float = TIE_TOL) -> np.ndarray:
    """LinUCB's choice: the arg-max over arms of :func:`ucb_scores`, shape (R, M).

    Scores within ``tie_tol``·max(1, |best|) of the best count as tied and the lowest arm
    index wins.  Exact ties do occur (the synthetic instance's basis arms make many
    scores mathematically equal in the first rounds); without a tolerance, which of them
    wins would depend on floating-point rounding, i.e. on how the scores were computed.
    """
    if type(tie_tol) is not float or not 0.0 <= tie_tol < 1.0:  # (one comparison on the per-round path)
        tie_tol = check_float_in_range("tie_tol", tie_tol, 0.0, 1.0, high_inclusive=False)
    scores, agents_first = _scores(features, theta_hat, v_inv, beta, mask)
    arms = _argmax_with_ties(scores, -1, tie_tol)
    return arms.T if agents_first else arms


def gather_played(arrays_by_arm: np.ndarray, arms: np.ndarray) -> np.ndarray:
    """Pick the played arm's entry: ``arrays_by_arm`` (Rc, M, K, ...) at ``arms`` (R, M).

    Returns shape (R, M, ...); a run axis of length 1 is broadcast.
    """
    _require_arrays(arrays_by_arm=arrays_by_arm)
    arms = np.asarray(arms)
    if arms.ndim != 2 or arms.dtype.kind not in "iu":  # (dtype.kind: ~20x cheaper than issubdtype)
        raise ValueError(f"arms must have shape (runs, agents), got {arms.shape}")
    R, M = arms.shape
    a = arrays_by_arm
    if a.ndim < 3 or a.shape[1] != M or a.shape[0] not in (1, R):
        raise ValueError(f"arrays_by_arm must have shape (1 or {R}, {M}, arms, ...), got {a.shape}")
    if a.shape[0] == 1 and R > 1:
        # Index the shared array directly: (1, M, K, ...) -> (R, M, ...).
        return a[0][np.arange(M)[None, :], arms]
    return a[np.arange(R)[:, None], np.arange(M)[None, :], arms]


#: Columns (agents × arms of one round) scored per product in :func:`serve_from_statistics`, at most:
#: a round's agents are split into equal groups of at most this many columns, so that the feature
#: products (d(d+1)/2 per column) and the R scores of a group stay in cache when M·K is large
#: (measured on a Zen 4 core, 1 MB L2: two groups at M = K = 100, six at M = 300).
SERVE_CHUNK = 5_000


def _argmax_with_ties(scores, axis, tie_tol, nan_fill=None):
    """The lowest index whose score is within ``tie_tol``·max(1, |best|) of the best, along ``axis``.

    The best is found with ``argmax`` (first maximum), and one comparison with the
    threshold picks the lowest index at or above it.  ``nan_fill`` (the shape of
    ``scores``), when given, replaces the NaN scores before the choice: the caller took the
    square root of a negative quadratic form (a noisy, indefinite V) unclipped, and its
    score is then the linear term alone.  ``argmax`` returns a row's first NaN, so the rows
    holding one are found from the best scores alone and only those are rewritten.
    """
    last = axis in (-1, scores.ndim - 1)  # (moveaxis costs ~10 µs per call even when it moves nothing)
    if not last:
        scores = np.moveaxis(scores, axis, -1)
    flat = scores.reshape(-1, scores.shape[-1])
    rows = np.arange(flat.shape[0])
    best = flat[rows, flat.argmax(axis=1)]
    if nan_fill is not None:
        bad = np.flatnonzero(np.isnan(best))
        if bad.size:
            fill = (nan_fill if last else np.moveaxis(nan_fill, axis, -1)).reshape(flat.shape)[bad]
            part = flat[bad]
            np.copyto(part, fill, where=np.isnan(part))
            flat[bad] = part
            best[bad] = part[np.arange(bad.size), part.argmax(axis=1)]
    best -= tie_tol * np.maximum(1.0, np.abs(best))
    return (flat >= best[:, None]).argmax(axis=1).reshape(scores.shape[:-1])


def _check_served(features_shape, theta_hat, v_inv, betas):
    if len(features_shape) != 5:
        raise ValueError(f"features must have shape (rounds, runs or 1, agents, arms, d), got {features_shape}")
    n, Rc, _, _, d = features_shape
    if theta_hat.ndim != 2 or theta_hat.shape[1] != d:
        raise ValueError(f"theta_hat must have shape (runs, {d}), got {theta_hat.shape}")
    R = theta_hat.shape[0]
    if v_inv.shape != (R, d, d):
        raise ValueError(f"v_inv must have shape {(R, d, d)}, got {v_inv.shape}")
    if Rc not in (1, R):
        raise ValueError(f"features must have 1 or {R} runs on axis 1, got {Rc}")
    betas = _float_array("betas", betas)
    if betas.shape != (n,):
        raise ValueError(f"betas must have shape ({n},) (one radius per round), got {betas.shape}")
    return R, betas


def _upper_products_t(xt: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Products x_i x_j (i <= j, row-major) of the columns of ``xt`` (d, n) into ``out`` (d(d+1)/2, n).

    One multiply per row i into a preallocated buffer: much faster than fancy indexing.
    """
    d = xt.shape[0]
    k = 0
    for i in range(d):
        np.multiply(xt[i], xt[i:], out=out[k : k + d - i])
        k += d - i
    return out


def serve_from_statistics(features, theta_hat, v_inv, betas, mask=None, *, tie_tol: float = TIE_TOL) -> np.ndarray:
    """LinUCB's arms for n rounds in which every agent of a run uses the same V⁻¹ and θ̂.

    The decisions of :func:`select_arms` (same scores up to rounding, same tie rule) for
    ``theta_hat`` and ``v_inv`` broadcast over the agents, round by round with radius
    ``betas[s]``, computed in a few large products instead of one small product per
    (round, agent) (see the module notes).

    Parameters
    ----------
    features : ndarray, shape (n, Rc, M, K, d)
        The rounds' arm features; ``Rc`` is R, or 1 when every run sees the same contexts.
    theta_hat : ndarray, shape (R, d)
    v_inv : ndarray, shape (R, d, d)
        Symmetric V⁻¹ per run.
    betas : ndarray, shape (n,)
        β of every round.
    mask : ndarray of bool, shape (n, Rc, M, K), optional
        False for padded arms.

    Returns
    -------
    ndarray of int, shape (n, R, M)
    """
    features = _float_array("features", features)
    theta_hat = _float_array("theta_hat", theta_hat)
    v_inv = _float_array("v_inv", v_inv)
    R, betas = _check_served(features.shape, theta_hat, v_inv, betas)
    n, Rc, M, K, d = features.shape
    mask = _check_mask(mask, (n, R, M, K))
    tie_tol = check_nonnegative_float("tie_tol", tie_tol)
    out = np.empty((n, R, M), dtype=np.intp)
    if Rc == 1:
        # One round at a time, the agents in groups of about SERVE_CHUNK columns: the
        # products, x_kᵀ V⁻¹ x_k and the scores of a group stay in cache.
        Rp = _gemm_rows(R)  # (zero runs appended when that makes the products whole GEMM blocks)
        G = _padded_rows(weighted_upper(v_inv), Rp, 0)  # (Rp, q)
        theta_rows = _padded_rows(theta_hat, Rp, 0)
        G_round = np.empty_like(G)
        n_groups = -(-M * K // SERVE_CHUNK)
        group = -(-M // n_groups)
        width = group * K
        xt_buf, prod_buf = np.empty((d, width)), np.empty((G.shape[1], width))
        quad_buf, lin_buf = np.empty((Rp, width)), np.empty((Rp, width))
        # β‖x‖_{V⁻¹} = √(xᵀ(β²V⁻¹)x) for β ≥ 0: β² goes into the R × q matrix, not the R × w scores.
        # A negative form (a noisy, indefinite V) is not clipped here: its root is NaN and
        # _argmax_with_ties gives it the clipped score, the linear term (two passes fewer).
        with np.errstate(invalid="ignore"):
            for s in range(n):
                beta = betas[s]
                folded = beta >= 0.0
                np.multiply(G, beta * beta if folded else 1.0, out=G_round)
                X = features[s, 0].reshape(M * K, d)
                for a in range(0, M, group):
                    m = min(group, M - a)
                    w = m * K
                    xt = xt_buf[:, :w]
                    np.copyto(xt, X[a * K : (a + m) * K].T)
                    # β √(x_kᵀ V⁻¹ x_k)
                    quad = np.matmul(G_round, _upper_products_t(xt, prod_buf[:, :w]), out=quad_buf[:, :w])[:R]
                    np.sqrt(quad, out=quad)
                    if not folded:
                        quad *= beta
                    lin = np.matmul(theta_rows, xt, out=lin_buf[:, :w])[:R]
                    quad += lin
                    scores = quad.reshape(R, m, K)
                    if mask is not None:
                        scores = np.where(mask[s, 0, a : a + m], scores, -np.inf)
                    out[s, :, a : a + m] = _argmax_with_ties(scores, 2, tie_tol, nan_fill=lin.reshape(R, m, K))
        return out
    step = max(1, SERVE_CHUNK // (M * K))
    for s in range(0, n, step):
        X = features[s : s + step]
        c = X.shape[0]
        Xr = np.moveaxis(X, 1, 0).reshape(R, -1, d)  # (R, c·M·K, d)
        quad = np.einsum("rnd,rnd->rn", np.matmul(Xr, v_inv), Xr)
        scores = np.matmul(Xr, theta_hat[:, :, None])[..., 0]  # (R, c·M·K)
        np.maximum(quad, 0.0, out=quad)
        np.sqrt(quad, out=quad)
        quad = quad.reshape(R, c, M * K)
        quad *= betas[None, s : s + c, None]
        scores += quad.reshape(R, -1)
        scores = scores.reshape(R, c, M, K)
        if mask is not None:
            scores = np.where(np.moveaxis(mask[s : s + c], 1, 0), scores, -np.inf)
        out[s : s + c] = _argmax_with_ties(scores, 3, tie_tol).transpose(1, 0, 2)
    return out


def table_products(table) -> np.ndarray:
    """The upper-triangle products of every row of ``table`` (N, d), transposed: (d(d+1)/2, N).

    Computed once per run for :func:`table_scores` (8·N·d(d+1)/2 bytes).
    """
    table = _float_array("table", table)
    if table.ndim != 2:
        raise ValueError(f"table must have shape (N, d), got {table.shape}")
    xt = np.ascontiguousarray(table.T)
    d = xt.shape[0]
    return _upper_products_t(xt, np.empty((d * (d + 1) // 2, xt.shape[1])))


#: Runs up to which :func:`table_products` is not worth forming for :func:`table_scores`, which then forms each
#: run's quadratic forms from the table itself: the products (N × d(d+1)/2, 132 MB for the MSLR sample's N = 10,000, d = 57)
#: are read from memory at every call whatever the number of runs, while the table (4.6 MB) and a run's
#: d × d matrix stay in cache for its 2·N·d² flops.  Measured per call on the MSLR table, one core of an
#: Intel Xeon with AVX-512 (10.9 GB/s main-memory copy bandwidth, 69 GF/s matrix product), run by run against
#: the products: 10.9 against 19.3 ms at 5 runs, 13.4 against 18.9 at 6, 17.3 against 19.7 at 8, 25.8
#: against 19.4 at 12 (a host with more bandwidth per flop moves the crossing down: 6 keeps a margin).
TABLE_DIRECT_RUNS = 6


def table_scores(table, theta_hat, v_inv, products=None) -> tuple[np.ndarray, np.ndarray]:
    """⟨x, θ̂⟩ and ‖x‖_{V⁻¹} of every row x of a fixed feature table, per run.

    Parameters
    ----------
    table : ndarray, shape (N, d)
    theta_hat : ndarray, shape (R, d)
    v_inv : ndarray, shape (R, d, d)
    products : ndarray, shape (d(d+1)/2, N), optional
        :func:`table_products` (table), when the table is scored many times: the quadratic
        forms are then one (R × d(d+1)/2)(d(d+1)/2 × N) product (worth it for more than
        :data:`TABLE_DIRECT_RUNS` runs).  Without it, run by run from the table: the same values
        up to rounding.

    Returns
    -------
    (lin, width) : ndarrays of shape (R, N)
        Negative quadratic forms (a noisy, indefinite V) are clipped at 0 before the root.
    """
    table = _float_array("table", table)
    theta_hat = _float_array("theta_hat", theta_hat)
    v_inv = _float_array("v_inv", v_inv)
    if table.ndim != 2:
        raise ValueError(f"table must have shape (N, d), got {table.shape}")
    R, _ = _check_served((1, 1, 1, 1, table.shape[1]), theta_hat, v_inv, np.zeros(1))
    if products is not None:
        products = _float_array("products", products)
        q = table.shape[1] * (table.shape[1] + 1) // 2
        if products.shape != (q, table.shape[0]):
            raise ValueError(f"products must have shape {(q, table.shape[0])} (table_products(table)), got {products.shape}")
    lin = theta_hat @ table.T
    if products is None:
        # run by run: (x V⁻¹) · x from the N × d table and a d × d matrix, both in cache
        width = np.empty((R, table.shape[0]))
        xv = np.empty_like(table)
        for r in range(R):
            np.matmul(table, v_inv[r], out=xv)
            xv *= table
            xv.sum(axis=1, out=width[r])
    else:
        width = weighted_upper(v_inv) @ products
    np.maximum(width, 0.0, out=width)
    np.sqrt(width, out=width)
    return lin, width


def select_from_table(lin, width, arm_ids, betas, mask=None, *, tie_tol: float = TIE_TOL) -> np.ndarray:
    """LinUCB's arms for n rounds whose arms are rows of a table scored by :func:`table_scores`.

    Parameters
    ----------
    lin, width : ndarrays of shape (R, N)
    arm_ids : ndarray of int, shape (n, Rc, M, K)
        The table row of every arm (any valid row for padded arms).
    betas : ndarray, shape (n,)
    mask : ndarray of bool, shape (n, Rc, M, K), optional

    Returns
    -------
    ndarray of int, shape (n, R, M)
        The same decisions as :func:`serve_from_statistics` on the rows' features.
    """
    lin = _float_array("lin", lin)
    width = _float_array("width", width)
    if lin.ndim != 2:
        raise ValueError(f"lin must have shape (runs, table rows), got {lin.shape}")
    if width.shape != lin.shape:
        raise ValueError(f"width must have the shape of lin {lin.shape}, got {width.shape}")
    arm_ids = np.asarray(arm_ids)
    if arm_ids.dtype.kind not in "iu":
        raise TypeError(f"arm_ids must be an array of ints, got dtype {arm_ids.dtype}")
    if arm_ids.ndim != 4:
        raise ValueError(f"arm_ids must have shape (rounds, runs or 1, agents, arms), got {arm_ids.shape}")
    R = lin.shape[0]
    n, Rc = arm_ids.shape[:2]
    if Rc not in (1, R):
        raise ValueError(f"arm_ids must have 1 or {R} runs on axis 1, got {Rc}")
    betas = _float_array("betas", betas)
    if betas.shape != (n,):
        raise ValueError(f"betas must have shape ({n},), got {betas.shape}")
    mask = _check_mask(mask, (n, R) + arm_ids.shape[2:])
    tie_tol = check_nonnegative_float("tie_tol", tie_tol)
    # One run at a time: the run's (n, M, K) scores (a few hundred kB) stay in cache from the gathers to the
    # arg-max, where the whole (n, R, M, K) array would be written to memory and read back several times.
    out = np.empty((n, R, arm_ids.shape[2]), dtype=np.intp)
    radius = betas[:, None, None]
    for r in range(R):
        ids = arm_ids[:, 0 if Rc == 1 else r]
        scores = np.take(width[r], ids)
        scores *= radius
        scores += np.take(lin[r], ids)
        if mask is not None:
            np.copyto(scores, -np.inf, where=~mask[:, 0 if mask.shape[1] == 1 else r])
        out[:, r] = _argmax_with_ties(scores, 2, tie_tol)
    return out
