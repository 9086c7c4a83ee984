"""Shufflers, the concurrent shuffle model, and randomized-response shuffle summation.

This module holds the privacy-model pieces of the concurrent-shuffle chapter
(Tenenbaum, Kaplan, Mansour & Stemmer 2023, "Concurrent shuffle differential privacy
under continual observation"):

* :class:`Shuffler` -- one trusted shuffler.  It is *active* while it collects the
  encoded messages of the users of its current batch and, once the batch is full,
  releases them to the server in a uniformly random order and becomes *inactive*.
* :class:`ConcurrentShuffleModel` -- k shufflers run concurrently (the paper's
  Algorithm 1, whose box is not in the available text; this is the reading of its
  prose): at every time t the server may re-use each inactive shuffler for a new
  batch, as a *deterministic* function of the outputs released so far, and user t
  sends one encoded message to every active shuffler.  The server's estimates are
  post-processing of the released outputs.  :class:`MixedRadixServer` is the server of
  the book's reconstructed PSCO algorithm (see :mod:`fedbandit.mechanisms.psco`).
* :class:`RRShuffleSummation` -- binary randomized-response summation in the shuffle
  model (Cheu, Smith, Ullman, Zeber & Zhilyaev 2019): each user sends its bit with
  probability 1 − p and a uniformly random bit with probability p; the analyzer
  debiases the number of ones.  Values in [0, 1] are first reduced to bits by
  unbiased randomized rounding (:func:`randomized_round`).
* Accounting: :func:`rr_shuffle_delta` is a numerically exact *upper bound* on the
  privacy profile δ(ε) of the shuffled count (the "privacy blanket" decomposition of
  Balle, Bell, Gascón & Nissim 2019, evaluated in closed form, see its Notes), and
  :func:`rr_flip_probability` the smallest p meeting a target (ε, δ).
  :func:`level_budget` splits an overall (ε, δ) over the k shuffle mechanisms every
  user joins, by composition (:func:`fedbandit.accounting.zcdp.split_budget_advanced`).

The batch sums the fast algorithms of :mod:`fedbandit.mechanisms.psco` need are drawn with
:func:`sample_rr_counts` from their exact distribution (two binomials per batch)
instead of simulating every message; ``tests/test_shuffle.py`` checks that this agrees
in distribution with the per-user simulation.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence

import numpy as np
from scipy import optimize, special, stats

from fedbandit.accounting import zcdp as accounting
from fedbandit._validation import (
    check_array,
    check_delta,
    check_epsilon,
    check_float_in_range,
    check_nonnegative_int,
    check_positive_int,
    check_rng,
)

__all__ = [
    "Shuffler",
    "Allocation",
    "Release",
    "Transcript",
    "ConcurrentShuffleModel",
    "MixedRadixServer",
    "RRShuffleSummation",
    "randomized_round",
    "unary_round",
    "group_budget",
    "rr_message_probabilities",
    "rr_randomize",
    "rr_debias",
    "rr_estimator_variance",
    "rr_shuffle_delta",
    "rr_shuffle_delta_exact",
    "rr_flip_probability",
    "local_rr_flip_probability",
    "sample_rr_counts",
    "level_budget",
    "check_unit_interval",
    "check_batch_sizes",
]


# ---------------------------------------------------------------------------------------
# Input checks shared with fedbandit.mechanisms.psco
# ---------------------------------------------------------------------------------------


def check_unit_interval(name: str, x: Any) -> np.ndarray:
    """Return ``x`` as an array after checking that every entry lies in [0, 1].

    Boolean and integer arrays are kept as ``uint8`` (bits); anything else becomes float64.
    """
    arr = np.asarray(x)
    if arr.dtype == bool:
        return arr.astype(np.uint8)
    if np.issubdtype(arr.dtype, np.integer):
        if arr.size and (arr.min() < 0 or arr.max() > 1):
            raise ValueError(
                f"{name} must hold values in [0, 1], got integers in [{arr.min()}, {arr.max()}]"
            )
        return arr.astype(np.uint8, copy=False)
    arr = check_array(name, arr, dtype=float)
    if arr.size and (arr.min() < 0.0 or arr.max() > 1.0):
        raise ValueError(f"{name} must hold values in [0, 1], got values in [{arr.min()!r}, {arr.max()!r}]")
    return arr


def _is_binary(arr: np.ndarray) -> bool:
    if arr.dtype == np.uint8:
        return True
    return bool(np.all((arr == 0.0) | (arr == 1.0)))


def check_batch_sizes(batch_sizes: Any, n: int, k: int | None = None) -> tuple[int, ...]:
    """Check a nested batch-size schedule (b_1, ..., b_k) against the horizon n.

    The schedule is consistent with n when every b_i is a positive integer,
    n ≥ b_1 > b_2 > ... > b_k ≥ 1 and every b_{i+1} divides b_i (the batches of shuffler
    i + 1 tile those of shuffler i, so every time is covered by one batch per level).
    """
    try:
        sizes = tuple(batch_sizes)
    except TypeError as exc:
        raise TypeError(f"batch_sizes must be a sequence of positive ints, got {batch_sizes!r}") from exc
    if not sizes:
        raise ValueError("batch_sizes must not be empty")
    sizes = tuple(check_positive_int(f"batch_sizes[{i}]", b) for i, b in enumerate(sizes))
    if k is not None and len(sizes) != k:
        raise ValueError(f"batch_sizes must have k={k} entries (one per shuffler), got {len(sizes)}: {sizes}")
    if sizes[0] > n:
        raise ValueError(f"batch_sizes[0]={sizes[0]} exceeds the number of users n={n}; batch_sizes inconsistent with n")
    for i in range(1, len(sizes)):
        if not sizes[i] < sizes[i - 1] or sizes[i - 1] % sizes[i]:
            raise ValueError(
                f"batch_sizes must be strictly decreasing with each entry dividing the previous one, "
                f"got {sizes} (batch_sizes[{i}]={sizes[i]} vs batch_sizes[{i - 1}]={sizes[i - 1]})"
            )
    return sizes


# ---------------------------------------------------------------------------------------
# Randomized response: randomizer, analyzer, exact aggregate distribution
# ---------------------------------------------------------------------------------------


def rr_message_probabilities(p: float) -> tuple[float, float]:
    """(q0, q1) = (p/2, 1 − p/2): P(message = 1) for a user holding bit 0, resp. 1.

    With probability p the user sends a uniformly random bit ("blanket" message, Cheu
    et al. 2019, the λ/n of their randomizer), otherwise its own bit.
    """
    p = check_float_in_range("p", p, 0.0, 1.0)
    return p / 2.0, 1.0 - p / 2.0


def randomized_round(x, rng) -> np.ndarray:
    """Unbiased randomized rounding of values in [0, 1] to bits: P(bit = 1) = x.

    Bits (bool or integer 0/1 input) are returned unchanged as ``uint8`` without
    consuming randomness.  The rounding error Σ(bit − x) has mean 0 and variance
    Σ x(1 − x): it is part of the error of any summation that rounds.
    """
    arr = check_unit_interval("x", x)
    rng = check_rng(rng)
    if arr.dtype == np.uint8:
        return arr
    return (rng.random(arr.shape) < arr).astype(np.uint8)


def rr_randomize(bits, p: float, rng) -> np.ndarray:
    """The local randomizer R of binary randomized response, one message per bit.

    Message = bit with probability 1 − p, a uniform random bit with probability p;
    implemented as ``u < q_bit`` with one uniform u per message.
    """
    q0, q1 = rr_message_probabilities(p)
    arr = check_unit_interval("bits", bits)
    if arr.dtype != np.uint8 and not _is_binary(arr):
        raise ValueError("bits must hold 0/1 values; round values in [0, 1] with randomized_round first")
    rng = check_rng(rng)
    u = rng.random(arr.shape)
    return (u < np.where(arr.astype(bool), q1, q0)).astype(np.uint8)


def rr_debias(count, n_users, p: float):
    """Analyzer A: unbiased estimate (Z − m q0)/(1 − p) of the batch sum from the count Z of ones.

    Only the number of ones of the shuffled messages is used, so the random order the
    shuffler releases them in is irrelevant to the estimate (as it must be).
    """
    q0, _ = rr_message_probabilities(p)
    if p >= 1.0:
        raise ValueError("p must be < 1 for the randomized-response count to carry information")
    return (np.asarray(count, dtype=float) - np.asarray(n_users, dtype=float) * q0) / (1.0 - p)


def rr_estimator_variance(n_users: int, p: float) -> float:
    """Variance m q0 q1 / (1 − p)² of the debiased batch sum, for *any* input.

    Each message is Bernoulli(q0) or Bernoulli(q1) with q1 = 1 − q0, and q0(1 − q0) =
    q1(1 − q1), so the variance does not depend on the users' bits.
    """
    n_users = check_nonnegative_int("n_users", n_users)
    q0, q1 = rr_message_probabilities(p)
    if p >= 1.0:
        return math.inf
    return n_users * q0 * q1 / (1.0 - p) ** 2


def sample_rr_counts(ones, n_users, p: float, rng) -> np.ndarray:
    """Draw the shuffled count Z of ones of whole batches from its exact distribution.

    A batch of m users with c ones sends c Bernoulli(q1) and m − c Bernoulli(q0)
    messages, so Z ~ Bin(c, q1) + Bin(m − c, q0): two binomial draws per batch instead
    of m message draws ("aggregate sampling").

    Parameters
    ----------
    ones : array of int
        c, the number of users holding bit 1 in each batch (any shape).
    n_users : int or array of int
        m, the batch sizes (broadcast against ``ones``).
    p : float
        Blanket probability in [0, 1].
    rng : numpy.random.Generator
    """
    rng = check_rng(rng)
    q0, q1 = rr_message_probabilities(p)
    ones = np.asarray(ones, dtype=np.int64)
    m_arr = np.asarray(n_users, dtype=np.int64)
    m = np.broadcast_to(m_arr, ones.shape)
    if np.any(ones < 0) or np.any(ones > m):
        raise ValueError("ones must lie in [0, n_users] for every batch")
    if m_arr.ndim == 0:
        return _sample_counts(ones, int(m_arr), q0, q1, rng)
    return rng.binomial(ones, q1) + rng.binomial(m - ones, q0)


def _sample_counts(ones: np.ndarray, m: int, q0: float, q1: float, rng) -> np.ndarray:
    """:func:`sample_rr_counts` for one batch size m, without argument checks (hot loops)."""
    if m <= _SMALL_BATCH:
        return _sample_small_counts(ones, m, q0, q1, rng)
    return rng.binomial(ones, q1) + rng.binomial(m - ones, q0)


# Batches of at most this many users are sampled by inversion of the exact cdf table of
# Z | c (one uniform per batch); numpy's binomial sampler costs ~40 ns per call, which
# dominates the dyadic variant's many tiny batches.
_SMALL_BATCH = 16


@functools.lru_cache(maxsize=256)
def _small_count_cdf(m: int, q0: float, q1: float) -> np.ndarray:
    """cdf[c, z] = P(Bin(c, q1) + Bin(m − c, q0) ≤ z), for c, z in 0..m."""
    table = np.empty((m + 1, m + 1))
    for c in range(m + 1):
        pmf = np.convolve(stats.binom.pmf(np.arange(c + 1), c, q1), stats.binom.pmf(np.arange(m - c + 1), m - c, q0))
        table[c] = np.cumsum(pmf)
    table[:, -1] = 1.0
    return table


def _sample_small_counts(ones: np.ndarray, m: int, q0: float, q1: float, rng) -> np.ndarray:
    table = _small_count_cdf(m, q0, q1)
    u = rng.random(ones.shape)
    z = np.zeros(ones.shape, dtype=np.int64)
    for level in range(m):  # Z = #{z < m : u > F_c(z)}
        z += u > table[ones, level]
    return z


# ---------------------------------------------------------------------------------------
# Accounting of the shuffled randomized-response count
# ---------------------------------------------------------------------------------------


def _binom_sf(j, big_n, prob):
    """P(Bin(N, prob) > j) for integer-valued float arrays j, N (scipy.special, no stats overhead)."""
    j, big_n = np.broadcast_arrays(np.asarray(j, dtype=float), np.asarray(big_n, dtype=float))
    out = np.where(j < 0, 1.0, 0.0)
    inside = (j >= 0) & (j < big_n)
    if np.any(inside):
        out[inside] = special.bdtrc(j[inside], big_n[inside].astype(np.int64), prob)
    return out


def _blanket_hockey(epsilon: float, n_blanket: np.ndarray, p: float) -> np.ndarray:
    """h_N(ε) = H_{e^ε}(B + M₁ ‖ B + M₀), B ~ Bin(N, 1/2), M_x ~ Bernoulli(q_x), for many N.

    P(z) − e^ε Q(z) = b(z−1)(q1 − e^ε q0) + b(z)(q0 − e^ε q1) with b the Bin(N, 1/2) pmf,
    and b(z−1)/b(z) = z/(N − z + 1) increases in z, so the positive part is exactly the
    tail z ≥ z*; the sum is two binomial survival functions (closed form, O(1) per N).
    """
    q0, q1 = p / 2.0, 1.0 - p / 2.0
    e = math.exp(epsilon)
    a = q1 - e * q0
    if a <= 0.0:  # the user's own message alone is ε-LDP: no δ needed
        return np.zeros(np.shape(n_blanket))
    b = q0 - e * q1
    tau = (e * q1 - q0) / a
    # scipy's binomial tail is unreliable beyond ~2^31 trials; h_N is non-increasing in N,
    # so evaluating at min(N, 2^30) is a valid upper bound (and h is ~0 there anyway).
    big_n = np.minimum(np.asarray(n_blanket, dtype=float), float(2**30))
    z_star = np.floor(tau * (big_n + 1.0) / (1.0 + tau)) + 1.0
    # P(B >= j) = sf(j - 1)
    tail_prev = _binom_sf(z_star - 2.0, big_n, 0.5)
    tail = _binom_sf(z_star - 1.0, big_n, 0.5)
    return np.maximum(a * tail_prev + b * tail, 0.0)


def rr_shuffle_delta(epsilon: float, n_users: int, p: float) -> float:
    """Upper bound on δ(ε) of the shuffled binary randomized-response protocol.

    The shuffler's output is a uniformly random permutation of the m messages, which is
    equivalent (for any analysis) to the number Z of ones.  For two inputs differing in
    one user's bit, write every other message as a "blanket" uniform bit with probability
    p (independently) or its sender's bit.  An adversary who also learns which messages
    are blanket and the non-blanket bits only gains, so (joint convexity of the hockey
    stick divergence)

        δ(ε) ≤ E_N [h_N(ε)],  N ~ Bin(m − 1, p),

    with h_N the divergence between Bin(N, 1/2) + Bernoulli(q1) and Bin(N, 1/2) +
    Bernoulli(q0) (Balle, Bell, Gascón & Nissim 2019, "privacy blanket").  h_N is
    computed exactly in closed form and the expectation over N exactly (N outside a
    Bernstein window of tail mass < 1e-20 is bounded by h_0 ≤ 1 and h_hi).  The bound is
    symmetric in the two inputs.

    Parameters
    ----------
    epsilon : float
        ε > 0.
    n_users : int
        m ≥ 1, the number of users (messages) in the shuffled batch.
    p : float
        Blanket probability in [0, 1].

    Returns
    -------
    float
        δ such that the protocol is (ε, δ)-DP with respect to one user's bit.
    """
    epsilon = check_epsilon(epsilon)
    n_users = check_positive_int("n_users", n_users)
    p = check_float_in_range("p", p, 0.0, 1.0)
    return _rr_shuffle_delta(epsilon, n_users, p)


def _rr_shuffle_delta(epsilon: float, n_users: int, p: float, max_grid: int = 512) -> float:
    others = n_users - 1
    if others == 0 or p == 0.0:
        return float(_blanket_hockey(epsilon, np.array([0.0]), p)[0])
    if p >= 1.0:
        return 0.0
    # Window [lo, hi] of N outside which Bin(m - 1, p) has mass < 1e-20 (Bernstein's
    # inequality; scipy's quantile functions are unreliable that far in the tails).
    mu = others * p
    log_inv = math.log(1e20)
    t_up = log_inv / 3.0 + math.sqrt(log_inv**2 / 9.0 + 2.0 * log_inv * mu)
    t_down = math.sqrt(2.0 * log_inv * mu)
    lo = max(int(math.floor(mu - t_down)), 0)
    hi = min(int(math.ceil(mu + t_up)), others)
    n_grid = np.arange(lo, hi + 1, dtype=float)
    if n_grid.size > max_grid:
        # Wide window: bin it; h_N is non-increasing in N (adding an independent uniform
        # bit is post-processing), so the left edge of each bin bounds h on the bin.
        edges = np.unique(np.linspace(lo, hi + 1, max_grid + 1).astype(np.int64))
        mass = np.diff(stats.binom.cdf(edges - 1, others, p))
        h = _blanket_hockey(epsilon, edges[:-1].astype(float), p)
        inside = float(np.sum(mass * h))
    else:
        mass = stats.binom.pmf(n_grid, others, p)
        inside = float(np.sum(mass * _blanket_hockey(epsilon, n_grid, p)))
    below = min(float(stats.binom.cdf(lo - 1, others, p)), 1e-20) if lo > 0 else 0.0
    above = min(float(stats.binom.sf(hi, others, p)), 1e-20) if hi < others else 0.0
    return min(1.0, inside + below * 1.0 + above * float(_blanket_hockey(epsilon, np.array([float(hi)]), p)[0]))


def rr_shuffle_delta_exact(epsilon: float, bits_others, p: float) -> float:
    """Exact δ(ε) of the shuffled count for one fixed dataset of the other users.

    Z = Σ_{others} Bernoulli(q_{x_j}) + M, M ~ Bernoulli(q1) versus Bernoulli(q0); both
    directions of the hockey-stick divergence, maximised.  O(m²): for tests and small m
    (it is a lower bound on the worst case over datasets, which
    :func:`rr_shuffle_delta` upper-bounds).
    """
    epsilon = check_epsilon(epsilon)
    bits = check_unit_interval("bits_others", bits_others).ravel()
    if not _is_binary(bits):
        raise ValueError("bits_others must hold 0/1 values")
    p = check_float_in_range("p", p, 0.0, 1.0)
    q0, q1 = rr_message_probabilities(p)
    c = int(np.sum(bits))
    m0 = bits.size - c
    base = np.convolve(stats.binom.pmf(np.arange(c + 1), c, q1), stats.binom.pmf(np.arange(m0 + 1), m0, q0))
    p1 = np.convolve(base, [1.0 - q1, q1])
    p0 = np.convolve(base, [1.0 - q0, q0])
    e = math.exp(epsilon)
    return float(max(np.sum(np.maximum(p1 - e * p0, 0.0)), np.sum(np.maximum(p0 - e * p1, 0.0))))


def local_rr_flip_probability(epsilon: float) -> float:
    """p = 2/(e^ε + 1): binary randomized response that is ε-LDP on its own (q1/q0 = e^ε)."""
    epsilon = check_epsilon(epsilon)
    return 2.0 / (math.exp(epsilon) + 1.0)


@functools.lru_cache(maxsize=4096)
def _flip_probability(n_users: int, epsilon: float, delta: float) -> float:
    p_hi = local_rr_flip_probability(epsilon)  # feasible for every m (δ = 0)
    p_lo = p_hi * 1e-12
    if _rr_shuffle_delta(epsilon, n_users, p_lo) <= delta:
        return p_lo
    # δ(ε) is non-increasing in p (more blanket messages are post-processing of fewer),
    # so the feasible set is an interval [p*, 1].  Brent's method on log δ − log δ_target
    # as a function of log p (smooth, monotone) needs ~10 evaluations.
    log_target = math.log(delta)

    def gap(u: float) -> float:
        return math.log(_rr_shuffle_delta(epsilon, n_users, math.exp(u)) + 1e-300) - log_target

    u = optimize.brentq(gap, math.log(p_lo), math.log(p_hi), xtol=1e-7, rtol=1e-9)
    p = min(math.exp(u), p_hi)
    # Brent returns a point within tolerance of the root, possibly on the infeasible side:
    # step up (relative 1e-6 at a time) until the certificate holds.
    while _rr_shuffle_delta(epsilon, n_users, p) > delta:
        p = min(p * (1.0 + 1e-6), p_hi)
    return p


def rr_flip_probability(n_users: int, epsilon: float, delta: float) -> float:
    """Smallest blanket probability p making the shuffled RR count (ε, δ)-DP.

    Bisection on :func:`rr_shuffle_delta`.  For a batch of one user this is (up to δ)
    the local p = 2/(e^ε + 1); for large batches m·p tends to a constant
    λ(ε, δ) = Θ(log(1/δ)/ε²) (Cheu et al. 2019), so the debiased sum has error
    O(sqrt(log(1/δ))/ε) whatever m.

    Parameters
    ----------
    n_users : int
        Batch size m ≥ 1.
    epsilon, delta : float
        Target ε > 0 and δ in (0, 1) of the batch's shuffle mechanism.

    Returns
    -------
    float
        p in (0, 2/(e^ε + 1)].
    """
    n_users = check_positive_int("n_users", n_users)
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    return _flip_probability(n_users, epsilon, delta)


def level_budget(epsilon: float, delta: float, k: int) -> tuple[float, float]:
    """Per-mechanism (ε₀, δ₀) when every user joins k shuffle mechanisms.

    In the k-level algorithm every user sends one message to each of the k shufflers
    (one batch per level), and the batches not containing it do not depend on its data,
    so the whole transcript is a k-fold composition for that user.  Uses the better of
    basic and advanced composition (:func:`fedbandit.accounting.zcdp.split_budget_advanced`),
    the paper's route to its k^{3/2} factor.
    """
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    k = check_positive_int("k", k)
    return accounting.split_budget_advanced(epsilon, delta, k)


def unary_round(x, resolution: int, rng) -> np.ndarray:
    """Unbiased rounding of x in [0, 1] to u ∈ {0, ..., g} ones out of g bits: E[u] = g x.

    u = ⌊g x⌋ + Bernoulli(g x − ⌊g x⌋); the user's g messages are u ones and g − u zeros
    (the order is irrelevant after shuffling).  The rounding error u/g − x has variance
    at most 1/(4 g²).  Bits with g = 1 pass through without consuming randomness.
    """
    arr = check_unit_interval("x", x)
    g = check_positive_int("resolution", resolution)
    rng = check_rng(rng)
    if arr.dtype == np.uint8:
        return arr.astype(np.int64) * g
    scaled = arr * g
    low = np.floor(scaled)
    return (low + (rng.random(arr.shape) < scaled - low)).astype(np.int64)


def group_budget(epsilon: float, delta: float, group_size: int) -> tuple[float, float]:
    """Per-message (ε_b, δ_b) so that changing ``group_size`` messages costs at most (ε, δ).

    Group privacy: an (ε_b, δ_b)-DP mechanism is (g ε_b, g e^{(g−1) ε_b} δ_b)-DP for
    datasets differing in g entries; so ε_b = ε/g and δ_b = δ e^{−(g−1)ε/g}/g.  Used for
    the g-message encoding of values in [0, 1] (:class:`RRShuffleSummation` with
    ``resolution=g``), where one user's value moves at most g of its g bits.
    """
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    g = check_positive_int("group_size", group_size)
    eps_b = epsilon / g
    return eps_b, delta * math.exp(-(g - 1) * eps_b) / g


class RRShuffleSummation:
    """Randomized-response summation over one shuffled batch (Cheu et al. 2019).

    P = (R, S, A): R sends the user's bit with probability 1 − p and a uniform bit with
    probability p; S permutes the m messages uniformly; A returns (Z − m p/2)/(1 − p)
    with Z the number of ones.  p is the smallest value for which
    :func:`rr_shuffle_delta` certifies (ε, δ)-DP.

    Values in [0, 1] are reduced to bits by unbiased randomized rounding.  With
    ``resolution=1`` a user sends one rounded bit, which adds the rounding variance
    Σ x(1 − x) (as large as m/4: fine for bits, ruinous for fractional values of large
    batches).  With ``resolution=g`` the user sends g bits, u of them ones
    (:func:`unary_round`, E[u] = g x), the randomized response runs on the m g messages
    at the per-message budget of :func:`group_budget` (a user's value moves ≤ g of its
    bits), and A divides by g: the privacy noise stays O(sqrt(log(1/δ))/ε) while the
    rounding variance drops to ≤ m/(4 g²), O(1) for g ≈ sqrt(m).  [derived]

    Parameters
    ----------
    n_users : int
        Batch size m.
    epsilon, delta : float
        Privacy of this one batch's mechanism (with respect to one user's value).
    resolution : int, default 1
        g, the number of messages per user.
    """

    def __init__(self, n_users: int, epsilon: float, delta: float, resolution: int = 1):
        self.n_users = check_positive_int("n_users", n_users)
        self.epsilon = check_epsilon(epsilon)
        self.delta = check_delta(delta)
        self.resolution = check_positive_int("resolution", resolution)
        self.epsilon_message, self.delta_message = group_budget(self.epsilon, self.delta, self.resolution)
        self.n_messages = self.n_users * self.resolution
        self.p = rr_flip_probability(self.n_messages, self.epsilon_message, self.delta_message)
        self.q0, self.q1 = rr_message_probabilities(self.p)

    def __repr__(self) -> str:
        return (
            f"RRShuffleSummation(n_users={self.n_users}, epsilon={self.epsilon:.4g}, "
            f"delta={self.delta:.3g}, resolution={self.resolution}, p={self.p:.4g})"
        )

    @property
    def variance(self) -> float:
        """Privacy-noise variance of the debiased sum (any input; rounding variance not included)."""
        return rr_estimator_variance(self.n_messages, self.p) / self.resolution**2

    @property
    def certified_delta(self) -> float:
        """:func:`rr_shuffle_delta` of one message, at most the per-message δ_b."""
        return rr_shuffle_delta(self.epsilon_message, self.n_messages, self.p)

    def randomizer(self, bit: int, u: float) -> int:
        """R for one bit: the message given one uniform ``u`` in [0, 1) (resolution 1)."""
        return int(u < (self.q1 if bit else self.q0))

    def encode(self, x: float, rng) -> np.ndarray:
        """R for one user's value x in [0, 1]: its g randomized bits."""
        rng = check_rng(rng)
        ones = int(unary_round(np.array([float(x)]), self.resolution, rng)[0])
        bits = np.arange(self.resolution) < ones
        return (rng.random(self.resolution) < np.where(bits, self.q1, self.q0)).astype(np.uint8)

    def analyzer(self, messages) -> float:
        """A: debiased sum from the shuffled messages (only their count matters)."""
        messages = np.asarray(messages)
        return float(rr_debias(int(messages.sum()), messages.size, self.p)) / self.resolution

    def sample_estimate(self, ones, rng) -> np.ndarray:
        """Debiased sums of whole batches whose users hold ``ones`` unary ones in total.

        ``ones`` counts ones among the m g (pre-randomization) bits; for bits and
        resolution 1 it is the number of users holding 1.
        """
        z = sample_rr_counts(ones, self.n_messages, self.p, rng)
        return rr_debias(z, self.n_messages, self.p) / self.resolution


