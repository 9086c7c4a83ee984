"""The full binary tree with Honaker's best linear estimator of the prefix sums.

The tree of :mod:`fedbandit.mechanisms.tree` (Zhou & Chowdhury's Algorithm 2) releases, at
step k, only the p-sum that closes at level ν(k); its prefix estimate adds the p-sums at the
set bits of k.  The *full* tree releases every node: at step k, the ν(k) + 1 nodes that close
there (levels 0, …, ν(k): the leaf [k, k], its parent, …).  One stream element still enters
one node per level, at most κ = ⌊log₂ K⌋ + 1 nodes, so the privacy accounting is the tree's
(κ Gaussian releases of sensitivity Δ each); the extra nodes make the tree redundant -- a node
is the sum of its two children -- and Honaker's estimator uses the redundancy
([H15]_, Sec. 3, the bottom-up pass).

**The bottom-up estimate.**  With i.i.d. node noise of variance σ², a leaf's estimate is its
noisy value (variance v₀ = σ²); the estimate of a node at level j combines its own noisy value
(variance σ²) with the sum of its two children's estimates (variance 2v_{j−1}) by inverse
variance: ê_j = w_j·y_j + (1 − w_j)·(ê_left + ê_right) with w_j = v_j/σ² and
1/v_j = 1/σ² + 1/(2v_{j−1}), which solves to

    v_j = 2^j σ² / (2^{j+1} − 1),        w_j = 2^j / (2^{j+1} − 1)

(1, 2/3, 4/7, 8/15, … in units of σ², tending to σ²/2).  The prefix [1, k] is the sum of the
complete subtrees at the set bits of k; every released node (every node ending by step k) lies
in one of them, and the subtrees' noises are independent, so the streaming estimate -- the sum
of those subtrees' root estimates -- is the generalized-least-squares (best linear unbiased)
estimate of the prefix from everything released so far, with variance

    Var(ŝ_k) = σ² Σ_{j : bit j of k set} 2^j / (2^{j+1} − 1)   (:func:`honaker_prefix_variance`),

below the plain tree's popcount(k)·σ² for every k ≥ 2 (equal at k = 1, a leaf).  (Honaker's
top-down pass also uses the parents; online, a prefix's subtree roots are left children whose
parents have not closed, so it has nothing to add.)  ``tests/test_honaker_tree.py`` checks the
formula against the GLS covariance of the released nodes.

:class:`FullTreeRandomizer` releases the nodes (distributed: every party's own noisy nodes,
summed by the server), :class:`HonakerAnalyzer` turns them into prefix estimates,
:class:`HonakerTreeMechanism` is the central form.  All state carries leading ``batch_shape``
axes (runs, agents) and per-run steps (``runs=``), as the tree's; the noise goes through
:func:`fedbandit.mechanisms.tree.draw_noise_unchecked` (the ``"tree"`` site of
:func:`fedbandit.audit.planted_noise`).

References
----------
.. [H15] J. Honaker, "Efficient use of differentially private binary trees", Theory and
   Practice of Differential Privacy (TPDP) 2015.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from fedbandit._combinatorics import lowest_set_bits
from fedbandit._validation import (
    MAX_STEPS,
    check_int_in_range,
    check_nonnegative_float,
    check_positive_int,
    check_rng,
    check_shape,
)
from fedbandit.mechanisms.tree import (
    advance_runs,
    advance_together,
    draw_noise_unchecked,
    sum_at_set_bits,
    tree_depth,
)

__all__ = [
    "honaker_level_variance",
    "honaker_prefix_variance",
    "honaker_max_prefix_variance",
    "FullTreeRandomizer",
    "HonakerAnalyzer",
    "HonakerTreeMechanism",
]


def honaker_level_variance(level: int, sigma0: float = 1.0) -> float:
    """v_j = 2^j σ₀²/(2^{j+1} − 1): the variance of the bottom-up estimate of a level-j node.

    Parameters
    ----------
    level : int
        j ≥ 0 (0: a leaf).
    sigma0 : float, default 1.0
        σ₀, the standard deviation of every node's noise.

    Returns
    -------
    float
    """
    j = check_int_in_range("level", level, 0, 63)
    sigma0 = check_nonnegative_float("sigma0", sigma0)
    return sigma0**2 * 2.0**j / (2.0 ** (j + 1) - 1.0)


def _level_weights(kappa: int) -> np.ndarray:
    """w_j = 2^j/(2^{j+1} − 1), the weight of a node's own noisy value in its estimate."""
    j = np.arange(kappa, dtype=float)
    return 2.0**j / (2.0 ** (j + 1) - 1.0)


