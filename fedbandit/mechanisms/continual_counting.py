"""Private counting under continual observation: binary, logarithmic and hybrid mechanisms.

Chan, Shi & Song ({cite}`chan2011private`) release, after every new item ``x(n)`` of a
stream with values in an interval of width ``sensitivity``, a private estimate of the
running sum ``s(n) = x(1) + ... + x(n)``:

* the **binary mechanism** (bounded horizon ``T``) keeps one noisy p-sum per node of the
  dyadic tree over ``1..T``; the estimate at ``n`` adds the nodes of the set bits of
  ``n``; each item enters at most ``L = bit_length(T)`` nodes, so each node gets
  ``Lap(L * sensitivity / epsilon)`` and the whole stream is ``epsilon``-DP; error
  ``O(log^{1.5} T / epsilon)``;
* the **logarithmic mechanism** (unbounded) releases at every power of two ``n = 2^k`` the
  previous release plus the items since then plus ``Lap(sensitivity / epsilon)``; each item
  enters one release, so it is ``epsilon``-DP; it outputs only at powers of two;
* the **per-item Laplace mechanism** (unbounded) releases every item with its own
  ``Lap(sensitivity / epsilon)`` and outputs the running sum of the noisy items; each item
  enters one release, so it is ``epsilon``-DP by the Laplace mechanism, but the error
  after ``n`` items is a sum of ``n`` Laplace variables, ``O(sqrt(n) / epsilon)``: the
  baseline the tree-based mechanisms improve on;
* the **hybrid mechanism** (unbounded) runs a logarithmic mechanism with ``epsilon/2`` and,
  inside every interval ``(2^k, 2^{k+1})``, a fresh binary mechanism with ``epsilon/2`` and
  horizon ``2^k - 1`` over the items of that interval; its output at ``n = 2^k + tau`` is
  ``L(2^k) + B_k(tau)``, and ``L(n)`` at powers of two.  Each item enters one logarithmic
  release and at most ``k`` binary nodes, so the hybrid mechanism is ``epsilon``-DP for
  every horizon (Chan et al., Theorem 4.7; error bound Corollary 4.8 = Fact 1 of Li, Song &
  Fragouli, {cite}`li2022federated`).

Vectorization.  Every class here holds a batch of independent streams (``batch_shape``,
e.g. ``(runs, agents, arms)``), each with its own step count: a stream advances only when
it receives an item (for a bandit, when its arm is pulled).  :meth:`step` advances the
streams selected by a mask; :meth:`step_flat` the streams at given flat indices (the fast
path used by the learners).  One step costs a handful of array operations on the advancing
streams only, independent of the tree depth: the noisy prefix at count ``tau`` is stored
as ``N(tau) = N(tau - lowbit(tau)) + Z`` in a slot per tree level, where ``Z`` is the fresh
noise of the node that ``tau`` closes, and ``N(tau - lowbit(tau))`` is still in the slot of
its own lowest level (no count in between touches that slot).  This equals the textbook sum
over the set bits of ``tau`` (checked against a line-by-line version in the tests).

Random draws: every step draws exactly one standard Laplace variate per advancing stream,
in the order of the flat indices, with :func:`draw_standard_laplace` (one call per step),
which the loop references in ``tests/`` reuse to make the same decisions.

Noise scales: every Laplace scale comes from the rules of
:mod:`fedbandit.accounting.counting` (the mechanisms never compute one from ε themselves).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from fedbandit._validation import (
    MAX_STEPS,
    check_array,
    check_bool,
    check_epsilon,
    check_int_array,
    check_nonnegative_int,
    check_positive_float,
    check_positive_int,
    check_rng,
    check_shape,
)
from fedbandit.accounting.counting import (
    binary_counter_scale,
    hybrid_counter_scales,
    per_item_counter_scale,
)

__all__ = [
    "BinaryMechanism",
    "LogarithmicMechanism",
    "HybridMechanism",
    "PerItemLaplaceMechanism",
    "hybrid_noise_variance",
    "binary_noise_variance",
    "per_item_noise_variance",
    "hybrid_sd_bound_by_level",
    "hybrid_sd_factor",
    "lowest_set_bit_index",
    "floor_log2",
    "draw_standard_laplace",
]


# Lookup tables for counts below 2^20 (the learners' hot path); larger counts use frexp.
_TABLE_BITS = 20
_t = np.arange(1 << _TABLE_BITS, dtype=np.int64)
_FLOOR_LOG2 = (np.frexp(np.maximum(_t, 1).astype(np.float64))[1] - 1).astype(np.int8)
_FLOOR_LOG2[0] = 0
_LSB = (np.frexp((_t & -_t).astype(np.float64))[1] - 1).astype(np.int8)
_LSB[0] = 0
# The hybrid mechanism's binary-tree columns at count n (level j in column j + 1, column 0 the
# zero "empty" column): where the node that n closes is written (tau = n - 2^floor(log2 n);
# 0 at tau = 0) and where the prefix it extends is read (rest = tau - lowbit(tau); 0 when
# rest = 0).  One lookup each instead of the five integer passes that derive them per step.
_tau = _t - (np.int64(1) << _FLOOR_LOG2.astype(np.int64))
_rest = _tau & (_tau - 1)
_HYB_WRITE_COL = np.where(_tau > 0, _LSB[_tau].astype(np.int64) + 1, 0).astype(np.int8)
_HYB_READ_COL = np.where(_rest > 0, _LSB[_rest].astype(np.int64) + 1, 0).astype(np.int8)
# The level factor of the step's noise scale at count n: 1 at the powers of two (the log release's
# Lap(b)), floor(log2 n) elsewhere (the node's Lap(k b)); exact small integers as floats, so
# b * factor equals the where(power of two, b, b * k) it replaces when both parts share b.
_HYB_NOISE_LEVEL = np.where(_tau == 0, 1, _FLOOR_LOG2).astype(np.float64)
del _t, _tau, _rest


def lowest_set_bit_index(n: ArrayLike) -> np.ndarray:
    """Index ``i`` of the lowest set bit of integers ``n >= 0`` (``n & -n == 2^i``; 0 for ``n = 0``).

    Parameters
    ----------
    n : int or array_like of int
        Count(s) n ≥ 0.

    Returns
    -------
    ndarray of int64
        The index of each lowest set bit.
    """
    return _lowest_set_bit_index(check_int_array("n", n, low=0))


def _lowest_set_bit_index(n: ArrayLike) -> np.ndarray:
    n = np.asarray(n, dtype=np.int64)
    if n.size == 0 or n.max() < (1 << _TABLE_BITS):
        return _LSB[n].astype(np.int64)
    low = n & -n
    return np.maximum(np.frexp(low.astype(np.float64))[1] - 1, 0).astype(np.int64)


def floor_log2(n: ArrayLike) -> np.ndarray:
    """``floor(log2 n)`` for integers ``1 <= n < 2^53`` (exact; 0 for ``n = 0``).

    Parameters
    ----------
    n : int or array_like of int
        Integers in [0, 2^53).

    Returns
    -------
    ndarray of int64
        ⌊log₂ n⌋ (0 at n = 0).
    """
    return floor_log2_unchecked(check_int_array("n", n, low=0, high=2**53 - 1))


def floor_log2_unchecked(n: ArrayLike) -> np.ndarray:
    n = np.asarray(n, dtype=np.int64)
    if n.size == 0 or n.max() < (1 << _TABLE_BITS):
        return _FLOOR_LOG2[n].astype(np.int64)
    return np.maximum(np.frexp(n.astype(np.float64))[1] - 1, 0).astype(np.int64)


def draw_standard_laplace(rng: np.random.Generator, size: int) -> np.ndarray:
    """``size`` standard Laplace variates, drawn as the difference of two exponentials.

    ``E_1 - E_2`` with ``E_1, E_2`` i.i.d. standard exponential is standard Laplace; numpy's
    ziggurat exponential sampler makes this faster than ``rng.laplace``.  The first
    ``size`` exponentials are the ``E_1``'s; every mechanism here draws its noise through
    this function, and the loop references do too, so they see the same values.

    Parameters
    ----------
    rng : numpy.random.Generator
    size : int
        The number of variates.

    Returns
    -------
    ndarray of shape (size,)
    """
    rng = check_rng("rng", rng)
    size = check_nonnegative_int("size", size, max_value=MAX_STEPS, reason="an array of size variates is drawn")
    return _draw_standard_laplace(rng, size)


def _draw_standard_laplace(rng: np.random.Generator, size: int) -> np.ndarray:
    e = rng.standard_exponential(2 * size)
    return e[:size] - e[size:]


def _popcount(n: ArrayLike) -> np.ndarray:
    n = np.asarray(n, dtype=np.int64).copy()
    c = np.zeros(n.shape, dtype=np.int64)
    while np.any(n):
        c += n & 1
        n >>= 1
    return c


def binary_noise_variance(n: ArrayLike, n_steps: int, epsilon: float, sensitivity: float = 1.0) -> np.ndarray:
    """Variance of the binary mechanism's error at count ``n``: ``popcount(n) * 2 b^2``, ``b = L s / eps``.

    Parameters
    ----------
    n : int or array_like of int
        Count(s) n ≥ 0.
    n_steps : int
        The stream's length (sets L).
    epsilon : float
        ε.
    sensitivity : float, default 1.0
        s.

    Returns
    -------
    ndarray
        The variance at each n.
    """
    n = check_int_array("n", n, low=0)
    b = binary_counter_scale(epsilon, n_steps, sensitivity)
    return _popcount(n) * 2.0 * b * b


def per_item_noise_variance(n: ArrayLike, epsilon: float, sensitivity: float = 1.0) -> np.ndarray:
    """Variance of the per-item Laplace mechanism's error at count ``n``: ``n`` releases of ``Lap(s/eps)``, ``2 n b^2``.

    Parameters
    ----------
    n : int or array_like of int
        Count(s) n ≥ 0.
    epsilon : float
        ε.
    sensitivity : float, default 1.0
        s.

    Returns
    -------
    ndarray
        The variance at each n.
    """
    n = check_int_array("n", n, low=0)
    b = per_item_counter_scale(epsilon, sensitivity)
    return n * 2.0 * b * b


def hybrid_noise_variance(n: ArrayLike, epsilon: float, sensitivity: float = 1.0) -> np.ndarray:
    """Exact variance of the hybrid mechanism's error at count ``n >= 1``.

    With ``k = floor(log2 n)`` and ``tau = n - 2^k``: ``k + 1`` logarithmic releases of
    ``Lap(2 s / eps)`` plus ``popcount(tau)`` binary nodes of ``Lap(2 k s / eps)``; a
    Laplace variable of scale ``b`` has variance ``2 b^2``.  Zero at ``n = 0``.

    Parameters
    ----------
    n : int or array_like of int
        Count(s) in [0, 2^53).
    epsilon : float
        ε.
    sensitivity : float, default 1.0
        s.

    Returns
    -------
    ndarray
        The variance at each n.
    """
    n = check_int_array("n", n, low=0, high=2**53 - 1)
    pos = np.maximum(n, 1)
    k = floor_log2_unchecked(pos)
    tau = pos - (np.int64(1) << k)
    b_log, b_level = hybrid_counter_scales(epsilon, sensitivity)
    b_bin = b_level * k
    var = (k + 1) * 2.0 * b_log**2 + _popcount(tau) * 2.0 * b_bin**2
    return np.where(n > 0, var, 0.0)


def hybrid_sd_bound_by_level(max_level: int = 64) -> np.ndarray:
    """``g(k)`` with ``b g(k)``, ``b = 2s/eps``, an upper bound on the hybrid noise's standard deviation.

    For counts ``n`` with ``floor(log2 n) = k``: ``g(k) = sqrt(2 (k + 1) + 2 k^3)``, the
    exact variance (:func:`hybrid_noise_variance`: ``k + 1`` releases of ``Lap(2s/eps)``,
    ``popcount(tau) <= k`` nodes of ``Lap(2ks/eps)``) divided by ``(2s/eps)^2``, with
    ``popcount(tau)`` replaced by its maximum ``k``.  [derived]

    Parameters
    ----------
    max_level : int, default 64
        The largest level k.

    Returns
    -------
    ndarray of shape (max_level + 1,)
        g(0), ..., g(max_level).
    """
    max_level = check_nonnegative_int("max_level", max_level, max_value=1024, reason="counts below 2^1024")
    k = np.arange(max_level + 1, dtype=float)
    return np.sqrt(2.0 * (k + 1) + 2.0 * k**3)


_SD_TABLE = None  # hybrid_sd_factor for counts below 2^_TABLE_BITS, built on first use


def hybrid_sd_factor(n: ArrayLike) -> np.ndarray:
    """``e(n)`` with ``b e(n)``, ``b = 2s/eps``, the *exact* standard deviation of the hybrid noise at count ``n``.

    From the mechanism's structure (:func:`hybrid_noise_variance`): with ``k = floor(log2 n)``
    and ``tau = n - 2^k``, the output at ``n`` carries ``k + 1`` logarithmic releases of
    ``Lap(b)`` and ``popcount(tau)`` binary nodes of ``Lap(k b)``, so
    ``e(n) = sqrt(2 (k + 1) + 2 popcount(tau) k^2)``; ``e(0) = 0``.  The level bound
    :func:`hybrid_sd_bound_by_level` replaces ``popcount(tau)`` by its maximum ``k`` and is
    up to ``sqrt(k)`` times larger (1.61 at ``n = 300``: popcount(44) = 3 against k = 8).
    Checked against a Monte Carlo of :class:`HybridMechanism` in the tests.  [derived]

    Parameters
    ----------
    n : int or array_like of int
        Count(s) in [0, 2^53).

    Returns
    -------
    ndarray
        e(n) at each n.
    """
    n = check_int_array("n", n, low=0, high=2**53 - 1)
    return hybrid_sd_factor_unchecked(n)


def hybrid_sd_factor_unchecked(n: ArrayLike) -> np.ndarray:
    global _SD_TABLE
    n = np.asarray(n, dtype=np.int64)
    if _SD_TABLE is None:
        t = np.arange(1 << _TABLE_BITS, dtype=np.int64)
        _SD_TABLE = _sd_factor_direct(t)
    if n.size == 0 or n.max() < (1 << _TABLE_BITS):
        return _SD_TABLE.take(n)
    return _sd_factor_direct(n)


def _sd_factor_direct(n: np.ndarray) -> np.ndarray:
    pos = np.maximum(n, 1)
    k = floor_log2_unchecked(pos)
    tau = pos - (np.int64(1) << k)
    e = np.sqrt(2.0 * (k + 1) + 2.0 * _popcount(tau) * k.astype(float) ** 2)
    return np.where(n > 0, e, 0.0)


class _BatchedStreams:
    """Shared state handling: batch shape, counts, true sums, mask/flat stepping."""

    def __init__(self, epsilon: ArrayLike, batch_shape: int | tuple[int, ...], sensitivity: float) -> None:
        self.sensitivity = check_positive_float("sensitivity", sensitivity)
        batch_shape = check_shape("batch_shape", batch_shape, allow_zero=True, max_size=MAX_STEPS // 64)
        self.batch_shape = batch_shape
        self.size = int(np.prod(batch_shape)) if batch_shape else 1
        self.epsilon: float | np.ndarray
        self._eps_flat: np.ndarray | None
        if np.ndim(epsilon) == 0:
            self.epsilon = check_epsilon("epsilon", epsilon)
            self._eps_flat = None
        else:
            # One epsilon per stream (e.g. per run, to sweep epsilon in one simulation).
            eps = check_array("epsilon", epsilon)
            if not np.all(eps > 0):
                raise ValueError(f"epsilon must lie in (0, inf) for every stream, got min {eps.min()!r}")
            try:
                eps = np.broadcast_to(eps, batch_shape)
            except ValueError as exc:
                raise ValueError(f"epsilon of shape {eps.shape} does not broadcast to batch_shape {batch_shape}") from exc
            self.epsilon = eps
            self._eps_flat = np.ascontiguousarray(eps).reshape(-1).copy()
        self._count = np.zeros(self.size, dtype=np.int64)
        self._true = np.zeros(self.size)

    @property
    def count(self) -> np.ndarray:
        """Number of items received by every stream (shape ``batch_shape``)."""
        return self._count.reshape(self.batch_shape).copy()

    @property
    def true_sum(self) -> np.ndarray:
        """Exact running sums (for tests and diagnostics; never released)."""
        return self._true.reshape(self.batch_shape).copy()

    @property
    def value(self) -> np.ndarray:
        """Current private estimates of the running sums (shape ``batch_shape``)."""
        return self._value_flat().reshape(self.batch_shape).copy()

    def step(self, x: ArrayLike, rng: np.random.Generator, where: ArrayLike | None = None) -> np.ndarray:
        """Feed one item to every stream (or to those where ``where`` is True).

        Parameters
        ----------
        x : array broadcastable to ``batch_shape``
            The new items; entries of streams that do not advance are ignored.
        rng : numpy.random.Generator
            Source of the Laplace noise (one standard variate per advancing stream, in
            C order).
        where : bool array broadcastable to ``batch_shape``, optional
            Which streams advance (default: all).

        Returns
        -------
        numpy.ndarray of shape ``batch_shape``
            The private estimates after the step (unchanged for streams that did not
            advance).
        """
        rng = check_rng("rng", rng)
        x = check_array("x", np.broadcast_to(np.asarray(x, dtype=float), self.batch_shape))
        if where is None:
            idx = np.arange(self.size)
        else:
            mask = np.broadcast_to(np.asarray(where, dtype=bool), self.batch_shape)
            idx = np.flatnonzero(mask)
        xf = x.reshape(-1)[idx]
        self._check_range(xf)
        self.step_flat(idx, xf, rng)
        return self.value

    def _check_range(self, xf: np.ndarray) -> None:
        if xf.size and np.max(np.abs(xf)) > self.sensitivity * (1 + 1e-12):
            raise ValueError(
                f"x has an item of magnitude {np.max(np.abs(xf))!r} > sensitivity={self.sensitivity!r}; "
                "clip the stream to an interval of width sensitivity first"
            )

    def _value_flat(self) -> np.ndarray:
        """Private estimates of every stream, flat (each mechanism keeps its own state)."""
        raise NotImplementedError

    def value_at(self, idx: np.ndarray) -> np.ndarray:
        """Private estimates of the streams at flat indices ``idx`` (no copy of the batch)."""
        raise NotImplementedError

    def step_flat(self, idx: np.ndarray, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Fast path: advance the streams at flat indices ``idx`` (distinct) with items ``x``.

        No argument checking (the learners call it once per slot); returns the new private
        estimates of those streams, in the order of ``idx``.
        """
        raise NotImplementedError