# ---------------------------------------------------------------------------------------
# The concurrent shuffle model, simulated message by message
# ---------------------------------------------------------------------------------------


class Shuffler:
    """One trusted shuffler of the concurrent shuffle model.

    Inactive until :meth:`open` allocates it a batch of ``batch_size`` users; while
    active it stores the messages it receives; when the batch is full the model calls
    :meth:`release`, which returns the messages in a uniformly random order and marks
    the shuffler inactive again.
    """

    def __init__(self, index: int):
        self.index = check_nonnegative_int("index", index)
        self.active = False
        self.batch_size = 0
        self.start = 0
        self.tag: Any = None
        self._messages: list = []

    def __repr__(self) -> str:
        state = f"active, {len(self._messages)}/{self.batch_size}" if self.active else "inactive"
        return f"Shuffler({self.index}, {state})"

    def open(self, batch_size: int, start: int, tag: Any = None) -> None:
        """Allocate a new batch of ``batch_size`` users, the first of which is user ``start``."""
        if self.active:
            raise RuntimeError(f"shuffler {self.index} is active; it can only be reused after its release")
        self.batch_size = check_positive_int("batch_size", batch_size)
        self.start = check_positive_int("start", start)
        self.tag = tag
        self.active = True
        self._messages = []

    def submit(self, message) -> None:
        """Store one encoded message of the current batch."""
        if not self.active:
            raise RuntimeError(f"shuffler {self.index} is inactive and accepts no messages")
        if len(self._messages) >= self.batch_size:
            raise RuntimeError(f"shuffler {self.index} is full ({self.batch_size} messages)")
        self._messages.append(message)

    @property
    def full(self) -> bool:
        return self.active and len(self._messages) == self.batch_size

    def release(self, rng) -> np.ndarray:
        """Return the batch's messages in a uniformly random order and become inactive."""
        rng = check_rng(rng)
        if not self.full:
            raise RuntimeError(f"shuffler {self.index} can only release a full batch")
        out = np.asarray(self._messages)[rng.permutation(self.batch_size)]
        self.active = False
        self._messages = []
        return out