def honaker_prefix_variance(k: int, sigma0: float = 1.0) -> float:
    """Var(ŝ_k) = σ₀² Σ_{j : bit j of k set} 2^j/(2^{j+1} − 1): the per-entry variance of the
    Honaker estimate of the prefix sum at step k (module docstring).

    Parameters
    ----------
    k : int
        The step, k ≥ 1.
    sigma0 : float, default 1.0
        σ₀ of every node's noise.

    Returns
    -------
    float
    """
    k = check_positive_int("k", k, max_value=MAX_STEPS)
    sigma0 = check_nonnegative_float("sigma0", sigma0)
    w = _level_weights(k.bit_length())
    bits = np.array([k >> j & 1 for j in range(k.bit_length())], dtype=bool)
    return float(sigma0**2 * w[bits].sum())


def honaker_max_prefix_variance(n_steps: int, sigma0: float = 1.0) -> float:
    """max_{1≤k≤K} :func:`honaker_prefix_variance` (k, σ₀).

    Every level adds a positive term, so the maximum is at K itself or at a k that keeps K's
    bits above some set bit b, clears b and sets every bit below it (O(log K) candidates).

    Parameters
    ----------
    n_steps : int
        K ≥ 1.
    sigma0 : float, default 1.0

    Returns
    -------
    float
    """
    K = check_positive_int("n_steps", n_steps, max_value=MAX_STEPS)
    candidates = [K] + [((K >> (b + 1)) << (b + 1)) | ((1 << b) - 1) for b in range(K.bit_length()) if K >> b & 1]
    return max(honaker_prefix_variance(k, sigma0) for k in candidates if k >= 1)


def _check_shapes(n_steps: int, item_shape: int | tuple[int, ...], batch_shape: int | tuple[int, ...]
                  ) -> tuple[int, tuple[int, ...], tuple[int, ...], int]:
    n_steps = check_positive_int("n_steps", n_steps, max_value=MAX_STEPS)
    item_shape = check_shape("item_shape", item_shape, allow_empty=False)
    batch_shape = check_shape("batch_shape", batch_shape)
    kappa = tree_depth(n_steps)
    size = 2 * kappa * math.prod(batch_shape) * math.prod(item_shape)
    if size > MAX_STEPS:
        raise ValueError(f"batch_shape={batch_shape} and item_shape={item_shape} over n_steps={n_steps} need {size} "
                         "stored floats, more than 10^9")
    return n_steps, item_shape, batch_shape, kappa


def _levels_below(j: np.ndarray, kappa: int, extra: int) -> np.ndarray:
    """(κ, R', 1, …): True where level l ≤ j_r (the levels run r releases at its step)."""
    return (np.arange(kappa)[:, None] <= j[None, :]).reshape((kappa, -1) + (1,) * extra)