class BinaryMechanism(_BatchedStreams):
    """Binary (tree) mechanism of Chan, Shi & Song for streams of at most ``n_steps`` items.

    Parameters
    ----------
    n_steps : int
        Horizon ``T``; each item enters at most ``L = bit_length(T)`` p-sums.
    epsilon : float
        Privacy of each whole stream (pure ``epsilon``-DP for a change of one item within
        an interval of width ``sensitivity``).
    batch_shape : tuple of int
        Shape of the batch of independent streams.
    sensitivity : float, default 1
        Width of the interval the items lie in.

    Notes
    -----
    Node noise ``Lap(L * sensitivity / epsilon)``; error variance at count ``n``:
    ``popcount(n) * 2 (L s / eps)^2`` (:func:`binary_noise_variance`).
    """

    def __init__(self, n_steps: int, epsilon: ArrayLike, batch_shape: int | tuple[int, ...] = (), *,
                 sensitivity: float = 1.0) -> None:
        super().__init__(epsilon, batch_shape, sensitivity)
        self.n_steps = check_positive_int("n_steps", n_steps)
        self.n_levels = self.n_steps.bit_length()
        eps = self.epsilon if self._eps_flat is None else self._eps_flat
        self.node_scale: Any = binary_counter_scale(  # a float, or one per stream
            eps, self.n_steps, self.sensitivity)
        self._H = np.zeros((self.size, self.n_levels))
        self._noise = np.zeros(self.size)

    def _value_flat(self) -> np.ndarray:
        return self._true + self._noise

    def value_at(self, idx: np.ndarray) -> np.ndarray:
        return self._true[idx] + self._noise[idx]

    def step_flat(self, idx: np.ndarray, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        idx = np.asarray(idx, dtype=np.int64)
        n = self._count[idx] + 1
        if n.size and n.max() > self.n_steps:
            raise ValueError(f"BinaryMechanism: a stream exceeds its horizon n_steps={self.n_steps}")
        self._count[idx] = n
        self._true[idx] += x
        scale = self.node_scale if self._eps_flat is None else self.node_scale[idx]
        z = _draw_standard_laplace(rng, idx.size) * scale
        i = _lowest_set_bit_index(n)
        rest = n & (n - 1)
        W = self.n_levels
        Hf = self._H.reshape(-1)
        has_rest = rest > 0
        base = np.where(has_rest, Hf[idx * W + _lowest_set_bit_index(np.maximum(rest, 1))], 0.0)
        noise = base + z
        Hf[idx * W + i] = noise
        self._noise[idx] = noise
        return self._true[idx] + noise

    def step_flat_increment(self, idx: np.ndarray, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """As :meth:`step_flat` but return the *change* of each advancing stream's output."""
        before = self.value_at(idx)
        return self.step_flat(idx, x, rng) - before


class LogarithmicMechanism(_BatchedStreams):
    """Logarithmic mechanism of Chan, Shi & Song (unbounded horizon).

    At counts ``n = 2^k`` it releases ``L(2^k) = L(2^{k-1}) + (items since) + Lap(s / eps)``;
    between powers of two it repeats the last release (``0`` before the first item).
    Pure ``epsilon``-DP (each item enters exactly one release).

    Parameters
    ----------
    epsilon : float or array_like
        ε (one per stream, broadcast against ``batch_shape``).
    batch_shape : tuple of int, default ()
        The shape of the independent streams run side by side.
    sensitivity : float, default 1.0
        Width of the interval the items lie in.
    """

    def __init__(self, epsilon: ArrayLike, batch_shape: int | tuple[int, ...] = (), *, sensitivity: float = 1.0) -> None:
        super().__init__(epsilon, batch_shape, sensitivity)
        self._released = np.zeros(self.size)
        self._since = np.zeros(self.size)
        self._scale: Any = per_item_counter_scale(  # a float, or one per stream
            self.epsilon if self._eps_flat is None else self._eps_flat, self.sensitivity)

    def _value_flat(self) -> np.ndarray:
        return self._released.copy()

    def value_at(self, idx: np.ndarray) -> np.ndarray:
        return self._released[idx]

    def step_flat(self, idx: np.ndarray, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        idx = np.asarray(idx, dtype=np.int64)
        n = self._count[idx] + 1
        self._count[idx] = n
        self._true[idx] += x
        since = self._since[idx] + x
        pow2 = (n & (n - 1)) == 0
        z = _draw_standard_laplace(rng, idx.size) * (self._scale if self._eps_flat is None else self._scale[idx])
        self._released[idx] = np.where(pow2, self._released[idx] + since + z, self._released[idx])
        self._since[idx] = np.where(pow2, 0.0, since)
        return self._released[idx]


class HybridMechanism(_BatchedStreams):
    """Hybrid mechanism of Chan, Shi & Song (unbounded horizon, pure ``epsilon``-DP).

    Parameters
    ----------
    epsilon : float or array broadcastable to ``batch_shape``
        Privacy of each whole (unbounded) stream (an array gives every stream its own).
    batch_shape : tuple of int
        Shape of the batch of independent streams, e.g. ``(runs, agents, arms)``.
    sensitivity : float, default 1
        Width of the interval the items lie in (1 for rewards in [0, 1]).
    track_true : bool, default True
        Keep the exact running sums (:attr:`true_sum`, for tests and diagnostics); the
        learners turn it off to save work.

    Notes
    -----
    Logarithmic part with ``epsilon/2`` (``Lap(2 s/eps)`` at every power of two); binary
    part with ``epsilon/2`` in each interval ``(2^k, 2^{k+1})``, node noise
    ``Lap(2 k s / eps)`` (each item of that interval enters at most ``k`` nodes).  Output at
    ``n = 2^k + tau``: ``L(2^k) + B_k(tau)`` (``L(n)`` when ``tau = 0``).  The binary tree
    covers the items *after* ``2^k`` (``L(2^k)`` already holds item ``2^k``), so no item is
    counted twice.  Every step draws one standard Laplace variate per advancing stream
    (:func:`draw_standard_laplace`).  Error variance: :func:`hybrid_noise_variance`.
    """

    def __init__(self, epsilon: ArrayLike, batch_shape: int | tuple[int, ...] = (), *, sensitivity: float = 1.0,
                 track_true: bool = True) -> None:
        super().__init__(epsilon, batch_shape, sensitivity)
        self.track_true = check_bool("track_true", track_true)
        self._log = np.zeros(self.size)  # L(2^k), noisy
        self._since = np.zeros(self.size)  # exact sum of the items after 2^k
        self._bin = np.zeros(self.size)  # noise of B_k(tau)
        # 2s/eps per stream (or one number): the log releases' scale; nodes use k times it.
        self._c: Any  # a float, or one per stream
        self._c_level: Any
        self._c, self._c_level = hybrid_counter_scales(
            self.epsilon if self._eps_flat is None else self._eps_flat, self.sensitivity)
        self._steps = 0  # number of step calls: an upper bound on every count
        self._W = 8  # binary-tree levels stored so far (grows on demand: unbounded horizon)
        # Level j of the binary tree is column j + 1 of H; column 0 stays 0, so reading the
        # "empty prefix" (tau a power of two) and writing at tau = 0 (where the binary noise is
        # 0) both hit it without masks.
        self._H = np.zeros((self.size, self._W + 1))

    def _value_flat(self) -> np.ndarray:
        return self._log + self._since + self._bin

    def value_at(self, idx: np.ndarray) -> np.ndarray:
        return self._log.take(idx) + self._since.take(idx) + self._bin.take(idx)

    def _grow(self, levels: int) -> None:
        W = max(levels, 2 * self._W)
        H = np.zeros((self.size, W + 1))
        H[:, : self._W + 1] = self._H
        self._H, self._W = H, W

    def step_flat(self, idx: np.ndarray, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        since, noise, _ = self._step(idx, x, rng, False)
        return self._log.take(idx) + since + noise

    def step_flat_increment(self, idx: np.ndarray, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """As :meth:`step_flat` but return the *change* of each advancing stream's output.

        The change is ``x + Z + N(tau - lowbit(tau)) - N_old`` (``Z`` the step's noise), so
        consensus algorithms that broadcast output increments need no extra gathers.
        """
        return self._step(idx, x, rng, True)[2]

    def _step(self, idx: np.ndarray, x: np.ndarray, rng: np.random.Generator,
              increment: bool = True) -> tuple[np.ndarray, np.ndarray, Any]:
        # The learners' hot path (one call per slot on R M streams): ``take`` gathers (``put`` is
        # slower than the indexed assignment here), no reductions, each mask computed once, the tree's
        # columns read from tables, and the logarithmic part touched only where a count reaches
        # a power of two.  The output change (``increment``) is computed only when asked for (else None).
        idx = np.asarray(idx, dtype=np.int64)
        n = self._count.take(idx)
        n += 1
        self._count[idx] = n
        if self.track_true:
            self._true[idx] += x
        self._steps += 1
        if self._steps > (1 << self._W):
            # Every count is at most the number of steps: grow before a count can pass the
            # stored levels (where the growth happens changes no value).
            k_max = self._steps.bit_length() - 1
            if k_max > self._W:
                self._grow(k_max)
        # hybrid_counter_scales gives the log releases and the nodes the same b (one object):
        # then the step's scale is b times the tabled level factor (1 at powers of two, else k).
        shared_b = self._c_level is self._c
        level = k = None
        if self._steps < (1 << _TABLE_BITS):  # every count is below the tables' range
            if shared_b:
                level = _HYB_NOISE_LEVEL.take(n)
            else:
                k = _FLOOR_LOG2.take(n)
            col = _HYB_WRITE_COL.take(n)
            read_col = _HYB_READ_COL.take(n)
        else:
            k = floor_log2_unchecked(n)
            tau = n - (np.int64(1) << k)
            rest = tau & (tau - 1)
            col = np.where(tau > 0, _lowest_set_bit_index(np.maximum(tau, 1)) + 1, 0)
            read_col = np.where(rest > 0, _lowest_set_bit_index(np.maximum(rest, 1)) + 1, 0)
        pow2 = col == 0  # tau = 0: n is a power of two
        not_pow2 = ~pow2
        c = self._c if self._eps_flat is None else self._c.take(idx)
        # One draw per step: the log release's Lap(2s/eps) at powers of two, otherwise the
        # node noise Lap(2ks/eps) of the binary node that tau closes.
        z = _draw_standard_laplace(rng, idx.size)
        if level is not None:
            level *= c  # b * 1 = b at powers of two, b * k elsewhere: where(pow2, b, b * k)'s values
            z *= level
        else:
            c_level = c if shared_b else (self._c_level if self._eps_flat is None else self._c_level.take(idx))
            z *= np.where(pow2, c, c_level * k)
        since = self._since.take(idx)
        since += x
        # Logarithmic mechanism: release at n = 2^k (L(2^k) += the items since and the noise);
        # the binary tree then restarts.
        at = pow2.nonzero()[0]
        if at.size:
            li = idx.take(at)
            self._log[li] = self._log.take(li) + (since.take(at) + z.take(at))
        since *= not_pow2
        self._since[idx] = since
        # Binary mechanism of interval k: N(tau) = N(tau - lowbit(tau)) + Z, stored in the
        # column of level lowbit(tau); N(tau - lowbit(tau)) sits in the column of its own
        # lowest level, untouched since (all counts in between have lower lowest bits).
        row0 = idx * (self._W + 1)
        Hf = self._H.reshape(-1)
        base = Hf.take(row0 + read_col)
        noise = base + z
        noise *= not_pow2
        Hf[row0 + col] = noise  # at tau = 0 this writes 0 into the zero column
        if not increment:
            self._bin[idx] = noise
            return since, noise, None
        old_bin = self._bin.take(idx)
        self._bin[idx] = noise
        # Output change: x + z + base - old binary noise (at 2^k, base = 0 too).
        inc = x + z + base - old_bin
        return since, noise, inc


class PerItemLaplaceMechanism(_BatchedStreams):
    """Per-item Laplace counter: every item released with its own ``Lap(s/eps)`` (unbounded horizon).

    The output after ``n`` items is the running sum of the noisy items,
    ``x(1) + Z_1 + ... + x(n) + Z_n`` (the per-item baseline Chan, Shi & Song's tree
    mechanisms improve on).  Each item enters exactly one release, so every stream is pure
    ``epsilon``-DP by the Laplace mechanism; the error variance grows linearly, ``2 n (s/eps)^2``
    (:func:`per_item_noise_variance`): the baseline the binary and hybrid mechanisms improve
    on (polylogarithmic error).  One standard Laplace variate per advancing stream per step.

    Parameters
    ----------
    epsilon : float or array broadcastable to ``batch_shape``
    batch_shape : tuple of int
    sensitivity : float, default 1
    """

    def __init__(self, epsilon: ArrayLike, batch_shape: int | tuple[int, ...] = (), *, sensitivity: float = 1.0) -> None:
        super().__init__(epsilon, batch_shape, sensitivity)
        self._out = np.zeros(self.size)
        self.scale: Any = per_item_counter_scale(  # a float, or one per stream
            self.epsilon if self._eps_flat is None else self._eps_flat, self.sensitivity)

    def _value_flat(self) -> np.ndarray:
        return self._out

    def value_at(self, idx: np.ndarray) -> np.ndarray:
        return self._out[idx]

    def step_flat(self, idx: np.ndarray, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return self._advance(idx, x, rng)[0]

    def step_flat_increment(self, idx: np.ndarray, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """As :meth:`step_flat` but return the change of each advancing stream's output (the noisy item)."""
        return self._advance(idx, x, rng)[1]

    def _advance(self, idx: np.ndarray, x: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        idx = np.asarray(idx, dtype=np.int64)
        self._count[idx] += 1
        self._true[idx] += x
        scale = self.scale if self._eps_flat is None else self.scale[idx]
        noisy = x + _draw_standard_laplace(rng, idx.size) * scale
        out = self._out[idx] + noisy
        self._out[idx] = out
        return out, noisy


# The private names these helpers had before they were made public (fedbandit.protocols imported
# them): kept only so that code written against them still imports; nothing here uses them.
_floor_log2 = floor_log2_unchecked
_hybrid_sd_factor = hybrid_sd_factor_unchecked