@dataclass(frozen=True)
class Allocation:
    """A server decision: run shuffle mechanism ``(randomizer, batch_size)`` on shuffler ``shuffler``.

    ``randomizer(value, u) -> message`` encodes one user's value with one uniform u;
    ``tag`` is free (the level, for the mixed-radix server).
    """

    shuffler: int
    batch_size: int
    randomizer: Callable[[Any, float], Any]
    tag: Any = None


@dataclass(frozen=True)
class Release:
    """One executed shuffle mechanism: users ``start..end`` (inclusive), released at ``end``."""

    shuffler: int
    start: int
    end: int
    tag: Any
    messages: np.ndarray


@dataclass
class Transcript:
    """Everything the server saw (the releases) and what it reported (estimates[t], t = 0..n)."""

    n: int
    k: int
    releases: list = field(default_factory=list)
    estimates: np.ndarray | None = None
    active_counts: np.ndarray | None = None


class Server(Protocol):
    def allocate(self, t: int, inactive: Sequence[int], releases: Sequence[Release]) -> list[Allocation]: ...

    def estimate(self, t: int, releases: Sequence[Release]) -> float: ...


class ConcurrentShuffleModel:
    """k concurrent shufflers and a deterministic server (Tenenbaum et al., Algorithm 1, read from the prose).

    At time t = 1, ..., n: (1) the server allocates new batches on (some of) the inactive
    shufflers, deterministically from the releases so far; (2) user t encodes its value
    with each active shuffler's randomizer and submits the messages; (3) every shuffler
    whose batch is now full releases its messages in random order; (4) the server
    reports its estimate, a function of the releases.

    Randomness: the message of user t to shuffler i uses the uniform ``U[i, t − 1]`` of
    ``U = rng.random((k, n))`` drawn first; the shufflers' permutations use draws made
    after it.  For bit inputs the vectorized per-user path of
    :func:`fedbandit.mechanisms.psco.concurrent_psco` uses the same layout, so both give
    identical estimates from the same generator state.  This is the reference
    simulation: O(n k) Python steps, for small n (figures, tests).
    """

    def __init__(self, k: int, server: Server):
        self.k = check_positive_int("k", k)
        self.server = server

    def run(self, x, rng) -> Transcript:
        """Run users with values ``x`` (1-D, in the randomizers' domain) through the model."""
        rng = check_rng(rng)
        values = np.asarray(x)
        if values.ndim != 1:
            raise ValueError(f"x must be 1-D (one value per user), got shape {values.shape}")
        n = values.size
        u = rng.random((self.k, n))
        shufflers = [Shuffler(i) for i in range(self.k)]
        randomizers: list = [None] * self.k
        tr = Transcript(n=n, k=self.k, estimates=np.zeros(n + 1), active_counts=np.zeros(n + 1, dtype=int))
        for t in range(1, n + 1):
            inactive = [s.index for s in shufflers if not s.active]
            for alloc in self.server.allocate(t, inactive, tr.releases):
                if alloc.shuffler not in inactive:
                    raise RuntimeError(f"the server allocated the active shuffler {alloc.shuffler} at t={t}")
                shufflers[alloc.shuffler].open(alloc.batch_size, t, alloc.tag)
                randomizers[alloc.shuffler] = alloc.randomizer
            tr.active_counts[t] = sum(s.active for s in shufflers)
            for s in shufflers:
                if s.active:
                    s.submit(randomizers[s.index](values[t - 1], u[s.index, t - 1]))
            for s in shufflers:
                if s.full:
                    start, tag = s.start, s.tag
                    tr.releases.append(Release(s.index, start, t, tag, s.release(rng)))
            tr.estimates[t] = self.server.estimate(t, tr.releases)
        return tr