class FullTreeRandomizer:
    """The full binary tree's randomizer: at step k, every node closing at k, each with fresh noise.

    At step k (j = ν(k)) the nodes of levels 0, …, j close: the leaf γ_k and, for l ≥ 1, the
    sum of the stored left sibling at level l − 1 and the node just formed at l − 1.  Each is
    released with i.i.d. N(0, σ₀²) noise per entry; the node at level j is stored (it is a left
    sibling until its parent closes).  State: one stored p-sum per level, O(κ) = O(log K).

    The release has shape ``batch_shape + (κ,) + item_shape``: level l on the axis after the
    batch axes, zero for the levels l > j that are not released at this step.

    Parameters
    ----------
    n_steps : int
        K, the steps the tree covers.
    item_shape : tuple of int
        Shape of one stream element.
    sigma0 : float
        σ₀ ≥ 0 of every node's Gaussian noise.
    batch_shape : tuple of int, optional
        Leading axes of independent randomizers (runs, agents); the first is the run axis of
        ``runs=``.
    """

    def __init__(self, n_steps: int, item_shape: int | tuple[int, ...], sigma0: float, *,
                 batch_shape: int | tuple[int, ...] = ()) -> None:
        self.n_steps, self.item_shape, self.batch_shape, self.kappa = _check_shapes(n_steps, item_shape, batch_shape)
        self.sigma0 = check_nonnegative_float("sigma0", sigma0)
        self.k = 0
        self.steps = np.zeros(self.batch_shape[0] if self.batch_shape else 1, dtype=np.int64)
        self._left = np.zeros((self.kappa,) + self.batch_shape + self.item_shape)

    @property
    def shape(self) -> tuple[int, ...]:
        """Shape of one stream element: batch_shape + item_shape."""
        return self.batch_shape + self.item_shape

    @property
    def state_elements(self) -> int:
        """The stream elements (item-shaped arrays) one randomizer stores: κ p-sums."""
        return self._left.shape[0]

    def release(self, gamma: ArrayLike, rng: np.random.Generator, *, runs: ArrayLike | None = None,
                return_noise: bool = False) -> tuple[Any, ...]:
        """Take γ_k and return (j, nodes): j = ν(k) and the noisy nodes of levels 0..j (zeros above).

        ``runs`` and lockstep behave as in :meth:`fedbandit.mechanisms.tree.TreeRandomizer.release`
        (``j`` is then the runs' levels); ``return_noise=True`` also returns the noise added.
        """
        rng = check_rng("rng", rng)
        gamma = np.asarray(gamma, dtype=float)
        if runs is None and self.batch_shape and np.any(self.steps != self.k):
            runs = np.arange(self.steps.size)
        nb = len(self.batch_shape)
        if runs is None:
            if gamma.shape != self.shape:
                raise ValueError(f"gamma must have shape {self.shape}, got {gamma.shape}")
            if self.k >= self.n_steps:
                raise ValueError(f"the tree covers n_steps={self.n_steps} steps; step {self.k + 1} is past its end")
            self.k += 1
            self.steps += 1
            j = (self.k & -self.k).bit_length() - 1
            nodes = np.zeros((self.kappa,) + gamma.shape)
            node = gamma
            nodes[0] = node
            for level in range(1, j + 1):
                node = self._left[level - 1] + node
                nodes[level] = node
            self._left[j] = node
            z = np.zeros_like(nodes)
            z[: j + 1] = draw_noise_unchecked(rng, (j + 1,) + gamma.shape, self.sigma0, "gaussian")
            out = np.moveaxis(nodes + z, 0, nb)
            return (j, out, np.moveaxis(z, 0, nb)) if return_noise else (j, out)
        idx, kk = advance_runs(self, runs, gamma, "gamma", "the tree")
        jr = lowest_set_bits(kk)
        extra = gamma.ndim - 1
        released = _levels_below(jr, self.kappa, extra)
        left = self._left[:, idx]
        nodes = np.zeros((self.kappa,) + gamma.shape)
        node = gamma
        nodes[0] = node
        for level in range(1, int(jr.max()) + 1):
            node = np.where(released[level], left[level - 1] + node, node)
            nodes[level] = np.where(released[level], node, 0.0)
        levels = np.arange(self.kappa).reshape((self.kappa, 1) + (1,) * extra)
        self._left[:, idx] = np.where(levels == jr.reshape((1, -1) + (1,) * extra), node[None], left)
        top = int(jr.max()) + 1
        z = np.zeros_like(nodes)
        z[:top] = np.where(released[:top], draw_noise_unchecked(rng, (top,) + gamma.shape, self.sigma0, "gaussian"), 0.0)
        out = np.moveaxis(nodes + z, 0, nb)
        return (jr, out, np.moveaxis(z, 0, nb)) if return_noise else (jr, out)


