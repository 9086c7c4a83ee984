"""The tree-based (binary) mechanism for continual release of prefix sums.

Two forms share one implementation:

* **distributed**, exactly as Algorithm 2 of Zhou & Chowdhury (2023): every agent's
  randomizer :class:`TreeRandomizer` keeps noise-free partial sums ("p-sums") of its
  own stream and, at step k, releases the p-sum that closes at level j = ν(k) (the
  index of the lowest set bit of k) with fresh noise; the server sums the agents' noisy
  p-sums and the analyzer :class:`TreeAnalyzer` rebuilds the prefix sum s̃_k from the
  p-sums at the set bits of k (composed into a protocol by
  :class:`fedbandit.protocols.statistics.GaussianTree` and ``TreePrefix``);
* **central** (Dwork, Naor, Pitassi & Rothblum 2010; Chan, Shi & Song 2011):
  :class:`TreeMechanism`, one randomizer and one analyzer at a trusted curator.

Every element γ_k of the stream enters at most κ = ⌊log₂ K⌋ + 1 p-sums, and every
prefix sum uses at most ⌊log₂ k⌋ + 1 of them, so with per-node Gaussian noise of
standard deviation σ₀ the release of the whole stream is κΔ²/(2σ₀²)-zCDP
(:func:`tree_zcdp`) and the prefix error at k has variance popcount(k)·σ₀² per entry
(:func:`prefix_noise_variance`).

All state carries arbitrary leading ``batch_shape`` axes (typically (runs, agents)),
so one step of many independent trees is a handful of array operations.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from fedbandit._combinatorics import lowest_set_bit, lowest_set_bits, prefix_nodes, tree_depth
from fedbandit._validation import (
    MAX_COUNT,
    MAX_STEPS,
    check_bool,
    check_choice,
    check_nonnegative_float,
    check_positive_int,
    check_rng,
    check_shape,
)
from fedbandit.mechanisms.discrete_gaussian import sample_discrete_gaussian

__all__ = [
    "lowest_set_bit",
    "prefix_nodes",
    "tree_depth",
    "prefix_noise_variance",
    "draw_noise",
    "TreeRandomizer",
    "TreeAnalyzer",
    "TreeMechanism",
]

NOISES = ("gaussian", "laplace", "discrete_gaussian")


def prefix_noise_variance(k: ArrayLike, sigma0: float, noise: str = "gaussian") -> float | np.ndarray:
    """Per-entry variance of the prefix-sum error at step(s) k.

    popcount(k) independent node noises: popcount(k)·σ₀² for Gaussian noise of
    standard deviation σ₀, popcount(k)·2b² for Laplace noise of scale b = σ₀, and at most
    popcount(k)·σ₀² for discrete Gaussian noise of scale σ₀ (whose variance is below σ₀²).
    ``k`` may be an int or an integer array.

    Parameters
    ----------
    k : int or array_like of int
        Step(s) k ≥ 1.
    sigma0 : float
        σ₀ (the Laplace scale b for ``noise="laplace"``).
    noise : {"gaussian", "laplace", "discrete_gaussian"}, default "gaussian"

    Returns
    -------
    float or ndarray
        The variance at each k.
    """
    sigma0 = check_nonnegative_float("sigma0", sigma0)
    check_choice("noise", noise, NOISES)
    k_arr = np.asarray(k)
    if not np.issubdtype(k_arr.dtype, np.integer) or np.any(k_arr < 1):
        raise ValueError(f"k must be integer(s) >= 1, got {k!r}")
    pop = np.vectorize(lambda v: int(v).bit_count(), otypes=[np.int64])(k_arr)
    per_node = 2.0 * sigma0**2 if noise == "laplace" else sigma0**2
    out = pop * per_node
    return float(out) if np.ndim(out) == 0 else out


def _check_shape(name: str, shape: int | tuple[int, ...]) -> tuple[int, ...]:
    return check_shape(name, shape)


def _check_tree_shapes(n_steps: int, item_shape: int | tuple[int, ...],
                       batch_shape: int | tuple[int, ...]) -> tuple[int, tuple[int, ...], tuple[int, ...], int]:
    """(K, item_shape, batch_shape, κ), checked; the trees hold κ · batch · item floats."""
    n_steps = check_positive_int("n_steps", n_steps)
    item_shape = check_shape("item_shape", item_shape, allow_empty=False)
    batch_shape = check_shape("batch_shape", batch_shape)
    kappa = tree_depth(n_steps)
    size = kappa * math.prod(batch_shape) * math.prod(item_shape)
    if size > MAX_STEPS:
        raise ValueError(
            f"batch_shape={batch_shape} and item_shape={item_shape} over n_steps={n_steps} need {size} stored floats, "
            f"more than 10^9"
        )
    return n_steps, item_shape, batch_shape, kappa


def draw_noise(
    rng: np.random.Generator, shape: tuple[int, ...], scale: float, noise: str = "gaussian", symmetric: bool = False
) -> np.ndarray:
    """Node noise of the given shape: N(0, scale²), Laplace(scale) or N_Z(0, scale²) entries.

    ``"discrete_gaussian"`` draws the exact discrete Gaussian of Canonne, Kamath & Steinke
    (:func:`fedbandit.mechanisms.discrete_gaussian.sample_discrete_gaussian`), as integers
    stored in float64 (exact below 2^53): the node noise of the distributed discrete
    Gaussian tree (:class:`the ``ddg-secagg`` protocol (fedbandit.protocols.statistics.DiscreteGaussianTree)`).

    With ``symmetric=True`` the last two axes form square matrices whose entries on
    and above the diagonal are independent and mirrored below it (the symmetric noise
    of Algorithm 2 for Gram matrices; the hypotheses of Zhou & Chowdhury Lemma 6.7).

    Parameters
    ----------
    rng : numpy.random.Generator
    shape : tuple of int
        The output shape.
    scale : float
        σ (the Laplace scale b).
    noise : {"gaussian", "laplace", "discrete_gaussian"}, default "gaussian"
    symmetric : bool, default False
        Mirror the last two axes (above).

    Returns
    -------
    ndarray of float64
    """
    rng = check_rng("rng", rng)
    shape = check_shape("shape", shape)
    scale = check_nonnegative_float("scale", scale)
    noise = check_choice("noise", noise, NOISES)
    symmetric = check_bool("symmetric", symmetric)
    if symmetric and (len(shape) < 2 or shape[-1] != shape[-2]):
        raise ValueError(f"symmetric=True needs a shape ending in square matrices (..., d, d), got shape={shape}")
    return draw_noise_unchecked(rng, shape, scale, noise, symmetric)


def draw_noise_unchecked(rng: np.random.Generator, shape: tuple[int, ...], scale: float, noise: str = "gaussian",
                         symmetric: bool = False) -> np.ndarray:
    if scale == 0.0:
        return np.zeros(shape)
    if noise == "discrete_gaussian":
        if symmetric:
            raise ValueError("symmetric=True is not supported for discrete_gaussian noise (pack the matrix instead)")

        return sample_discrete_gaussian(scale, shape, rng).astype(np.float64)
    if symmetric:
        # draw only the d(d+1)/2 free entries, then mirror them
        d = shape[-1]
        rows, cols = np.triu_indices(d)
        free = _draw(rng, shape[:-2] + (rows.size,), noise)
        free *= scale
        z = np.empty(shape)
        z[..., rows, cols] = free
        z[..., cols, rows] = free
        return z
    z = _draw(rng, shape, noise)
    z *= scale
    return z


def _draw(rng: np.random.Generator, shape: tuple[int, ...], noise: str) -> np.ndarray:
    return rng.standard_normal(shape) if noise == "gaussian" else rng.laplace(size=shape)


class TreeRandomizer:
    """Local randomizer R of the distributed tree mechanism (Zhou & Chowdhury, Alg. 2).

    At step k, with j = ν(k) the lowest set bit of k, the noise-free p-sum
    α_j = Σ_{l<j} α_l + γ_k is formed, the lower levels are cleared, and
    α̂_j = α_j + Z is released with Z a fresh noise draw.

    Runs that synchronize at different times (an adaptive schedule, as DP20's) are served
    by :meth:`release` with ``runs=``: only those runs advance, each at its own step k_r
    (one tree per run, advanced by masks, never by a loop over runs).

    Parameters
    ----------
    n_steps : int
        K, the number of steps (batches) the tree covers.
    item_shape : tuple of int
        Shape of one stream element γ_k (``(d,)`` for bias vectors, ``(d, d)`` for
        Gram matrices, ``(D,)`` for packed statistics).
    sigma0 : float
        Per-node noise scale σ₀ ≥ 0: standard deviation (Gaussian) or scale b (Laplace).
    batch_shape : tuple of int, optional
        Leading axes of independent randomizers, e.g. (runs, agents); the first is the
        run axis of ``runs=``.
    symmetric : bool, optional
        Draw symmetric matrix noise (requires a square ``item_shape`` of two axes).
    noise : {"gaussian", "laplace", "discrete_gaussian"}
    segments : tuple of int, optional
        For a 1-D ``item_shape`` of packed statistics: lengths of the consecutive segments
        whose noise is drawn by separate calls, in order (for example ``(d, d(d+1)/2)``
        for a bias vector followed by a Gram matrix's upper triangle).  The values are
        those of drawing each statistic's noise on its own, in that order.
    """

    def __init__(self, n_steps: int, item_shape: int | tuple[int, ...], sigma0: float, *, batch_shape: int | tuple[int, ...] = (),
                 symmetric: bool = False, noise: str = "gaussian", segments: int | tuple[int, ...] | None = None) -> None:
        self.n_steps, self.item_shape, self.batch_shape, _ = _check_tree_shapes(n_steps, item_shape, batch_shape)
        self.sigma0 = check_nonnegative_float("sigma0", sigma0)
        self.noise = check_choice("noise", noise, NOISES)
        symmetric = check_bool("symmetric", symmetric)
        if symmetric and (len(self.item_shape) != 2 or self.item_shape[0] != self.item_shape[1]):
            raise ValueError(f"symmetric=True needs a square item_shape (d, d), got {self.item_shape}")
        self.symmetric = bool(symmetric)
        self.segments = _check_segments(segments, self.item_shape, self.symmetric)
        self.kappa = tree_depth(self.n_steps)
        self.k = 0
        self.steps = np.zeros(self.batch_shape[0] if self.batch_shape else 1, dtype=np.int64)
        self._apart = False  # runs at different steps (after calls with runs=; kept by advance_runs)
        self._alpha = np.zeros((self.kappa,) + self.batch_shape + self.item_shape)

    @property
    def shape(self) -> tuple[int, ...]:
        """Shape of one release: batch_shape + item_shape."""
        return self.batch_shape + self.item_shape

    @property
    def state_elements(self) -> int:
        """The stream elements (item-shaped arrays) one randomizer stores: its κ p-sums."""
        return self._alpha.shape[0]

    def _noise(self, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        if self.segments is None:
            return draw_noise_unchecked(rng, shape, self.sigma0, self.noise, self.symmetric)
        if self.noise == "discrete_gaussian" or self.sigma0 == 0.0:
            return np.concatenate([draw_noise_unchecked(rng, shape[:-1] + (s,), self.sigma0, self.noise)
                                   for s in self.segments], axis=-1)
        # each segment's draws scaled straight into its columns: the values of concatenating
        # draw_noise_unchecked's segments (the same draws in the same order, each times σ₀ once)
        z = np.empty(shape)
        start = 0
        for s in self.segments:
            np.multiply(_draw(rng, shape[:-1] + (s,), self.noise), self.sigma0, out=z[..., start:start + s])
            start += s
        return z

    def release(self, gamma: ArrayLike, rng: np.random.Generator, *, runs: ArrayLike | None = None,
                return_noise: bool = False) -> tuple[Any, ...]:
        """Take γ_k and return (j, α̂_j) for the next step k.

        With ``runs`` (increasing indices into the run axis), ``gamma`` holds the elements
        of those runs only, each run advances its own step, and ``j`` is an array of the
        runs' levels.  Without ``runs`` every run advances one step: in lockstep ``j`` is
        an int, and once runs are at different steps (after calls with ``runs``) it is
        the same as ``runs`` = all runs.  ``return_noise=True`` also returns the noise Z
        that was added.

        Raises
        ------
        ValueError
            If ``gamma`` has the wrong shape or a tree is exhausted (k > K).
        """
        rng = check_rng("rng", rng)
        gamma = np.asarray(gamma, dtype=float)
        if runs is None and self._apart:
            runs = np.arange(self.steps.size)  # every run advances its own step
        if runs is None:
            if gamma.shape != self.shape:
                raise ValueError(f"gamma must have shape {self.shape}, got {gamma.shape}")
            if self.k >= self.n_steps:
                raise ValueError(f"the tree covers n_steps={self.n_steps} steps; step {self.k + 1} is past its end")
            self.k += 1
            self.steps += 1
            j = (self.k & -self.k).bit_length() - 1
            alpha_j = _fold_levels(self._alpha, range(j), gamma, out=self._alpha[j])
            self._alpha[:j] = 0.0
            z = self._noise(rng, self.shape)
            return (j, alpha_j + z, z) if return_noise else (j, alpha_j + z)
        idx, kk = advance_runs(self, runs, gamma, "gamma", "the tree")
        jr = lowest_set_bits(kk)
        levels = np.arange(self.kappa).reshape((self.kappa, 1) + (1,) * (gamma.ndim - 1))
        a = self._alpha[:, idx]
        jb = jr.reshape((1, -1) + (1,) * (gamma.ndim - 1))
        alpha_j = (a * (levels < jb)).sum(axis=0) + gamma
        a = np.where(levels < jb, 0.0, np.where(levels == jb, alpha_j[None], a))
        self._alpha[:, idx] = a
        z = self._noise(rng, gamma.shape)
        return (jr, alpha_j + z, z) if return_noise else (jr, alpha_j + z)


def _fold_levels(stored: np.ndarray, levels: Any, last: np.ndarray | None = None, *,
                 out: np.ndarray | None = None) -> np.ndarray:
    """``stored[levels].sum(axis=0)`` (+ ``last``), the same floats without the gathered copy.

    NumPy reduces a C-ordered array's leading axis by adding its rows in order into an output
    that starts at 0.0 (so a lone -0.0 row sums to +0.0): ((0.0 + s_0) + s_1) + ..., then
    ``+ last``; this adds the rows in that order into ``out`` (a fresh array by default; it
    must not be one of the rows read).  ``levels`` empty: 0.0 + ``last``.
    """
    it = iter(levels)
    first = next(it, None)
    if first is None:
        assert last is not None
        return np.add(0.0, last, out=out)
    acc = np.add(stored[first], 0.0, out=out)
    for level in it:
        np.add(acc, stored[level], out=acc)
    if last is not None:
        np.add(acc, last, out=acc)
    return acc


def _check_segments(segments: int | tuple[int, ...] | None, item_shape: tuple[int, ...], symmetric: bool) -> tuple[int, ...] | None:
    if segments is None:
        return None
    segs = check_shape("segments", segments, allow_empty=False, max_size=MAX_COUNT)
    if symmetric or len(item_shape) != 1 or sum(segs) != item_shape[0] or any(s < 1 for s in segs):
        raise ValueError(f"segments must be positive lengths adding up to the 1-D item_shape {item_shape}, got {segments!r}")
    return segs


def _check_runs(runs: ArrayLike, n_runs: int) -> np.ndarray:
    idx = np.asarray(runs, dtype=np.int64)
    if idx.ndim != 1 or idx.size == 0 or np.any(idx < 0) or np.any(idx >= n_runs) or np.any(np.diff(idx) <= 0):
        raise ValueError(f"runs must be increasing run indices in [0, {n_runs}), got {runs!r}")
    return idx


def advance_together(analyzer: Any, j: int | np.ndarray) -> int:
    """Advance a tree analyzer whose runs move together by one step and check the level ``j``.

    Shared by :class:`TreeAnalyzer` and the full tree's Honaker analyzer: refuses a step past
    ``n_steps`` and a ``j`` that is not ν(k).  Returns ν(k), the level the step closes.
    """
    if analyzer.k >= analyzer.n_steps:
        raise ValueError(f"the tree covers n_steps={analyzer.n_steps} steps; step {analyzer.k + 1} is past its end")
    analyzer.k += 1
    analyzer.steps += 1
    k = analyzer.k  # the analyzer's own step counter, an int >= 1: ν(k) without lowest_set_bit's argument check
    expected = (k & -k).bit_length() - 1
    if j != expected:
        raise ValueError(f"j must be the lowest set bit of k={analyzer.k}, i.e. {expected}, got {j!r}")
    return expected


def sum_at_set_bits(stored: np.ndarray, steps: np.ndarray, extra: int) -> np.ndarray:
    """Σ over the set bits l of each run's step of ``stored[l, run]`` (levels on axis 0, runs on axis 1).

    The prefix estimate of a tree analyzer whose runs are at different steps ``steps``; ``extra``
    is the number of item axes after the run axis.
    """
    kappa = stored.shape[0]
    set_bits = ((steps[None, :] >> np.arange(kappa)[:, None]) & 1).astype(bool).reshape((kappa, -1) + (1,) * extra)
    return np.where(set_bits, stored, 0.0).sum(axis=0)


def advance_runs(mech: Any, runs: ArrayLike, values: np.ndarray, name: str, what: str) -> tuple[np.ndarray, np.ndarray]:
    """Advance the steps of the runs ``runs`` of a per-run mechanism (``steps``, ``k``, ``n_steps``).

    Shared by the per-run calls of the tree's randomizer and analyzer and of the factorization
    randomizers: checks ``runs``, that ``values`` has one row per run, and that no run passes
    ``n_steps`` (``what`` names the mechanism in the error).  Returns (run indices, their new steps).
    """
    idx = _check_runs(runs, mech.steps.size)
    want = (idx.size,) + mech.batch_shape[1:] + mech.item_shape
    if values.shape != want:
        raise ValueError(f"{name} must have shape {want} for {idx.size} runs, got {values.shape}")
    if np.any(mech.steps[idx] >= mech.n_steps):
        raise ValueError(f"a run would exceed {what}'s n_steps={mech.n_steps} steps")
    mech.steps[idx] += 1
    mech.k = int(mech.steps.max())
    mech._apart = bool((mech.steps != mech.k).any())  # read by the calls without runs= (tree randomizer, analyzer)
    return idx, mech.steps[idx]


class TreeAnalyzer:
    """Analyzer A of the distributed tree mechanism (Zhou & Chowdhury, Alg. 2).

    Keeps the latest synchronized noisy p-sum α̃_l at every level and returns the
    prefix estimate s̃_k = Σ_{l : bit l of k set} α̃_l.  ``runs=`` serves runs at
    different steps, as :meth:`TreeRandomizer.release` does (and, as there, a call without
    ``runs`` once the runs are at different steps advances every run by its own step).

    Parameters
    ----------
    n_steps : int
        K, the steps the tree covers.
    item_shape : tuple of int
        The shape of one stream element.
    batch_shape : tuple of int, optional
        Leading axes of independent analyzers (the first is the run axis of ``runs=``).
    """

    def __init__(self, n_steps: int, item_shape: int | tuple[int, ...], *, batch_shape: int | tuple[int, ...] = ()) -> None:
        self.n_steps, self.item_shape, self.batch_shape, self.kappa = _check_tree_shapes(n_steps, item_shape, batch_shape)
        self.k = 0
        self.steps = np.zeros(self.batch_shape[0] if self.batch_shape else 1, dtype=np.int64)
        self._apart = False  # runs at different steps (after calls with runs=; kept by advance_runs)
        self._alpha_tilde = np.zeros((self.kappa,) + self.batch_shape + self.item_shape)

    @property
    def state_elements(self) -> int:
        """The stream elements (item-shaped arrays) one analyzer stores: the latest noisy p-sum of each level."""
        return self._alpha_tilde.shape[0]

    def update(self, j: int | np.ndarray, alpha_tilde: ArrayLike, *, runs: ArrayLike | None = None) -> np.ndarray:
        """Store the synchronized p-sum α̃_j of step k and return s̃_k."""
        alpha_tilde = np.asarray(alpha_tilde, dtype=float)
        if runs is None and self._apart:
            runs = np.arange(self.steps.size)  # every run advances its own step
        if runs is None:
            shape = self.batch_shape + self.item_shape
            if alpha_tilde.shape != shape:
                raise ValueError(f"alpha_tilde must have shape {shape}, got {alpha_tilde.shape}")
            advance_together(self, j)
            self._alpha_tilde[j] = alpha_tilde
            return _fold_levels(self._alpha_tilde, [level for level in range(self.kappa) if self.k >> level & 1])
        idx, kk = advance_runs(self, runs, alpha_tilde, "alpha_tilde", "the tree")
        expected = lowest_set_bits(kk)
        if not np.array_equal(np.asarray(j), expected):
            raise ValueError(f"j must be the lowest set bits of the runs' steps, {expected}, got {j!r}")
        a = self._alpha_tilde[:, idx]
        extra = (1,) * (alpha_tilde.ndim - 1)
        levels = np.arange(self.kappa).reshape((self.kappa, 1) + extra)
        a = np.where(levels == expected.reshape((1, -1) + extra), alpha_tilde[None], a)
        self._alpha_tilde[:, idx] = a
        return sum_at_set_bits(a, kk, len(extra))


class TreeMechanism:
    """Central tree-based mechanism: a trusted curator adds noise to every p-sum.

    ``step(x, rng)`` takes the next stream element (shape batch_shape + item_shape)
    and returns the noisy prefix sum.  Each prefix error has per-entry variance
    :func:`prefix_noise_variance` (k, sigma).

    Parameters
    ----------
    n_steps : int
        K, the steps the tree covers.
    item_shape : tuple of int
        The shape of one stream element.
    sigma : float
        σ₀ of every node (the Laplace scale b).
    batch_shape : tuple of int, optional
        Leading axes of independent trees.
    symmetric : bool, optional
        Symmetric matrix noise.
    noise : {"gaussian", "laplace", "discrete_gaussian"}, default "gaussian"
    """

    def __init__(self, n_steps: int, item_shape: int | tuple[int, ...], sigma: float, *, batch_shape: int | tuple[int, ...] = (),
                 symmetric: bool = False, noise: str = "gaussian") -> None:
        self.randomizer = TreeRandomizer(
            n_steps, item_shape, sigma, batch_shape=batch_shape, symmetric=symmetric, noise=noise
        )
        self.analyzer = TreeAnalyzer(n_steps, item_shape, batch_shape=batch_shape)

    @property
    def k(self) -> int:
        return self.randomizer.k

    def step(self, x: ArrayLike, rng: np.random.Generator) -> np.ndarray:
        j, alpha_hat = self.randomizer.release(x, rng)
        return self.analyzer.update(j, alpha_hat)