class MixedRadixServer:
    """Deterministic server of the book's reconstructed k-level PSCO algorithm.

    Shuffler i (level i) runs consecutive batches of size b_i over the whole stream with
    the randomized-response summation at the per-level budget; b_{i+1} divides b_i.  The
    estimate at t sums the released level-1 batches, then the level-2 batches released
    inside the current level-1 batch, and so on: the mixed-radix decomposition of t.
    Users of a partial level-k batch are not yet counted.  [derived]

    Parameters
    ----------
    batch_sizes : sequence of int
        (b_1, ..., b_k), nested.
    protocols : sequence of RRShuffleSummation
        The summation protocol of each level (``protocols[i].n_users == batch_sizes[i]``).
    """

    def __init__(self, batch_sizes: Sequence[int], protocols: Sequence[RRShuffleSummation]):
        self.batch_sizes = tuple(int(b) for b in batch_sizes)
        self.protocols = list(protocols)
        if len(self.protocols) != len(self.batch_sizes):
            raise ValueError("protocols must have one entry per level of batch_sizes")
        for b, proto in zip(self.batch_sizes, self.protocols):
            if proto.n_users != b:
                raise ValueError(f"protocol for batch size {b} was calibrated for {proto.n_users} users")

    def allocate(self, t, inactive, releases):
        return [
            Allocation(i, self.batch_sizes[i], self.protocols[i].randomizer, tag=i)
            for i in inactive
        ]

    def estimate(self, t, releases):
        # Walk the levels from the coarsest: keep the releases of level i that start after
        # the last level-(i-1) boundary covered so far.
        covered = 0
        total = 0.0
        for level, b in enumerate(self.batch_sizes):
            for rel in releases:
                if rel.tag == level and rel.start > covered and rel.end <= t:
                    total += self.protocols[level].analyzer(rel.messages)
            covered = (t // b) * b
        return total