class HonakerAnalyzer:
    """Honaker's bottom-up estimator of the prefix sums from the full tree's noisy nodes [H15]_.

    Keeps, per level, the estimate of the latest closed node; at step k (j = ν(k)) the new
    nodes of levels 0..j are estimated bottom up -- ê_0 = y_0, ê_l = w_l·y_l + (1 − w_l)·(ê of
    the stored left sibling + ê_{l−1}), w_l = 2^l/(2^{l+1} − 1) -- and the prefix estimate is
    the sum of the stored estimates at the set bits of k (module docstring).  The weights need
    only that every node's noise has the same variance (one σ₀ per node, summed over the same
    parties).

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
        self.n_steps, self.item_shape, self.batch_shape, self.kappa = _check_shapes(n_steps, item_shape, batch_shape)
        self.k = 0
        self.steps = np.zeros(self.batch_shape[0] if self.batch_shape else 1, dtype=np.int64)
        self._estimate = np.zeros((self.kappa,) + self.batch_shape + self.item_shape)
        self._weights = _level_weights(self.kappa)

    @property
    def state_elements(self) -> int:
        """The stream elements (item-shaped arrays) one analyzer stores: κ node estimates."""
        return self._estimate.shape[0]

    def update(self, j: int | np.ndarray, nodes: ArrayLike, *, runs: ArrayLike | None = None) -> np.ndarray:
        """Take the noisy nodes of step k (shape batch_shape + (κ,) + item_shape, as
        :meth:`FullTreeRandomizer.release` returns them, summed over parties) and return ŝ_k."""
        nodes = np.asarray(nodes, dtype=float)
        if runs is None and self.batch_shape and np.any(self.steps != self.k):
            runs = np.arange(self.steps.size)
        nb = len(self.batch_shape)
        w = self._weights
        if runs is None:
            want = self.batch_shape + (self.kappa,) + self.item_shape
            if nodes.shape != want:
                raise ValueError(f"nodes must have shape {want}, got {nodes.shape}")
            expected = advance_together(self, j)
            y = np.moveaxis(nodes, nb, 0)
            est = y[0]
            for level in range(1, expected + 1):
                est = w[level] * y[level] + (1.0 - w[level]) * (self._estimate[level - 1] + est)
            self._estimate[expected] = est
            bits = [level for level in range(self.kappa) if self.k >> level & 1]
            return self._estimate[bits].sum(axis=0)
        idx = np.asarray(runs, dtype=np.int64)
        y = np.moveaxis(nodes, nb, 0)  # (κ, R', ...)
        idx, kk = advance_runs(self, idx, y[0], "nodes", "the tree")
        levels_k = lowest_set_bits(kk)
        if not np.array_equal(np.asarray(j), levels_k):
            raise ValueError(f"j must be the lowest set bits of the runs' steps, {levels_k}, got {j!r}")
        extra = y.ndim - 2
        released = _levels_below(levels_k, self.kappa, extra)
        stored = self._estimate[:, idx]
        est = y[0]
        for level in range(1, int(levels_k.max()) + 1):
            est = np.where(released[level], w[level] * y[level] + (1.0 - w[level]) * (stored[level - 1] + est), est)
        level_axis = np.arange(self.kappa).reshape((self.kappa, 1) + (1,) * extra)
        stored = np.where(level_axis == levels_k.reshape((1, -1) + (1,) * extra), est[None], stored)
        self._estimate[:, idx] = stored
        return sum_at_set_bits(stored, kk, extra)


class HonakerTreeMechanism:
    """Central full tree with Honaker's estimator: a trusted curator releases every node with
    N(0, σ²) noise and the bottom-up estimate of each prefix (variance
    :func:`honaker_prefix_variance` (k, σ)).

    Parameters
    ----------
    n_steps : int
        K, the steps the tree covers.
    item_shape : tuple of int
        The shape of one stream element.
    sigma : float
        σ of every node.
    batch_shape : tuple of int, optional
        Leading axes of independent trees.
    """

    def __init__(self, n_steps: int, item_shape: int | tuple[int, ...], sigma: float, *,
                 batch_shape: int | tuple[int, ...] = ()) -> None:
        self.randomizer = FullTreeRandomizer(n_steps, item_shape, sigma, batch_shape=batch_shape)
        self.analyzer = HonakerAnalyzer(n_steps, item_shape, batch_shape=batch_shape)

    @property
    def k(self) -> int:
        return self.randomizer.k

    def step(self, x: ArrayLike, rng: np.random.Generator, *, runs: ArrayLike | None = None) -> np.ndarray:
        """Take the next stream element and return the estimated prefix sum."""
        j, nodes = self.randomizer.release(x, rng, runs=runs)
        return self.analyzer.update(j, nodes, runs=runs)
