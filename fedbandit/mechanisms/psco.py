"""Private summation under continual observation (PSCO), vectorized over runs.

Users t = 1, ..., n arrive one by one with values x_t in [0, 1]; after user t the server
reports an estimate of the prefix sum S_t = Σ_{s ≤ t} x_s.  The error of an algorithm
is sup_t |Ŝ_t − S_t| (the α of an (n, α, β) algorithm, Tenenbaum, Kaplan, Mansour &
Stemmer 2023).  This module implements, for arrays of shape (runs, n):

* :func:`local_psco` -- local model: ε-LDP randomized response per user (error ~ sqrt(n)/ε);
* :func:`central_tree_psco` -- central binary-tree mechanism (Dwork, Naor, Pitassi &
  Rothblum 2010; Chan, Shi & Song 2011), noise on every dyadic p-sum;
* :func:`concurrent_psco` -- the k-shuffler algorithm (the book's reconstruction of the
  paper's Section 3.2 algorithm, [derived], see below); :func:`sequential_psco` is k = 1
  (the sequential shuffle model with the optimal batch size) and :func:`tree_psco` is
  the dyadic variant with k = ⌊log₂ n⌋ + 1 shufflers;
* :func:`extrapolating_psco` -- an algorithm that exploits *easy* inputs: it also
  counts the users of the unfinished batch by extrapolating the last batch's rate,
  which pays off on streams with a stable rate and fails on the hard family;
* :func:`sample_hard_input` -- the hard family Δ_{n,k} of the lower bound.

The k-level algorithm (the book's reconstruction)
-------------------------------------------------
Tenenbaum et al. 2023 give the k-shuffler algorithm in Section 3.2 and its error in
Corollary 3.3 (Õ(k^{3/2} n^{1/(2k+1)}/ε)); the book works from that prose, not from the
paper's algorithm box, so the batch allocation below is the book's own, chosen to be
consistent with Corollary 3.3 and with the lower bound's structure (chapter 4's
Reconstruction box "batch allocation of the k-shuffler algorithm"): shuffler
i ∈ {1, ..., k} runs consecutive batches of size b_i over the whole stream, with
b_1 > b_2 > ... > b_k and b_{i+1} | b_i; each batch runs the shuffled
randomized-response summation (:class:`fedbandit.mechanisms.randomized_response.RRShuffleSummation`) at the
per-level budget (ε₀, δ₀) of :func:`fedbandit.accounting.allocation.mechanism_budget` (every user joins
exactly k mechanisms).  The estimate after user t is the mixed-radix decomposition of
t: all released level-1 batches, plus the level-2 batches released inside the current
level-1 batch, ..., plus the level-k batches inside the current level-(k−1) batch; the
≤ b_k − 1 users of the current level-k batch are not counted yet.  With
b_i ≈ n^{(2k+1−2i)/(2k+1)} at most n^{2/(2k+1)} released batches per level enter an
estimate, each with O(sqrt(log(1/δ₀))/ε₀) noise, and b_k ≈ n^{1/(2k+1)} users are
missing: error Õ(k n^{1/(2k+1)}/ε) for advanced composition (ε₀ ≈ ε/sqrt(k)), within
the corollary's k^{3/2}.  :func:`optimal_batch_sizes` picks the constants numerically.

Aggregate sampling
------------------
A batch of m users of whom c hold bit 1 releases Z ~ Bin(c, q1) + Bin(m − c, q0) ones
(:func:`fedbandit.mechanisms.randomized_response.sample_rr_counts`); the default ``sampling="aggregate"``
draws Z directly, which is what makes n = 10⁷ cheap.  ``sampling="per_user"`` simulates
every message (one uniform per user and shuffler, in the layout of
:class:`fedbandit.protocols.intermediaries.ConcurrentShuffleModel`) and agrees with the plain loop of
``tests/reference_continual.py`` draw for draw; the tests check that both samplings agree
in distribution.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from fedbandit._validation import (
    MAX_COUNT,
    MAX_STEPS,
    check_batch_sizes,
    check_bool,
    check_choice,
    check_delta,
    check_epsilon,
    check_instance,
    check_int_in_range,
    check_positive_int,
    check_probability,
    check_rng,
    check_unit_interval,
)
from fedbandit.accounting.allocation import COMPOSITIONS, mechanism_budget
from fedbandit.accounting.calibration import laplace_counter_scale
from fedbandit.accounting.composition import group_budget
from fedbandit.accounting.counting import big_nk, c_epsilon, rep_nk
from fedbandit.accounting.shuffle import (
    local_rr_flip_probability,
    rr_estimator_variance,
    rr_flip_probability,
    rr_message_probabilities,
)
from fedbandit.accounting.zcdp import calibrate_gaussian_sigma
from fedbandit.mechanisms.randomized_response import rr_debias, sample_rr_counts, unary_resolution, unary_round
from fedbandit.mechanisms.tree import draw_noise, tree_depth

__all__ = [
    "ContinualRelease",
    "local_psco",
    "central_tree_psco",
    "concurrent_psco",
    "sequential_psco",
    "tree_psco",
    "extrapolating_psco",
    "run_psco",
    "PSCO_ALGORITHMS",
    "optimal_batch_sizes",
    "paper_batch_sizes",
    "dyadic_batch_sizes",
    "error_proxy",
    "sup_error",
    "prefix_sums",
    "sample_hard_input",
    "hard_input_single_positions",
    "sample_bernoulli_input",
    "bernoulli_concurrent_sup_error",
    "sample_runs_input",
    "rep_nk",
    "big_nk",
    "c_epsilon",
]

#: Names accepted by :func:`run_psco`.
PSCO_ALGORITHMS = ("local", "sequential", "concurrent", "tree", "central", "extrapolating")


# ---------------------------------------------------------------------------------------
# Release object and error
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ContinualRelease:
    """The estimates an algorithm reports for t = 0, ..., n.

    Estimates change only every ``block`` users: for t in [j·block, (j+1)·block) the
    estimate is ``values[:, j] + slopes[:, j]·(t − j·block)`` (``slopes`` None means 0).

    Attributes
    ----------
    n : int
        Number of users.
    block : int
        Update period (b_k for the k-level algorithms, 1 for local and central).
    values : ndarray, shape (runs, n // block + 1)
    slopes : ndarray or None
    info : dict
        Algorithm name, batch sizes, per-level budgets, blanket probabilities, noise
        standard deviations and the composed privacy guarantee.
    """

    n: int
    block: int
    values: np.ndarray
    slopes: np.ndarray | None = None
    info: dict = field(default_factory=dict)

    @property
    def runs(self) -> int:
        return self.values.shape[0]

    def estimates(self, times: ArrayLike) -> np.ndarray:
        """Estimates at the given times (integers in [0, n]); shape (runs, len(times))."""
        t = np.asarray(times, dtype=np.int64)
        if t.ndim != 1 or np.any(t < 0) or np.any(t > self.n):
            raise ValueError(f"times must be a 1-D array of integers in [0, {self.n}]")
        j = t // self.block
        out = self.values[:, j]
        if self.slopes is not None:
            out = out + self.slopes[:, j] * (t - j * self.block)
        return out

    def path(self) -> np.ndarray:
        """All estimates Ŝ_0, ..., Ŝ_n; shape (runs, n + 1)."""
        return self.estimates(np.arange(self.n + 1))


#: Largest ε of the shuffle algorithms: beyond it the randomized-response flip
#: probabilities 2/(e^ε + 1) underflow and the noise-variance curves take log(0).
MAX_PSCO_EPSILON = 700.0


def _check_psco_epsilon(epsilon: float) -> float:
    epsilon = check_epsilon("epsilon", epsilon)
    if epsilon > MAX_PSCO_EPSILON:
        raise ValueError(
            f"epsilon must lie in (0, {MAX_PSCO_EPSILON:g}] (beyond, the flip probability 2/(e^ε + 1) underflows), "
            f"got {epsilon!r}"
        )
    return epsilon


def _check_input_size(n: int, runs: int) -> None:
    if n * runs > MAX_STEPS:
        raise ValueError(f"runs={runs} sequences of n={n} users hold {n * runs} bits, more than 10^9")


def _as_runs(x: ArrayLike, name: str = "x") -> np.ndarray:
    arr = check_unit_interval(name, x)
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2 or arr.shape[1] < 1:
        raise ValueError(f"{name} must have shape (n,) or (runs, n) with n >= 1, got {np.shape(x)}")
    return arr


def prefix_sums(x: ArrayLike) -> np.ndarray:
    """S_0 = 0, S_t = Σ_{s ≤ t} x_s for t = 1..n; shape (runs, n + 1).

    Parameters
    ----------
    x : array_like, shape (n,) or (runs, n)
        The stream(s).

    Returns
    -------
    ndarray of shape (runs, n + 1)
    """
    arr = _as_runs(x)
    out = np.zeros((arr.shape[0], arr.shape[1] + 1), dtype=np.int64 if arr.dtype == np.uint8 else float)
    np.cumsum(arr, axis=1, out=out[:, 1:])
    return out


def sup_error(release: ContinualRelease, x: ArrayLike) -> np.ndarray:
    """sup_{1 ≤ t ≤ n} |Ŝ_t − S_t| for every run; shape (runs,).

    For piecewise-constant releases the supremum over a block is attained at one of its
    two ends, because S_t is non-decreasing (x_t ≥ 0); so only O(n / block) estimates are
    compared, plus one pass over x for the block sums.

    Parameters
    ----------
    release : ContinualRelease
        An algorithm's estimates.
    x : array_like, shape (n,) or (runs, n)
        The stream(s) it was run on (values ≥ 0).

    Returns
    -------
    ndarray of shape (runs,)
    """
    check_instance("release", release, ContinualRelease)
    arr = _as_runs(x)
    runs, n = arr.shape
    if n != release.n or runs != release.runs:
        raise ValueError(f"x has shape {arr.shape}, the release is for (runs, n) = ({release.runs}, {release.n})")
    if release.slopes is not None:
        return _linear_sup_error(release, arr)
    a = release.block
    if a == 1 and arr.dtype == np.uint8:
        # blocks of one user (local, tree, central) on bits: both ends of block j are S_j
        # (exact integers), so the supremum is max_t |Ŝ_t − S_t| in one pass
        cum = np.zeros((runs, n + 1))
        np.cumsum(arr, axis=1, dtype=float, out=cum[:, 1:])
        return np.abs(np.subtract(release.values, cum, out=cum), out=cum).max(axis=1)
    n_blocks = n // a
    acc = np.int64 if arr.dtype == np.uint8 else float
    sums = arr[:, : n_blocks * a].reshape(runs, n_blocks, a).sum(axis=2, dtype=acc)
    last_user = arr[:, a - 1 : n_blocks * a : a].astype(float)
    return _blockwise_sup_error(release.values, sums, last_user, arr[:, n_blocks * a :].sum(axis=1, dtype=acc))


def _linear_sup_error(release: ContinualRelease, arr: np.ndarray) -> np.ndarray:
    """sup_t |Ŝ_t − S_t| of a release linear on every block (``slopes``), every t compared.

    The values of ``np.max(np.abs(release.path() - prefix_sums(arr)), axis=1)``, elementwise
    the same operations (value + slope·offset, minus the prefix sum), block by block through
    reshapes instead of an n-long gather.
    """
    runs, n = arr.shape
    a = release.block
    n_blocks = n // a
    slopes = release.slopes
    assert slopes is not None  # (the caller's case)
    prefix = prefix_sums(arr)  # (runs, n + 1)
    offsets = np.arange(a, dtype=np.int64)
    est = release.values[:, :n_blocks, None] + slopes[:, :n_blocks, None] * offsets
    err = np.abs(est.reshape(runs, n_blocks * a) - prefix[:, : n_blocks * a], out=est.reshape(runs, n_blocks * a))
    worst = err.max(axis=1) if n_blocks else np.full(runs, -np.inf)
    # the last (partial) block: times n_blocks·a, ..., n
    tail_t = np.arange(n_blocks * a, n + 1, dtype=np.int64)
    tail = release.values[:, n_blocks, None] + slopes[:, n_blocks, None] * (tail_t - n_blocks * a)
    return np.maximum(worst, np.abs(tail - prefix[:, n_blocks * a :]).max(axis=1))


def _blockwise_sup_error(values: np.ndarray, block_sums: np.ndarray, last_user: np.ndarray,
                         tail_sum: np.ndarray) -> np.ndarray:
    """sup_t |Ŝ_t − S_t| of a release constant on blocks of a users, from the blocks' sums alone.

    ``values`` (runs, n_blocks + 1): the estimate on block j = [j a, (j+1) a − 1] and on the
    last (partial) block; ``block_sums`` (runs, n_blocks): the sum of each complete block;
    ``last_user`` (runs, n_blocks): the value of its last user; ``tail_sum`` (runs,): the sum
    of the users after the last complete block.  S_t is non-decreasing, so on block j the
    error is largest at S_{ja} or S_{(j+1)a−1} = S_{(j+1)a} − x_{(j+1)a}.
    """
    runs, n_blocks = block_sums.shape
    cum = np.zeros((runs, n_blocks + 1), dtype=float)
    np.cumsum(block_sums, axis=1, out=cum[:, 1:])
    v = values
    err = np.maximum(np.abs(v[:, :n_blocks] - cum[:, :-1]), np.abs(v[:, :n_blocks] - (cum[:, 1:] - last_user)))
    worst = err.max(axis=1) if n_blocks else np.zeros(runs)
    # the last block [n_blocks a, n] (possibly the single time n when a | n)
    total = cum[:, -1] + tail_sum
    tail = np.maximum(np.abs(v[:, n_blocks] - cum[:, -1]), np.abs(v[:, n_blocks] - total))
    return np.maximum(worst, tail)


# ---------------------------------------------------------------------------------------
# Batch-size schedules
# ---------------------------------------------------------------------------------------


def dyadic_batch_sizes(n: int) -> tuple[int, ...]:
    """(2^{L−1}, ..., 2, 1) with L = ⌊log₂ n⌋ + 1: the tree variant's k = L levels.

    Parameters
    ----------
    n : int
        The number of users.

    Returns
    -------
    tuple of int
    """
    n = check_positive_int("n", n)
    levels = tree_depth(n)
    return tuple(2**j for j in range(levels - 1, -1, -1))


def paper_batch_sizes(n: int, k: int) -> tuple[int, ...]:
    """The paper's allocation without constants: b_i ≈ n^{(2k+1−2i)/(2k+1)}, nested.

    [derived] b_k = a = max(1, round(n^{1/(2k+1)})), ratio r = max(2, round(n^{2/(2k+1)}))
    (lowered until b_1 = a r^{k−1} ≤ n), b_i = a r^{k−i}: the exponents of the paper's
    allocation, with every constant 1, unlike :func:`optimal_batch_sizes`, which also
    weighs the per-batch noise at the actual budget.

    Parameters
    ----------
    n : int
        The number of users.
    k : int
        The number of shufflers.

    Returns
    -------
    tuple of int
        (b_1, ..., b_k), nested.
    """
    n = check_positive_int("n", n)
    k = check_int_in_range("k", k, 1, tree_depth(n))
    a = max(1, round(n ** (1.0 / (2 * k + 1))))
    if k == 1:
        return (min(a, n),)
    r = max(2, round(n ** (2.0 / (2 * k + 1))))
    while r > 2 and a * r ** (k - 1) > n:
        r -= 1
    while a > 1 and a * r ** (k - 1) > n:
        a -= 1
    return tuple(a * r ** (k - i) for i in range(1, k + 1))


# One point per decade: the curve is smooth (local regime m·v₁, then a plateau), and each
# point costs one accountant bisection.
_M_GRID = np.unique(np.round(np.geomspace(1, 1e12, 13)).astype(np.int64))


@functools.lru_cache(maxsize=8192)
def _batch_noise_variance(m: int, eps0: float, delta0: float, real: bool) -> float:
    """Variance of one released batch sum of m users at the per-level budget (ε₀, δ₀).

    Bits: one message per user.  Values in [0, 1] ("real"): g = ⌈sqrt(m)⌉ unary messages at
    the group-privacy budget, plus the rounding variance bound m/(4g²).
    """
    if not real:
        return rr_estimator_variance(m, rr_flip_probability(m, eps0, delta0))
    g = unary_resolution(m)
    eps_b, delta_b = group_budget(eps0, delta0, g)
    return rr_estimator_variance(m * g, rr_flip_probability(m * g, eps_b, delta_b)) / g**2 + m / (4.0 * g**2)


@functools.lru_cache(maxsize=256)
def _log_variance_curve(eps0: float, delta0: float, m_max: int, real: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """log m and log Var of one batch's debiased sum on a geometric grid of batch sizes m ≤ m_max."""
    grid = _M_GRID[: int(np.searchsorted(_M_GRID, m_max)) + 1]
    logv = np.array([math.log(_batch_noise_variance(int(m), eps0, delta0, real)) for m in grid])
    return np.log(grid.astype(float)), logv


def _batch_variance(m: ArrayLike, eps0: float, delta0: float, m_max: int, real: bool = False) -> np.ndarray:
    """Var of a batch of size m ≤ m_max, interpolated log-log from :func:`_log_variance_curve`."""
    # One curve per decade of m_max, so nearby horizons share the accountant's work.
    decade = int(10 ** math.ceil(math.log10(max(m_max, 10))))
    logm, logv = _log_variance_curve(eps0, delta0, decade, real)
    return np.exp(np.interp(np.log(np.asarray(m, dtype=float)), logm, logv))


def _schedule_objective(n: int, a: ArrayLike, r: ArrayLike, k: int, eps0: float, delta0: float, objective: str,
                        real: bool = False) -> np.ndarray:
    """Proxy for the worst-case error of the schedule b_i = a r^{k−i} [derived].

    2·sqrt(total noise variance of the worst estimate) + the uncounted users: a − 1 for
    the plain algorithm (all ones in the unfinished batch), sqrt(a) for the extrapolating
    one (the error of extrapolating a rate over a users of a stationary stream), whose
    extrapolation also adds one level-k batch's noise.
    """
    a = np.asarray(a, dtype=float)
    r = np.asarray(r, dtype=float)
    b1 = a * r ** (k - 1)
    var = np.floor(n / b1) * _batch_variance(b1, eps0, delta0, n, real)
    for i in range(2, k + 1):
        var = var + (r - 1.0) * _batch_variance(a * r ** (k - i), eps0, delta0, n, real)
    if objective == "worst_case":
        return 2.0 * np.sqrt(var) + (a - 1.0)
    var = var + _batch_variance(a, eps0, delta0, n, real)
    return 2.0 * np.sqrt(var) + np.sqrt(a)


@functools.lru_cache(maxsize=1024)
def _optimal_batch_sizes(
    n: int, k: int, epsilon: float, delta: float, objective: str, streams: int = 1, real: bool = False,
    finest: int | None = None, composition: str = "best",
) -> tuple[int, ...]:
    eps0, delta0 = mechanism_budget(epsilon, delta, k * streams, composition=composition)
    a_grid = np.unique(np.round(np.geomspace(1, n, 600)).astype(np.int64)).astype(float)
    if finest is not None and finest not in a_grid:
        a_grid = np.unique(np.r_[a_grid, float(finest)])
    if k == 1:
        if finest is not None:
            return (finest,)
        f = _schedule_objective(n, a_grid, np.ones_like(a_grid), 1, eps0, delta0, objective, real)
        return (int(a_grid[int(np.argmin(f))]),)
    r_max = max(2.0, n ** (1.0 / (k - 1)))
    r_grid = np.unique(np.round(np.geomspace(2, r_max, 300)).astype(np.int64)).astype(float)
    aa, rr = np.meshgrid(a_grid, r_grid, indexing="ij")
    feasible = aa * rr ** (k - 1) <= n
    if finest is not None:
        # the whole grid is evaluated and the other rows masked, so that the optimum with
        # b_k = finest is the unconstrained one whenever that has b_k = finest
        feasible &= aa == finest
        if not feasible.any():
            raise ValueError(
                f"no nested schedule of k={k} levels with finest batch {finest} fits n={n} users "
                f"(needs {finest}·2^(k-1) <= n)"
            )
    if not feasible.any():
        raise ValueError(f"no nested schedule of k={k} levels fits n={n} users; k must be <= {tree_depth(n)}")
    f = np.where(feasible, _schedule_objective(n, aa, rr, k, eps0, delta0, objective, real), np.inf)
    i, j = np.unravel_index(int(np.argmin(f)), f.shape)
    a, r = int(aa[i, j]), int(rr[i, j])
    return tuple(a * r ** (k - level) for level in range(1, k + 1))


def optimal_batch_sizes(
    n: int, k: int, epsilon: float, delta: float, *, objective: str = "worst_case", streams: int = 1, values: str = "bits",
    finest: int | None = None, composition: str = "best",
) -> tuple[int, ...]:
    """Nested batch sizes (b_1, ..., b_k) = (a r^{k−1}, ..., a r, a) minimising an error proxy.

    [derived] The search is over integers a ≥ 1 (the level-k batch) and r ≥ 2 (the ratio
    between levels) with b_1 ≤ n, minimising :func:`_schedule_objective`, with the
    per-batch noise of the randomized-response summation at the per-level budget.  The
    optimum has b_i ∝ n^{(2k+1−2i)/(2k+1)} for ``objective="worst_case"``: at i = 1 and i = k
    the exponents of the lower bound's scales in Tenenbaum et al. 2023, Big_{n,k} =
    n^{(2k−1)/(2k+1)} c_ε^{2/(2k+1)} and rep_{n,k} = ½ n^{1/(2k+1)} c_ε^{2k/(2k+1)}, both
    measured on this function in tests/test_continual.py::test_optimal_schedule_exponents;
    ``"smooth"`` is the schedule of :func:`extrapolating_psco` (b_i ∝ n^{(k+1−i)/(k+1)}).

    Parameters
    ----------
    n : int
        Number of users.
    k : int
        Number of shufflers, 1 ≤ k ≤ ⌊log₂ n⌋ + 1.
    epsilon, delta : float
        Overall privacy of the algorithm.
    objective : {"worst_case", "smooth"}
    streams : int, default 1
        Number of sums every user contributes to (the coordinates of a vector; the
        per-level budget is split over k · streams mechanisms).
    values : {"bits", "real"}
        Bits (one message per user) or values in [0, 1] (⌈sqrt(b)⌉ messages per user).
    finest : int, optional
        Fix b_k = ``finest`` and optimise the ratio r only (a learner that synchronizes
        every ``finest`` users); the result is the unconstrained optimum when that already
        has b_k = ``finest``.
    composition : {"best", "basic", "advanced"}
        How the per-level budget is split over the k · streams mechanisms of a user
        (:func:`fedbandit.accounting.allocation.mechanism_budget`).

    Returns
    -------
    tuple of int
        (b_1, ..., b_k), nested.
    """
    n = check_positive_int("n", n, max_value=MAX_COUNT, reason="counts are int64")
    k = check_int_in_range("k", k, 1, tree_depth(n))
    epsilon = _check_psco_epsilon(epsilon)
    delta = check_delta("delta", delta)
    check_choice("objective", objective, ("worst_case", "smooth"))
    streams = check_positive_int("streams", streams, max_value=MAX_STEPS, reason="the budget is split over k·streams")
    check_choice("values", values, ("bits", "real"))
    if finest is not None:
        finest = check_int_in_range("finest", finest, 1, n)
    composition = check_choice("composition", composition, COMPOSITIONS)
    return _optimal_batch_sizes(n, k, epsilon, delta, objective, streams, values == "real", finest, composition)


def error_proxy(
    name: str, n: int, epsilon: float, delta: float, *, k: int | None = None, batch_sizes: Sequence[int] | None = None,
    composition: str = "best",
) -> float:
    """A deterministic scale of an algorithm's sup error (the quantity the schedule search minimises).

    2·sqrt(largest variance of a released estimate) + the users an estimate may miss
    [derived]:

    * ``"local"``: 2 sqrt(n v₁), v₁ the variance of one randomized-response bit;
    * ``"central"``: 2 σ sqrt(L) with L = ⌊log₂ n⌋ + 1 nodes per prefix;
    * ``"tree"``: 2 sqrt(Σ_i v(b_i)) over the dyadic levels;
    * ``"sequential"``/``"concurrent"``: 2 sqrt(⌊n/b_1⌋ v(b_1) + Σ_{i≥2} (b_{i−1}/b_i − 1) v(b_i)) + b_k − 1;
    * ``"extrapolating"``: the same noise plus one level-k batch, + sqrt(b_k).

    v(b) is the exact noise variance of a batch of b users at the per-level budget
    (``composition``: :func:`fedbandit.accounting.allocation.mechanism_budget`).  Used
    for theory curves and for the pre-asymptotic slopes the chapter compares fits with.

    Parameters
    ----------
    name : str
        One of :data:`PSCO_ALGORITHMS`.
    n : int
        The number of users.
    epsilon, delta : float
        The overall (ε, δ) of the algorithm.
    k : int, optional
        The number of shufflers ("concurrent", "extrapolating").
    batch_sizes : sequence of int, optional
        The schedule (default the algorithm's).
    composition : {"best", "basic", "advanced"}, default "best"
        As in :func:`concurrent_psco`.

    Returns
    -------
    float
    """
    check_choice("name", name, PSCO_ALGORITHMS)
    composition = check_choice("composition", composition, COMPOSITIONS)
    n = check_positive_int("n", n, max_value=MAX_COUNT, reason="counts are int64")
    epsilon = _check_psco_epsilon(epsilon)
    delta = check_delta("delta", delta)
    if name == "local":
        return 2.0 * math.sqrt(n * rr_estimator_variance(1, local_rr_flip_probability(epsilon)))
    if name == "central":
        levels = tree_depth(n)
        return 2.0 * calibrate_gaussian_sigma(epsilon, delta, 1.0, levels) * math.sqrt(levels)
    if name == "tree":
        sizes = dyadic_batch_sizes(n)
    elif batch_sizes is not None:
        sizes = check_batch_sizes("batch_sizes", batch_sizes, n)
    elif name == "sequential":
        sizes = optimal_batch_sizes(n, 1, epsilon, delta, composition=composition)
    else:
        if k is None:
            raise ValueError(f"k is required for algorithm {name!r}")
        obj = "smooth" if name == "extrapolating" else "worst_case"
        sizes = optimal_batch_sizes(n, k, epsilon, delta, objective=obj, composition=composition)
    eps0, delta0 = mechanism_budget(epsilon, delta, len(sizes), composition=composition)
    v = [rr_estimator_variance(b, rr_flip_probability(b, eps0, delta0)) for b in sizes]
    if name == "tree":
        return 2.0 * math.sqrt(sum(v))
    var = (n // sizes[0]) * v[0] + sum((sizes[i - 1] // sizes[i] - 1) * v[i] for i in range(1, len(sizes)))
    if name == "extrapolating":
        return 2.0 * math.sqrt(var + v[-1]) + math.sqrt(sizes[-1])
    return 2.0 * math.sqrt(var) + sizes[-1] - 1.0


# ---------------------------------------------------------------------------------------
# Algorithms
# ---------------------------------------------------------------------------------------


def _round_inputs(arr: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Bits for local randomized response: unbiased randomized rounding of values in [0, 1].

    Rounding is part of the local randomizer; it adds the rounding error Σ x(1 − x),
    small next to the local model's own Θ(n/ε²) variance.
    """
    if arr.dtype == np.uint8:
        return arr
    if np.all((arr == 0.0) | (arr == 1.0)):
        return arr.astype(np.uint8)
    return (rng.random(arr.shape) < arr).astype(np.uint8)


def local_psco(x: ArrayLike, epsilon: float, rng: np.random.Generator) -> ContinualRelease:
    """Local-model PSCO: every user sends one ε-LDP randomized-response bit.

    p = 2/(e^ε + 1); the estimate after t users is Σ_{s ≤ t}(M_s − p/2)/(1 − p), with
    error Θ(sqrt(n)/ε) (optimal in the local model, Vadhan 2017).  Values in [0, 1]
    are randomized-rounded first.

    Parameters
    ----------
    x : array_like, shape (n,) or (runs, n)
        Values in [0, 1] (bits are used as they are).
    epsilon : float
        The local ε.
    rng : numpy.random.Generator

    Returns
    -------
    ContinualRelease
    """
    arr = _as_runs(x)
    epsilon = _check_psco_epsilon(epsilon)
    rng = check_rng("rng", rng)
    bits = _round_inputs(arr, rng)
    p = local_rr_flip_probability(epsilon)
    q0, q1 = rr_message_probabilities(p)
    u = rng.random(bits.shape)
    messages = u < np.where(bits.astype(bool), q1, q0)
    values = np.zeros((bits.shape[0], bits.shape[1] + 1))
    np.cumsum(messages, axis=1, out=values[:, 1:])
    values -= np.arange(bits.shape[1] + 1) * q0
    values /= 1.0 - p
    info = {"algorithm": "local", "k": 0, "epsilon": epsilon, "p": p, "privacy": (epsilon, 0.0)}
    return ContinualRelease(n=bits.shape[1], block=1, values=values, info=info)


def _nested_estimates(level_sums: list, sizes: tuple) -> np.ndarray:
    """Mixed-radix prefix estimates at t = u·b_k, u = 0..⌊n/b_k⌋, from the released batch sums.

    ``level_sums[i]`` (runs, ⌊n/b_i⌋) holds the released sums of level i.  E_1[u] = Σ_{v<u}
    Y_1[v]; E_i[u] = E_{i−1}[⌊u/r_i⌋] + Σ of the level-i batches released since the start
    of the enclosing level-(i−1) batch.  O(Σ_i n/b_i) work.
    """
    y0 = level_sums[0]
    runs = y0.shape[0]
    est = np.zeros((runs, y0.shape[1] + 1))
    np.cumsum(y0, axis=1, out=est[:, 1:])
    for i in range(1, len(sizes)):
        r = sizes[i - 1] // sizes[i]
        y = level_sums[i]
        n_prev = est.shape[1] - 1
        pad = np.zeros((runs, n_prev + 1, r))
        pad.reshape(runs, -1)[:, : y.shape[1]] = y
        new = np.empty((runs, n_prev + 1, r))
        new[:, :, 0] = est
        if r <= 8:
            # exclusive cumulative sum inside each parent, slot by slot (a strided cumsum
            # over a short axis is much slower)
            for s in range(1, r):
                np.add(new[:, :, s - 1], pad[:, :, s - 1], out=new[:, :, s])
        else:
            new[:, :, 1:] = est[:, :, None] + np.cumsum(pad[:, :, :-1], axis=2)
        est = new.reshape(runs, -1)[:, : y.shape[1] + 1]
    return est


def _level_counts(bits: np.ndarray, sizes: tuple) -> list:
    """Number of ones in every complete batch of every level (finest level first, then summed up)."""
    runs, n = bits.shape
    a = sizes[-1]
    nb = n // a
    return _nest_counts(bits[:, : nb * a].reshape(runs, nb, a).sum(axis=2, dtype=np.int64), n, sizes)


def _nest_counts(finest: np.ndarray, n: int, sizes: tuple[int, ...]) -> list[np.ndarray]:
    """Every level's batch counts (coarsest first) from the counts of the finest batches, (runs, ⌊n/b_k⌋)."""
    runs = finest.shape[0]
    counts = [finest]
    for i in range(len(sizes) - 2, -1, -1):
        r = sizes[i] // sizes[i + 1]
        nb_i = n // sizes[i]
        blocks = counts[0][:, : nb_i * r].reshape(runs, nb_i, r)
        if r <= 8 and blocks.dtype.kind in "iu":
            # integer counts, the r slots added one by one: exact, so the sums of .sum(axis=2), which is
            # slow over a short axis (the dyadic tree's r = 2 at every level)
            parent = blocks[:, :, 0].copy()
            for j in range(1, r):
                parent += blocks[:, :, j]
        else:
            parent = blocks.sum(axis=2)
        counts.insert(0, parent)
    return counts


def _level_resolution(resolution: int | str, batch_size: int, binary: bool) -> int:
    if resolution == "auto":
        # Bits need one message; values in [0, 1] get g ≈ sqrt(m) messages, which makes
        # the rounding variance m/(4g²) ≤ 1/4 (see RRShuffleSummation).
        return 1 if binary else unary_resolution(batch_size)
    return check_positive_int("resolution", resolution, max_value=MAX_STEPS, reason="messages per user")


def _kshuffler(arr: np.ndarray, sizes: tuple[int, ...], epsilon: float, delta: float, rng: np.random.Generator, sampling: str, name: str,
               return_levels: bool, resolution: int | str = "auto",
               composition: str = "best") -> tuple[np.ndarray, list[np.ndarray], dict[str, Any]]:
    runs, n = arr.shape
    k = len(sizes)
    eps0, delta0 = mechanism_budget(epsilon, delta, k, composition=composition)
    binary = arr.dtype == np.uint8 or bool(np.all((arr == 0.0) | (arr == 1.0)))
    if binary:
        arr = arr.astype(np.uint8, copy=False)
    gs = [_level_resolution(resolution, b, binary) for b in sizes]
    ps = []
    for b, g in zip(sizes, gs):
        eps_b, delta_b = group_budget(eps0, delta0, g)
        ps.append(rr_flip_probability(b * g, eps_b, delta_b))
    level_sums = []
    if binary and sampling == "aggregate" and all(g == 1 for g in gs):
        # Fast path: batch counts of all levels from one pass over the bits.
        level_sums = _released_sums(_level_counts(arr, sizes), sizes, ps, rng)
    else:
        for b, g, p in zip(sizes, gs, ps):
            q0, q1 = rr_message_probabilities(p)
            nb = n // b
            if binary:
                ones = arr.astype(np.int64) * g
            else:
                # Independent unbiased rounding per level (part of that level's randomizer).
                ones = unary_round(arr, g, rng)
            if sampling == "per_user":
                # One uniform per message: user t's g messages to shuffler i use
                # w[:, t, :], the layout of ConcurrentShuffleModel for g = 1.
                w = rng.random((runs, n, g))
                sent = (w < np.where(np.arange(g) < ones[..., None], q1, q0)).sum(axis=2)
                z = sent[:, : nb * b].reshape(runs, nb, b).sum(axis=2)
            else:
                batch_ones = ones[:, : nb * b].reshape(runs, nb, b).sum(axis=2)
                z = sample_rr_counts(batch_ones, b * g, p, rng)
            level_sums.append(rr_debias(z, b * g, p) / g)
    values = _nested_estimates(level_sums, sizes)
    info = {
        "algorithm": name,
        "k": k,
        "batch_sizes": sizes,
        "epsilon": epsilon,
        "delta": delta,
        "epsilon0": eps0,
        "delta0": delta0,
        "resolution": tuple(gs),
        "p": tuple(ps),
        "noise_std": tuple(math.sqrt(rr_estimator_variance(b * g, p)) / g for b, g, p in zip(sizes, gs, ps)),
        "sampling": sampling,
        "composition": composition,
    }
    if return_levels:
        info["level_sums"] = level_sums
    return values, level_sums, info


def _released_sums(counts: list[np.ndarray], sizes: tuple[int, ...], ps: list[float],
                   rng: np.random.Generator) -> list[np.ndarray]:
    """Every level's released (debiased) batch sums, from its batches' counts of ones (aggregate sampling)."""
    return [rr_debias(sample_rr_counts(c, b, p, rng), b, p) for b, p, c in zip(sizes, ps, counts)]


def bernoulli_concurrent_sup_error(
    n: int, k: int, epsilon: float, delta: float, rng: np.random.Generator, *, runs: int = 1, mean: float = 0.5,
    batch_sizes: tuple[int, ...] | list[int] | None = None, composition: str = "best",
) -> np.ndarray:
    """Sup errors of the k-shuffler PSCO on i.i.d. Bernoulli(``mean``) bits, drawn block by block.

    The algorithm (bits, aggregate sampling) sees the input only through the counts of its
    finest batches of b_k users, and its error only through those counts and the last bit
    of each batch (:func:`sup_error`); so they are drawn directly, Bin(b_k − 1, mean) +
    Ber(mean) per batch and Bin(n mod b_k, mean) for the rest, without the n bits: the same
    law as ``sup_error(concurrent_psco(sample_bernoulli_input(n, ...), ...))`` (tested draw
    for draw on the same counts, and in distribution), in O(n/b_k) time and memory.  What makes
    n = 10⁹ users affordable for the exponent fits of chapter 4.

    Parameters
    ----------
    n, k, epsilon, delta, batch_sizes, composition
        As :func:`concurrent_psco` (k = 1 is :func:`sequential_psco`).
    rng : numpy.random.Generator
    runs : int
        Independent input streams and runs.
    mean : float
        The bits' probability of 1.

    Returns
    -------
    ndarray, shape (runs,)
    """
    n = check_positive_int("n", n)
    k = check_positive_int("k", k)
    epsilon = _check_psco_epsilon(epsilon)
    delta = check_delta("delta", delta)
    rng = check_rng("rng", rng)
    runs = check_positive_int("runs", runs)
    mean = check_probability("mean", mean, open_interval=False)
    composition = check_choice("composition", composition, COMPOSITIONS)
    if k > tree_depth(n):
        raise ValueError(f"k must be at most floor(log2 n) + 1 = {tree_depth(n)} for n={n} (nested batches), got {k}")
    sizes = (
        optimal_batch_sizes(n, k, epsilon, delta, composition=composition)
        if batch_sizes is None
        else check_batch_sizes("batch_sizes", batch_sizes, n, k)
    )
    a = sizes[-1]
    n_blocks = n // a
    if runs * n_blocks > MAX_STEPS:
        raise ValueError(f"runs={runs} streams of n={n} users hold {runs * n_blocks} batches of {a}, more than 10^9")
    eps0, delta0 = mechanism_budget(epsilon, delta, k, composition=composition)
    ps = [rr_flip_probability(b, eps0, delta0) for b in sizes]
    finest, last, tail = _bernoulli_blocks(n, a, runs, mean, rng)
    values = _nested_estimates(_released_sums(_nest_counts(finest, n, sizes), sizes, ps, rng), sizes)
    return _blockwise_sup_error(values, finest, last.astype(float), tail)


def _bernoulli_blocks(n: int, a: int, runs: int, mean: float,
                      rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What i.i.d. Bernoulli(mean) bits show through blocks of a: each block's count (runs, ⌊n/a⌋), its last bit, the rest's count."""
    n_blocks = n // a
    last = (rng.random((runs, n_blocks)) < mean).astype(np.int64)
    finest = rng.binomial(a - 1, mean, size=(runs, n_blocks)) + last
    return finest, last, rng.binomial(n - n_blocks * a, mean, size=runs)


def _check_common(x: ArrayLike, epsilon: float, delta: float, rng: np.random.Generator) -> tuple[np.ndarray, float, float, np.random.Generator]:
    return _as_runs(x), _check_psco_epsilon(epsilon), check_delta("delta", delta), check_rng("rng", rng)


def concurrent_psco(
    x: ArrayLike,
    k: int,
    epsilon: float,
    delta: float,
    rng: np.random.Generator,
    *,
    batch_sizes: Sequence[int] | None = None,
    sampling: str = "aggregate",
    return_levels: bool = False,
    resolution: int | str = "auto",
    composition: str = "best",
) -> ContinualRelease:
    """The k-shuffler PSCO algorithm (book's reconstruction of Tenenbaum et al., Section 3.2).

    See the module docstring for the schedule and the estimate; the whole algorithm is
    (ε, δ)-CSDP by composition over the k batches each user joins
    (:func:`psco_accounting`).

    Parameters
    ----------
    x : array, shape (n,) or (runs, n)
        Values in [0, 1]; bits are used as they are, other values are randomized-rounded
        by every level's randomizer (independently per level).
    k : int
        Number of concurrent shufflers, 1 ≤ k ≤ ⌊log₂ n⌋ + 1.
    epsilon, delta : float
        Overall (ε, δ) of the algorithm.
    rng : numpy.random.Generator
    batch_sizes : sequence of int, optional
        Nested schedule (b_1, ..., b_k); default :func:`optimal_batch_sizes`.
    sampling : {"aggregate", "per_user"}
        Draw each batch's count from its exact distribution, or simulate every message.
    return_levels : bool
        Keep the released batch sums of every level in ``info["level_sums"]``.
    resolution : int or "auto"
        Messages per user and batch (:class:`fedbandit.mechanisms.randomized_response.RRShuffleSummation`);
        "auto": 1 for bits, ⌈sqrt(b_i)⌉ at level i for other values.
    composition : {"best", "basic", "advanced"}
        How (ε, δ) is split over the k batches a user joins
        (:func:`fedbandit.accounting.allocation.mechanism_budget`); the default schedule is
        optimised for it.

    Returns
    -------
    ContinualRelease
        Estimates updated every b_k users.
    """
    k = check_positive_int("k", k)
    arr, epsilon, delta, rng = _check_common(x, epsilon, delta, rng)
    n = arr.shape[1]
    check_choice("sampling", sampling, ("aggregate", "per_user"))
    return_levels = check_bool("return_levels", return_levels)
    if k > tree_depth(n):
        raise ValueError(f"k must be at most floor(log2 n) + 1 = {tree_depth(n)} for n={n} (nested batches), got {k}")
    composition = check_choice("composition", composition, COMPOSITIONS)
    sizes = (
        optimal_batch_sizes(n, k, epsilon, delta, composition=composition)
        if batch_sizes is None
        else check_batch_sizes("batch_sizes", batch_sizes, n, k)
    )
    if not (isinstance(resolution, str) and resolution == "auto"):
        check_positive_int("resolution", resolution, max_value=MAX_STEPS, reason="messages per user")
    values, _, info = _kshuffler(
        arr, sizes, epsilon, delta, rng, sampling, "concurrent", return_levels, resolution, composition
    )
    return ContinualRelease(n=n, block=sizes[-1], values=values, info=info)


def sequential_psco(
    x: ArrayLike, epsilon: float, delta: float, rng: np.random.Generator, *, batch_size: int | None = None, sampling: str = "aggregate",
    resolution: int | str = "auto", composition: str = "best",
) -> ContinualRelease:
    """Sequential shuffle model: one shuffler over consecutive batches (k = 1).

    With the optimal batch size b ≈ (n σ²)^{1/3} (σ the noise of one batch) the error is
    Θ̃(n^{1/3}) (Tenenbaum et al., after Cheu et al. 2022 and Chowdhury & Zhou 2022).

    Parameters
    ----------
    x : array_like, shape (n,) or (runs, n)
        Values in [0, 1] (bits are used as they are).
    epsilon, delta : float
        The overall (ε, δ) of the algorithm.
    rng : numpy.random.Generator
    batch_size : int, optional
        b (default the optimal one).
    sampling : {"aggregate", "per_user"}, default "aggregate"
        As in :func:`concurrent_psco`.
    resolution : int or "auto", default "auto"
        As in :func:`concurrent_psco`.
    composition : {"best", "basic", "advanced"}, default "best"
        As in :func:`concurrent_psco`.

    Returns
    -------
    ContinualRelease
    """
    sizes = None if batch_size is None else (batch_size,)
    release = concurrent_psco(x, 1, epsilon, delta, rng, batch_sizes=sizes, sampling=sampling, resolution=resolution,
                              composition=composition)
    release.info["algorithm"] = "sequential"
    return release


def tree_psco(
    x: ArrayLike, epsilon: float, delta: float, rng: np.random.Generator, *, sampling: str = "aggregate", resolution: int | str = "auto",
    composition: str = "best",
) -> ContinualRelease:
    """The tree variant: k = ⌊log₂ n⌋ + 1 shufflers with dyadic batches 2^{k−1}, ..., 2, 1.

    The estimate at t is the binary decomposition of t (the p-sums of the tree
    mechanism), each p-sum computed by its own shuffled summation: polylog(n)/ε error.

    Parameters
    ----------
    x : array_like, shape (n,) or (runs, n)
        Values in [0, 1] (bits are used as they are).
    epsilon, delta : float
        The overall (ε, δ) of the algorithm.
    rng : numpy.random.Generator
    sampling : {"aggregate", "per_user"}, default "aggregate"
        As in :func:`concurrent_psco`.
    resolution : int or "auto", default "auto"
        As in :func:`concurrent_psco`.
    composition : {"best", "basic", "advanced"}, default "best"
        As in :func:`concurrent_psco`.

    Returns
    -------
    ContinualRelease
    """
    arr = _as_runs(x)
    sizes = dyadic_batch_sizes(arr.shape[1])
    release = concurrent_psco(
        arr, len(sizes), epsilon, delta, rng, batch_sizes=sizes, sampling=sampling, resolution=resolution,
        composition=composition,
    )
    release.info["algorithm"] = "tree"
    return release


def extrapolating_psco(
    x: ArrayLike, k: int, epsilon: float, delta: float, rng: np.random.Generator, *, batch_sizes: Sequence[int] | None = None,
    sampling: str = "aggregate", composition: str = "best",
) -> ContinualRelease:
    """An easy-input exploiting k-shuffler algorithm: extrapolates the unfinished batch.

    Same shufflers, budgets and batch structure as :func:`concurrent_psco`, but the
    estimate at t also counts the t − u·b_k users of the unfinished level-k batch at the
    rate of the last released level-k batch (the prior rate 1/2 before the first
    release), and the schedule is optimised for streams
    whose rate is locally stable (``objective="smooth"``), so b_k ≈ n^{1/(k+1)} is larger
    and the noise smaller.  On a stationary stream its error is about
    n^{1/(2k+2)} < n^{1/(2k+1)}; on the hard family Δ_{n,k}, where runs of rep_{n,k}
    random bits make the rate unpredictable, the extrapolation errs by about
    sqrt(b_k · rep_{n,k}).  The estimate is post-processing of the same releases, so the
    privacy is that of :func:`concurrent_psco`.

    Parameters
    ----------
    x : array_like, shape (n,) or (runs, n)
        Values in [0, 1] (bits are used as they are).
    k : int
        The number of shufflers.
    epsilon, delta : float
        The overall (ε, δ) of the algorithm.
    rng : numpy.random.Generator
    batch_sizes : sequence of int, optional
        The nested schedule (default optimised with ``objective="smooth"``).
    sampling : {"aggregate", "per_user"}, default "aggregate"
        As in :func:`concurrent_psco`.
    composition : {"best", "basic", "advanced"}, default "best"
        As in :func:`concurrent_psco`.

    Returns
    -------
    ContinualRelease
    """
    k = check_positive_int("k", k)
    arr, epsilon, delta, rng = _check_common(x, epsilon, delta, rng)
    n = arr.shape[1]
    check_choice("sampling", sampling, ("aggregate", "per_user"))
    if k > tree_depth(n):
        raise ValueError(f"k must be at most floor(log2 n) + 1 = {tree_depth(n)} for n={n}, got {k}")
    composition = check_choice("composition", composition, COMPOSITIONS)
    sizes = (
        optimal_batch_sizes(n, k, epsilon, delta, objective="smooth", composition=composition)
        if batch_sizes is None
        else check_batch_sizes("batch_sizes", batch_sizes, n, k)
    )
    values, level_sums, info = _kshuffler(
        arr, sizes, epsilon, delta, rng, sampling, "extrapolating", False, composition=composition
    )
    a = sizes[-1]
    slopes = np.empty_like(values)
    # Before the first release there is no rate to extrapolate: start from the prior
    # rate 1/2 (the midpoint of [0, 1]).
    slopes[:, 0] = 0.5
    slopes[:, 1:] = level_sums[-1] / a
    return ContinualRelease(n=n, block=a, values=values, slopes=slopes, info=info)


def central_tree_psco(
    x: ArrayLike, epsilon: float, delta: float, rng: np.random.Generator, *, noise: str = "gaussian"
) -> ContinualRelease:
    """Central binary-tree mechanism (Dwork et al. 2010; Chan, Shi & Song 2011), whole stream at once.

    Every dyadic p-sum of the exact values gets independent noise; the estimate at t is
    the sum of the p-sums at the set bits of t.  Each user enters L = ⌊log₂ n⌋ + 1
    p-sums with sensitivity 1: Gaussian noise σ = ``calibrate_gaussian_sigma`` (ε, δ, 1, L)
    (zCDP), or Laplace noise of scale L/ε (pure ε-DP, ``noise="laplace"``).

    The node closing at step s draws the s-th noise of one ``draw_noise(rng, (n, runs))``
    call, the order in which :class:`fedbandit.mechanisms.tree.TreeMechanism` draws
    them, so both give the same estimates from the same generator.

    Parameters
    ----------
    x : array_like, shape (n,) or (runs, n)
        Values in [0, 1] (bits are used as they are).
    epsilon, delta : float
        The overall (ε, δ) of the algorithm.
    rng : numpy.random.Generator
    noise : {"gaussian", "laplace"}, default "gaussian"
        The node noise.

    Returns
    -------
    ContinualRelease
    """
    arr, epsilon, delta, rng = _check_common(x, epsilon, delta, rng)
    check_choice("noise", noise, ("gaussian", "laplace"))
    runs, n = arr.shape
    sizes = dyadic_batch_sizes(n)
    levels = len(sizes)
    if noise == "gaussian":
        scale = calibrate_gaussian_sigma(epsilon, delta, 1.0, levels)
        privacy = (epsilon, delta)
    else:
        scale = float(laplace_counter_scale(epsilon, 1.0, releases=levels))  # each user in `levels` nodes
        privacy = (epsilon, 0.0)
    step_noise = draw_noise(rng, (n, runs), scale, noise).T
    vals = arr.astype(float) if arr.dtype == np.uint8 else arr
    cum = np.zeros((runs, n + 1))
    np.cumsum(vals, axis=1, out=cum[:, 1:])
    level_sums = []
    for b in sizes:
        nb = n // b
        exact = cum[:, b : nb * b + 1 : b] - cum[:, 0 : (nb - 1) * b + 1 : b]
        level_sums.append(exact + step_noise[:, b - 1 : nb * b : b])
    values = _nested_estimates(level_sums, sizes)
    info = {
        "algorithm": "central",
        "k": levels,
        "batch_sizes": sizes,
        "epsilon": epsilon,
        "delta": delta,
        "noise": noise,
        "scale": scale,
        "noise_std": scale if noise == "gaussian" else math.sqrt(2.0) * scale,
        "privacy": privacy,
    }
    return ContinualRelease(n=n, block=1, values=values, info=info)


def run_psco(name: str, x: ArrayLike, epsilon: float, delta: float, rng: np.random.Generator, *, k: int | None = None,
             **kwargs: Any) -> ContinualRelease:
    """Dispatch by name: one of :data:`PSCO_ALGORITHMS` (``k`` for "concurrent" and "extrapolating").

    Parameters
    ----------
    name : str
        One of :data:`PSCO_ALGORITHMS`.
    x : array_like, shape (n,) or (runs, n)
        Values in [0, 1] (bits are used as they are).
    epsilon, delta : float
        The overall (ε, δ) of the algorithm.
    rng : numpy.random.Generator
    k : int, optional
        The number of shufflers ("concurrent", "extrapolating").
    **kwargs
        Passed to the algorithm.

    Returns
    -------
    ContinualRelease
    """
    check_choice("name", name, PSCO_ALGORITHMS)
    if name == "local":
        check_delta("delta", delta)
        return local_psco(x, epsilon, rng)
    if name == "sequential":
        return sequential_psco(x, epsilon, delta, rng, **kwargs)
    if name == "tree":
        return tree_psco(x, epsilon, delta, rng, **kwargs)
    if name == "central":
        return central_tree_psco(x, epsilon, delta, rng, **kwargs)
    if k is None:
        raise ValueError(f"k is required for algorithm {name!r}")
    if name == "concurrent":
        return concurrent_psco(x, k, epsilon, delta, rng, **kwargs)
    return extrapolating_psco(x, k, epsilon, delta, rng, **kwargs)


# ---------------------------------------------------------------------------------------
# Inputs: the hard family Δ_{n,k} and easy streams
# ---------------------------------------------------------------------------------------


def _run_length(n: int, k: int, epsilon: float) -> int:
    # The family repeats a bit rep_{n,k} times; rep is real, the book uses ⌊rep⌋ ≥ 1.
    return max(1, int(math.floor(rep_nk(n, k, epsilon))))


def sample_hard_input(
    n: int,
    k: int,
    epsilon: float,
    rng: np.random.Generator,
    *,
    runs: int = 1,
    prefix_length: int | None = None,
    prefix_value: int | None = None,
) -> np.ndarray:
    """Draw inputs from the hard family Δ_{n,k} of Tenenbaum et al.'s lower bound.

    A member of Δ_{n,k} starts with ℓ ≤ rep_{n,k} copies of a bit v, then alternates a
    single Ber(1/2) bit with rep_{n,k} copies of another Ber(1/2) bit, until length n;
    rep_{n,k} = ½ n^{1/(2k+1)} c_ε^{2k/(2k+1)}, c_ε = e^ε/(e^{2ε} + 1).  The run length
    used is R = max(1, ⌊rep_{n,k}⌋).

    Parameters
    ----------
    n : int
        Number of users.
    k : int
        Number of shufflers the family is hard for (k ≥ 1).
    epsilon : float
        ε of c_ε.
    rng : numpy.random.Generator
    runs : int
        Number of independent sequences.
    prefix_length : int, optional
        ℓ in [0, R], which fixes the member of the family; default: drawn uniformly per
        run (a uniform mixture over the alignments of the blocks).
    prefix_value : {0, 1}, optional
        v; default drawn uniformly per run.

    Returns
    -------
    ndarray of uint8, shape (runs, n)
    """
    n = check_positive_int("n", n)
    k = check_positive_int("k", k)
    epsilon = check_epsilon("epsilon", epsilon)
    rng = check_rng("rng", rng)
    runs = check_positive_int("runs", runs)
    _check_input_size(n, runs)
    rep = _run_length(n, k, epsilon)
    if prefix_length is None:
        ell = rng.integers(0, rep + 1, size=runs)
    else:
        ell = np.full(runs, check_int_in_range("prefix_length", prefix_length, 0, rep))
    if prefix_value is None:
        v = rng.integers(0, 2, size=runs)
    else:
        v = np.full(runs, check_int_in_range("prefix_value", prefix_value, 0, 1))
    n_blocks = -(-n // (rep + 1)) + 1
    singles = rng.integers(0, 2, size=(runs, n_blocks), dtype=np.uint8)
    repeated = rng.integers(0, 2, size=(runs, n_blocks), dtype=np.uint8)
    lengths = np.tile(np.array([1, rep]), n_blocks)
    out = np.empty((runs, n), dtype=np.uint8)
    for r in range(runs):
        body = np.repeat(np.column_stack([singles[r], repeated[r]]).ravel(), lengths)
        out[r, : ell[r]] = v[r]
        out[r, ell[r] :] = body[: n - ell[r]]
    return out


def hard_input_single_positions(n: int, k: int, epsilon: float, prefix_length: int) -> np.ndarray:
    """0-based positions of the single (non-repeated) Ber(1/2) bits of a Δ_{n,k} member with prefix ℓ.

    Bits_{n,k} of the proof is the subset of these spaced about Big_{n,k} apart
    (:func:`big_nk`).

    Parameters
    ----------
    n : int
        The number of users.
    k : int
        The number of shufflers the family is hard for.
    epsilon : float
        ε of c_ε.
    prefix_length : int
        ℓ, the member of the family.

    Returns
    -------
    ndarray of int64
    """
    n = check_positive_int("n", n, max_value=MAX_STEPS, reason="an array of the positions is returned")
    k = check_positive_int("k", k)
    epsilon = check_epsilon("epsilon", epsilon)
    rep = _run_length(n, k, epsilon)
    ell = check_int_in_range("prefix_length", prefix_length, 0, rep)
    return np.arange(ell, n, rep + 1)


def sample_bernoulli_input(n: int, rng: np.random.Generator, *, runs: int = 1, mean: float = 0.5) -> np.ndarray:
    """i.i.d. Bernoulli(mean) bits, shape (runs, n): a stationary ("easy") stream.

    Parameters
    ----------
    n : int
        The number of users.
    rng : numpy.random.Generator
    runs : int, default 1
        Independent streams.
    mean : float, default 0.5
        The bits' mean.

    Returns
    -------
    ndarray of uint8, shape (runs, n)
    """
    n = check_positive_int("n", n)
    rng = check_rng("rng", rng)
    runs = check_positive_int("runs", runs)
    mean = check_probability("mean", mean, open_interval=False)
    _check_input_size(n, runs)
    return (rng.random((runs, n)) < mean).astype(np.uint8)


def sample_runs_input(n: int, run_length: int, rng: np.random.Generator, *, runs: int = 1) -> np.ndarray:
    """Runs of ``run_length`` copies of independent Ber(1/2) bits, shape (runs, n).

    Parameters
    ----------
    n : int
        The number of users.
    run_length : int
        The copies of each bit.
    rng : numpy.random.Generator
    runs : int, default 1
        Independent streams.

    Returns
    -------
    ndarray of uint8, shape (runs, n)
    """
    n = check_positive_int("n", n)
    run_length = check_positive_int("run_length", run_length)
    rng = check_rng("rng", rng)
    runs = check_positive_int("runs", runs)
    _check_input_size(n, runs)
    run_length = min(run_length, n)  # longer runs are cut at n anyway
    n_runs = -(-n // run_length)
    bits = rng.integers(0, 2, size=(runs, n_runs), dtype=np.uint8)
    return np.repeat(bits, run_length, axis=1)[:, :n]


# ---------------------------------------------------------------------------------------
# Experiment driver
# ---------------------------------------------------------------------------------------


