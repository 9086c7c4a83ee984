"""Matrix-factorization continual release of prefix sums: the square-root Toeplitz factorization.

The prefix sums of a stream x_1, …, x_n are A·x with A the lower-triangular all-ones
matrix.  A factorization A = B·C gives the mechanism

    s̃ = B·(C·x + z) = A·x + B·z,    z_s ~ N(0, σ²) i.i.d.,

which is the Gaussian mechanism on C·x followed by post-processing: one element x_t
moves C·x by the column t of C, so for a record that enters one element (single
participation) the release is one Gaussian release of sensitivity Δ·max_t ‖C e_t‖
([DMRST22]_, which also proves this for adaptively chosen streams).  The tree mechanism
is one such factorization (C = the tree's node-incidence matrix); the square root
C = A^{1/2} -- the lower-triangular Toeplitz matrix of the coefficients c_k of
(1 − x)^{−1/2}, c_0 = 1, c_k = c_{k−1}(2k − 1)/(2k), so that C·C = A and B = C --
has almost optimal error among all factorizations ([FHU23]_, [HUU23]_).

Two randomizers with the interface of :class:`fedbandit.mechanisms.tree.TreeRandomizer`
(``release(gamma, rng, runs=None, return_noise=False)``, batch axes (runs, agents),
per-run steps):

* :class:`SqrtToeplitzRandomizer` -- the dense square root, B = C: the noise of release t
  is Σ_{s≤t} c_{t−s} z_s, computed from the stored z's (O(t) work and O(n) stored draws
  per entry: the floor of a dense factor, whose rows have no shorter recursion);
* :class:`BandedSqrtRandomizer` -- the banded square root of [KL24]_: C_b keeps the first
  b coefficients of C (C_b is no longer a square root; B = A·C_b⁻¹), so its noise
  (A·C_b⁻¹·z)_t is a running sum of w = C_b⁻¹ z, computed by the recursion
  w_t = z_t − Σ_{1≤k<b} c_k w_{t−k} from the last b − 1 w's: O(b) state and work.

The noise draws go through :func:`fedbandit.mechanisms.tree.draw_noise_unchecked` (the tree's
Gaussian draw, the ``"tree"`` site of :func:`fedbandit.audit.planted_noise`).

References (BibTeX keys, in ``references_pending_issue24.bib`` until a chapter cites
them): [FHU23] ``fichtenberger2023constant``, [HUU23] ``henzinger2023almost``, [DMRST22]
``denisov2022improved``, [KL24] ``kalinin2024banded``.

.. [FHU23] H. Fichtenberger, M. Henzinger and J. Upadhyay, "Constant matters: fine-grained
   error bound on differentially private continual observation", ICML 2023.
.. [HUU23] M. Henzinger, J. Upadhyay and S. Upadhyay, "Almost tight error bounds on
   differentially private continual counting", SODA 2023.
.. [DMRST22] S. Denisov, H. B. McMahan, J. Rush, A. Smith and A. G. Thakurta, "Improved
   differential privacy for SGD via optimal private linear operators on adaptive
   streams", NeurIPS 2022.
.. [KL24] N. Kalinin and C. H. Lampert, "Banded square root matrix factorization for
   differentially private model training", NeurIPS 2024.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from fedbandit._validation import (
    MAX_STEPS,
    check_array,
    check_int_in_range,
    check_nonnegative_float,
    check_positive_int,
    check_rng,
    check_shape,
)
from fedbandit.mechanisms.tree import advance_runs, draw_noise_unchecked

__all__ = [
    "sqrt_toeplitz_coefficients",
    "inverse_series",
    "lower_toeplitz",
    "max_column_norm",
    "factorization_noise_coefficients",
    "MAX_DENSE_STEPS",
    "SqrtToeplitzRandomizer",
    "BandedSqrtRandomizer",
]


#: Largest number of releases of the dense square root (it stores every draw; release t costs O(t)).
MAX_DENSE_STEPS = 10**6

#: Longest coefficient series computed (8 bytes each).
MAX_SERIES = 10**7


def _check_coefficients(name: str, value: ArrayLike, *, nonzero_first: bool = False) -> np.ndarray:
    a = check_array(name, value, ndim=1)
    if a.size == 0 or a.size > MAX_SERIES:
        raise ValueError(f"{name} must hold between 1 and {MAX_SERIES} coefficients, got {a.size}")
    if nonzero_first and a[0] == 0.0:
        raise ValueError(f"{name} must have a nonzero first coefficient, got {a[0]!r}")
    return a


def sqrt_toeplitz_coefficients(n: int) -> np.ndarray:
    """c_0, …, c_{n−1}: the coefficients of (1 − x)^{−1/2}, c_0 = 1, c_k = c_{k−1}(2k − 1)/(2k).

    The lower-triangular Toeplitz matrix of these coefficients is the square root of the
    prefix-sum matrix ([FHU23]_, [HUU23]_): Σ_{j≤k} c_j c_{k−j} = 1 for every k.

    Parameters
    ----------
    n : int
        The number of coefficients.

    Returns
    -------
    ndarray of shape (n,)
    """
    n = check_positive_int("n", n, max_value=MAX_SERIES, reason="the coefficients are stored")
    k = np.arange(1, n, dtype=float)
    return np.concatenate([[1.0], np.cumprod((2.0 * k - 1.0) / (2.0 * k))])


def inverse_series(coefficients: ArrayLike, n: int) -> np.ndarray:
    """The first n coefficients of 1/p(x), p(x) = Σ_k a_k x^k with a_0 ≠ 0 (the first column of
    the inverse of the lower-triangular Toeplitz matrix of a), by the recursion
    q_t = −(Σ_{1≤j≤min(t, b−1)} a_j q_{t−j})/a_0 (a linear filter's impulse response).

    Parameters
    ----------
    coefficients : array_like
        a_0, a_1, ..., the first column of the lower-triangular Toeplitz matrix (a_0 ≠ 0).
    n : int
        The size (number of steps).

    Returns
    -------
    ndarray of shape (n,)
        q_0, ..., q_{n−1}.
    """
    from scipy.signal import lfilter  # a large import that only this function needs

    a = _check_coefficients("coefficients", coefficients, nonzero_first=True)
    n = check_positive_int("n", n, max_value=MAX_SERIES, reason="the series is stored")
    impulse = np.zeros(n)
    impulse[0] = 1.0
    with np.errstate(all="ignore"):
        out = lfilter([1.0], a, impulse)
    if not np.all(np.isfinite(out)):
        raise ValueError(f"coefficients={coefficients!r}: 1/p(x) overflows within n={n} terms")
    return out


def lower_toeplitz(coefficients: ArrayLike, n: int) -> np.ndarray:
    """The n × n lower-triangular Toeplitz matrix T[t, s] = a_{t−s} (0 beyond the given a's).

    Parameters
    ----------
    coefficients : array_like
        a_0, a_1, ..., the first column of the lower-triangular Toeplitz matrix (a_0 ≠ 0).
    n : int
        The matrix size (at most 2000: dense).

    Returns
    -------
    ndarray of shape (n, n)
    """
    a = _check_coefficients("coefficients", coefficients)
    n = check_positive_int("n", n, max_value=2000, reason="the matrix is dense")
    col = np.zeros(n)
    col[: min(n, a.size)] = a[:n]
    idx = np.subtract.outer(np.arange(n), np.arange(n))
    return np.where(idx >= 0, col[np.clip(idx, 0, n - 1)], 0.0)


def max_column_norm(coefficients: ArrayLike, n: int) -> float:
    """max_t ‖C e_t‖ of the n × n lower-triangular Toeplitz C of ``coefficients``: the first
    column's norm sqrt(Σ_{k<min(n, b)} a_k²) (the other columns are its truncations).

    Parameters
    ----------
    coefficients : array_like
        a_0, a_1, ..., the first column of the lower-triangular Toeplitz matrix (a_0 ≠ 0).
    n : int
        The size (number of steps).

    Returns
    -------
    float
    """
    a = _check_coefficients("coefficients", coefficients)
    n = check_positive_int("n", n, max_value=MAX_STEPS)
    with np.errstate(all="ignore"):
        out = float(np.sqrt(np.sum(a[:n] ** 2)))
    if not math.isfinite(out):
        raise ValueError(f"coefficients={coefficients!r}: the column norm overflows")
    return out


def factorization_noise_coefficients(coefficients: ArrayLike, n: int) -> np.ndarray:
    """The first column of B = A·C⁻¹ for the Toeplitz right factor C of ``coefficients``: the
    coefficients of (1 − x)^{−1}/p(x), i.e. the running sums of :func:`inverse_series` (B is
    Toeplitz too).  For the square root this is c itself (B = C).

    Parameters
    ----------
    coefficients : array_like
        a_0, a_1, ..., the first column of the lower-triangular Toeplitz matrix (a_0 ≠ 0).
    n : int
        The size (number of steps).

    Returns
    -------
    ndarray of shape (n,)
        The first column of B.
    """
    with np.errstate(all="ignore"):
        out = np.cumsum(inverse_series(coefficients, n))
    if not np.all(np.isfinite(out)):
        raise ValueError(f"coefficients={coefficients!r}: the series overflows within n={n} terms")
    return out


class _ToeplitzRandomizer:
    """Shared state of the factorization randomizers (batch axes, per-run steps, exact prefix)."""

    #: C's first column (each subclass sets it).
    factor_coefficients: np.ndarray

    def __init__(self, n_steps: int, item_shape: int | tuple[int, ...], sigma: float, batch_shape: int | tuple[int, ...], state_len: int) -> None:
        self.n_steps = check_positive_int("n_steps", n_steps, max_value=MAX_STEPS)
        self.item_shape = check_shape("item_shape", item_shape, allow_empty=False)
        self.batch_shape = check_shape("batch_shape", batch_shape)
        self.sigma = check_nonnegative_float("sigma", sigma)
        size = (state_len + 1) * math.prod(self.batch_shape) * math.prod(self.item_shape)
        if size > MAX_STEPS:
            raise ValueError(
                f"batch_shape={self.batch_shape} and item_shape={self.item_shape} over n_steps={self.n_steps} need "
                f"{size} stored floats, more than 10^9"
            )
        self.k = 0
        self.steps = np.zeros(self.batch_shape[0] if self.batch_shape else 1, dtype=np.int64)
        self._prefix = np.zeros(self.batch_shape + self.item_shape)

    @property
    def shape(self) -> tuple[int, ...]:
        """Shape of one release: batch_shape + item_shape."""
        return self.batch_shape + self.item_shape

    @property
    def state_elements(self) -> int:
        """The stream elements (item-shaped arrays) one randomizer stores: the exact prefix and the
        noise state (the dense square root's n draws; the banded one's b − 1 w's and their sum)."""
        return sum(a.size for a in self._state_arrays()) // math.prod(self.shape)

    def _state_arrays(self) -> list[np.ndarray]:
        return [self._prefix]

    @property
    def sensitivity_factor(self) -> float:
        """max_t ‖C e_t‖ over the n_steps columns of the right factor C: one element's Δ is
        multiplied by it in the release's Gaussian event."""
        return max_column_norm(self.factor_coefficients, self.n_steps)

    def prefix_noise_variance(self, k: int) -> float:
        """Per-entry variance of the noise of the prefix released at step k: σ² Σ_{j<k} b_j²."""
        k = check_int_in_range("k", k, 1, self.n_steps)
        return float(self.sigma**2 * np.sum(self._noise_coefficients(k) ** 2))

    def _noise_coefficients(self, k: int) -> np.ndarray:
        """b_0, ..., b_{k−1}: the first k coefficients of B's first column."""
        raise NotImplementedError

    def release(self, gamma: ArrayLike, rng: np.random.Generator, *, runs: ArrayLike | None = None,
                return_noise: bool = False) -> tuple[Any, ...]:
        """Take x_k and return (k, s̃_k): the step(s) and the noisy prefix sum A·x + B·z at k.

        ``runs`` and lockstep behave as in :meth:`fedbandit.mechanisms.tree.TreeRandomizer.release`
        (``k`` is then the runs' steps); ``return_noise=True`` also returns the correlated
        noise (B·z)_k that was added.
        """
        rng = check_rng("rng", rng)
        gamma = np.asarray(gamma, dtype=float)
        if runs is None and self.batch_shape and np.any(self.steps != self.k):
            runs = np.arange(self.steps.size)
        if runs is None:
            if gamma.shape != self.shape:
                raise ValueError(f"gamma must have shape {self.shape}, got {gamma.shape}")
            if self.k >= self.n_steps:
                raise ValueError(f"the mechanism covers n_steps={self.n_steps} steps; step {self.k + 1} is past its end")
            idx: Any = slice(None)
            self.k += 1
            self.steps += 1
            kk: Any = self.k
        else:
            idx, kk = advance_runs(self, runs, gamma, "gamma", "the mechanism")
        z = draw_noise_unchecked(rng, gamma.shape, self.sigma, "gaussian")
        noise = self._advance(idx, kk, z)
        self._prefix[idx] += gamma
        out = self._prefix[idx] + noise
        return (kk, out, noise) if return_noise else (kk, out)

    def _advance(self, idx: Any, kk: Any, z: np.ndarray) -> np.ndarray:
        """The correlated noise (B·z)_k of the runs ``idx`` at their steps ``kk``, given this step's z."""
        raise NotImplementedError


class SqrtToeplitzRandomizer(_ToeplitzRandomizer):
    """The square-root factorization A = C·C of the prefix-sum matrix, as a streaming randomizer.

    Release k is s̃_k = Σ_{s≤k} x_s + Σ_{s≤k} c_{k−s} z_s with z_s ~ N(0, σ²) entrywise and
    c the coefficients of (1 − x)^{−1/2} (:func:`sqrt_toeplitz_coefficients`; [FHU23]_,
    [HUU23]_).  One element x_t enters the Gaussian release C·x + z with weight ‖C e_t‖ ≤
    ‖C e_1‖ = sqrt(Σ_{k<n} c_k²) (:attr:`sensitivity_factor`), for adaptively chosen
    streams too ([DMRST22]_ Thm. 2.1).  The prefix noise variance at k is σ² Σ_{j<k} c_j².

    Streaming cost: the z's are stored (n_steps draws per entry) and release k costs O(k)
    per entry -- the floor for a dense Toeplitz factor without a recursion.

    Parameters
    ----------
    n_steps : int
        n, the number of releases.
    item_shape : tuple of int
        Shape of one stream element.
    sigma : float
        σ ≥ 0 of the i.i.d. Gaussian z's.
    batch_shape : tuple of int, optional
        Leading axes of independent randomizers (runs, agents); the first is the run axis of
        ``runs=``.
    """

    name = "sqrt-toeplitz"

    def __init__(self, n_steps: int, item_shape: int | tuple[int, ...], sigma: float, *, batch_shape: int | tuple[int, ...] = ()) -> None:
        n = check_positive_int("n_steps", n_steps, max_value=MAX_DENSE_STEPS,
                               reason="the dense square root stores every draw and costs O(t) per release")
        super().__init__(n, item_shape, sigma, batch_shape, n)
        self.factor_coefficients = sqrt_toeplitz_coefficients(self.n_steps)
        self.noise_coefficients = self.factor_coefficients  # B = A·C⁻¹ = C
        runs = self.steps.size
        # z[s, r]: the draw of run r's step s + 1 (steps first: the first k steps of every run are
        # one contiguous block, which release k reads without copying it)
        self._z = np.zeros((self.n_steps, runs) + self.batch_shape[1:] + self.item_shape)

    def _noise_coefficients(self, k: int) -> np.ndarray:
        return self.noise_coefficients[:k]

    def _state_arrays(self) -> list[np.ndarray]:
        return [self._prefix, self._z]

    def _advance(self, idx: Any, kk: Any, z: np.ndarray) -> np.ndarray:
        zz = z if self.batch_shape else z[None]
        if isinstance(idx, slice):
            self._z[kk - 1] = zz
            coef = self.noise_coefficients[kk - 1 :: -1]  # c_{k−1}, …, c_0 for s = 1..k
            noise = np.tensordot(coef, self._z[:kk], axes=([0], [0]))
        else:
            self._z[kk - 1, idx] = zz
            K = int(kk.max())
            s = np.arange(K)
            lag = kk[:, None] - 1 - s[None, :]
            coef = np.where(lag >= 0, self.noise_coefficients[np.clip(lag, 0, None)], 0.0)  # (runs', K)
            noise = np.einsum("rs,sr...->r...", coef, self._z[:K, idx])
        return noise if self.batch_shape else noise[0]


class BandedSqrtRandomizer(_ToeplitzRandomizer):
    """The banded square root of [KL24]_: right factor C_b with the first b coefficients of
    (1 − x)^{−1/2}, left factor B = A·C_b⁻¹, streamed from O(b) state.

    Release k is s̃_k = Σ_{s≤k} x_s + Σ_{s≤k} w_s with w = C_b⁻¹ z, i.e.
    w_t = z_t − Σ_{1≤j<b} c_j w_{t−j}: the state is the last b − 1 w's and their running
    sum.  The sensitivity factor is C_b's largest column norm sqrt(Σ_{j<min(b, n)} c_j²),
    computed exactly; the prefix noise variance at k is σ² Σ_{j<k} β_j² with β the
    coefficients of (1 − x)^{−1}/p_b(x) (:func:`factorization_noise_coefficients`).  With
    b ≥ n it is the dense square root.

    Parameters
    ----------
    n_steps, item_shape, sigma, batch_shape
        As for :class:`SqrtToeplitzRandomizer`.
    bands : int
        b ≥ 1, the number of nonzero diagonals of C_b (b = 1: C_b = I, every element gets its
        own noise, the noise of the running total is a random walk).
    """

    name = "banded-sqrt"

    def __init__(self, n_steps: int, item_shape: int | tuple[int, ...], sigma: float, bands: int, *, batch_shape: int | tuple[int, ...] = ()) -> None:
        n = check_positive_int("n_steps", n_steps, max_value=MAX_STEPS)
        self.bands = check_positive_int("bands", bands, max_value=10**5, reason="the state holds b − 1 draws")
        super().__init__(n, item_shape, sigma, batch_shape, min(self.bands, n))
        self.factor_coefficients = sqrt_toeplitz_coefficients(min(self.bands, n))
        # _w[j]: w of the run's (j+1)-th latest step, j < b − 1; _sum: Σ_s w_s
        self._w = np.zeros((max(min(self.bands, n) - 1, 0),) + self.batch_shape + self.item_shape)
        self._sum = np.zeros(self.batch_shape + self.item_shape)

    @functools.cached_property
    def noise_coefficients(self) -> np.ndarray:
        """β_0, …, β_{n−1}: the first column of B = A·C_b⁻¹ (computed on first use)."""
        return factorization_noise_coefficients(self.factor_coefficients, self.n_steps)

    def _state_arrays(self) -> list[np.ndarray]:
        return [self._prefix, self._w, self._sum]

    def _noise_coefficients(self, k: int) -> np.ndarray:
        if "noise_coefficients" in self.__dict__ or k > MAX_SERIES:
            return self.noise_coefficients[:k]
        return factorization_noise_coefficients(self.factor_coefficients, k)

    def _advance(self, idx: Any, kk: Any, z: np.ndarray) -> np.ndarray:
        c = self.factor_coefficients[1:]
        w_prev = self._w[:, idx]
        w = z - np.tensordot(c, w_prev, axes=([0], [0])) if c.size else z
        if c.size:
            self._w[:, idx] = np.concatenate([w[None], w_prev[:-1]], axis=0)
        self._sum[idx] += w
        return self._sum[idx].copy()
