"""Randomized-response summation for the shuffle model: randomizer, analyzer, exact aggregate counts.

The mechanism pieces of the concurrent-shuffle chapter (Tenenbaum, Kaplan, Mansour &
Stemmer 2023, "Concurrent shuffle differential privacy under continual observation"):

* :class:`RRShuffleSummation` -- binary randomized-response summation in the shuffle
  model (Cheu, Smith, Ullman, Zeber & Zhilyaev 2019): each user sends its bit with
  probability 1 − p and a uniformly random bit with probability p; the analyzer
  debiases the number of ones.  Values in [0, 1] are first reduced to bits by unbiased
  randomized rounding (:func:`randomized_round`), or to g unary bits
  (:func:`unary_round`, ``resolution=g``).
* :func:`rr_randomize` / :func:`rr_debias` -- the randomizer and analyzer on arrays;
  :func:`sample_rr_counts` draws the shuffled count of ones of whole batches from its
  exact distribution (two binomials per batch) instead of simulating every message;
  ``tests/test_shuffle.py`` checks that this agrees in distribution with the per-user
  simulation.

The shufflers themselves and the message-level concurrent shuffle model are
intermediaries (:mod:`fedbandit.protocols.intermediaries`); the accounting of the
shuffled count (the privacy-blanket bound, the flip probability meeting a target) is in
:mod:`fedbandit.accounting.shuffle`; the protocol that runs randomized response on every
coordinate of the linear-bandit users' records is :mod:`fedbandit.protocols.concurrent`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import cast

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats

from fedbandit._validation import (
    MAX_STEPS,
    check_delta,
    check_epsilon,
    check_int_array,
    check_positive_int,
    check_rng,
    check_unit_interval,
    is_binary,
)
from fedbandit.accounting.composition import group_budget
from fedbandit.accounting.shuffle import (
    rr_estimator_variance,
    rr_flip_probability,
    rr_message_probabilities,
    rr_shuffle_delta,
)

__all__ = [
    "RRShuffleSummation",
    "randomized_round",
    "unary_round",
    "unary_resolution",
    "rr_randomize",
    "rr_debias",
    "sample_rr_counts",
]


# ---------------------------------------------------------------------------------------
# Randomized response: randomizer, analyzer, exact aggregate distribution
# ---------------------------------------------------------------------------------------


def randomized_round(x: ArrayLike, rng: np.random.Generator) -> np.ndarray:
    """Unbiased randomized rounding of values in [0, 1] to bits: P(bit = 1) = x.

    Bits (bool or integer 0/1 input) are returned unchanged as ``uint8`` without
    consuming randomness.  The rounding error Σ(bit − x) has mean 0 and variance
    Σ x(1 − x): it is part of the error of any summation that rounds.

    Parameters
    ----------
    x : array_like
        Values in [0, 1] (or bits).
    rng : numpy.random.Generator

    Returns
    -------
    ndarray of uint8
    """
    arr = check_unit_interval("x", x)
    rng = check_rng("rng", rng)
    if arr.dtype == np.uint8:
        return arr
    return (rng.random(arr.shape) < arr).astype(np.uint8)


def rr_randomize(bits: ArrayLike, p: float, rng: np.random.Generator) -> np.ndarray:
    """The local randomizer R of binary randomized response, one message per bit.

    Message = bit with probability 1 − p, a uniform random bit with probability p;
    implemented as ``u < q_bit`` with one uniform u per message.

    Parameters
    ----------
    bits : array_like of {0, 1}
        The users' bits.
    p : float
        The flip probability.
    rng : numpy.random.Generator

    Returns
    -------
    ndarray of uint8
        One message per bit.
    """
    q0, q1 = rr_message_probabilities(p)
    arr = check_unit_interval("bits", bits)
    if arr.dtype != np.uint8 and not is_binary(arr):
        raise ValueError("bits must hold 0/1 values; round values in [0, 1] with randomized_round first")
    rng = check_rng("rng", rng)
    u = rng.random(arr.shape)
    return (u < np.where(arr.astype(bool), q1, q0)).astype(np.uint8)


def rr_debias(count: ArrayLike, n_users: ArrayLike, p: float) -> np.ndarray:
    """Analyzer A: unbiased estimate (Z − m q0)/(1 − p) of the batch sum from the count Z of ones.

    Only the number of ones of the shuffled messages is used, so the random order the
    shuffler releases them in is irrelevant to the estimate (as it must be).

    Parameters
    ----------
    count : int or array_like
        Z, the ones among the shuffled messages.
    n_users : int or array_like
        m, the messages.
    p : float
        The flip probability (< 1).

    Returns
    -------
    float or ndarray
        The estimated batch sum.
    """
    q0, _ = rr_message_probabilities(p)
    if p >= 1.0:
        raise ValueError("p must be < 1 for the randomized-response count to carry information")
    m = check_int_array("n_users", n_users, low=1)
    z = check_int_array("count", count, low=0)
    if np.any(z > m):
        raise ValueError(f"count must lie in [0, n_users] (a count of ones among n_users messages), got {count!r:.80}")
    return (np.asarray(count, dtype=float) - np.asarray(n_users, dtype=float) * q0) / (1.0 - p)


def sample_rr_counts(ones: ArrayLike, n_users: ArrayLike, p: float, rng: np.random.Generator) -> np.ndarray:
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

    Returns
    -------
    ndarray of int64
        Z, one count per batch.
    """
    rng = check_rng("rng", rng)
    q0, q1 = rr_message_probabilities(p)
    ones = check_int_array("ones", ones, low=0)
    m_arr = check_int_array("n_users", n_users, low=1)
    try:
        m = np.broadcast_to(m_arr, ones.shape)
    except ValueError:
        raise ValueError(f"n_users of shape {m_arr.shape} does not broadcast to ones of shape {ones.shape}") from None
    if np.any(ones < 0) or np.any(ones > m):
        raise ValueError("ones must lie in [0, n_users] for every batch")
    if m_arr.ndim == 0:
        return sample_rr_counts_unchecked(ones, int(m_arr), q0, q1, rng)
    return rng.binomial(ones, q1) + rng.binomial(m - ones, q0)


def sample_rr_counts_unchecked(ones: np.ndarray, m: int, q0: float, q1: float, rng: np.random.Generator) -> np.ndarray:
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


@functools.lru_cache(maxsize=256)
def _small_count_columns(m: int, q0: float, q1: float) -> np.ndarray:
    """The first m columns of :func:`_small_count_cdf` as rows: cols[z, c] = F_c(z), contiguous."""
    cols = np.ascontiguousarray(_small_count_cdf(m, q0, q1)[:, :m].T)
    cols.flags.writeable = False
    return cols


def _sample_small_counts(ones: np.ndarray, m: int, q0: float, q1: float, rng: np.random.Generator) -> np.ndarray:
    cols = _small_count_columns(m, q0, q1)
    u = rng.random(ones.shape)
    # Z = #{z < m : u > F_c(z)}
    if m == 1:
        return (u > cols[0].take(ones)).astype(np.int64)
    # the m thresholds of every batch gathered in one take (z leading), then the m comparisons counted
    # over that leading axis: the same count as (u[..., None] > table[ones, :m]).sum(axis=-1), whose
    # reduction over a short last axis is slow, and as m gathers and comparisons column by column
    return (u > cols.take(ones, axis=1)).sum(axis=0, dtype=np.int64)


def unary_round(x: ArrayLike, resolution: int | Sequence[int], rng: np.random.Generator) -> np.ndarray:
    """Unbiased rounding of x in [0, 1] to u ∈ {0, ..., g} ones out of g bits: E[u] = g x.

    u = ⌊g x⌋ + Bernoulli(g x − ⌊g x⌋); the user's g messages are u ones and g − u zeros
    (the order is irrelevant after shuffling).  The rounding error u/g − x has variance
    at most 1/(4 g²).  Bits with g = 1 pass through without consuming randomness.

    ``resolution`` is one g, or a sequence (g_1, ..., g_k): then every value is rounded
    independently at every g_i and the result has a leading axis of length k (the k
    levels of the concurrent-shuffle protocol, each level's randomizer rounding on its
    own), from one draw of uniforms of shape (k,) + x.shape.

    Parameters
    ----------
    x : array_like
        Values in [0, 1] (or bits).
    resolution : int or sequence of int
        g, or (g_1, ..., g_k).
    rng : numpy.random.Generator

    Returns
    -------
    ndarray of int64
        u (with a leading axis of length k for a sequence).
    """
    arr = check_unit_interval("x", x)
    g: int | np.ndarray
    if np.ndim(resolution) == 0:
        g = check_positive_int("resolution", resolution)
    else:
        levels = [check_positive_int(f"resolution[{i}]", r) for i, r in enumerate(cast(Sequence[int], resolution))]
        if not levels:
            raise ValueError("resolution must be a positive int or a non-empty sequence of positive ints")
        g = np.array(levels, dtype=float).reshape((-1,) + (1,) * arr.ndim)
    rng = check_rng("rng", rng)
    if arr.dtype == np.uint8:
        return (arr.astype(np.int64) * g).astype(np.int64)
    return unary_round_unchecked(arr, g, rng)


def unary_round_unchecked(arr: np.ndarray, g: ArrayLike, rng: np.random.Generator) -> np.ndarray:
    """:func:`unary_round` of float values without argument checks (hot loops); ``g`` broadcast against ``arr``."""
    scaled = arr * g
    low = np.floor(scaled)
    return (low + (rng.random(scaled.shape) < scaled - low)).astype(np.int64)


def unary_resolution(n_users: int) -> int:
    """g = max(1, ⌈sqrt(m)⌉): unary messages per user for a batch of m users with values in [0, 1].

    The rounding variance of the batch sum, at most m/(4g²), is then at most 1/4, while
    the privacy noise grows only through the group-privacy budget of the g messages
    (:class:`RRShuffleSummation` with ``resolution=g``).  [derived]

    Parameters
    ----------
    n_users : int
        m, the users of the batch.

    Returns
    -------
    int
        g.
    """
    m = check_positive_int("n_users", n_users)
    return max(1, math.ceil(math.sqrt(m)))


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
        self.epsilon = check_epsilon("epsilon", epsilon)
        self.delta = check_delta("delta", delta)
        self.resolution = check_positive_int("resolution", resolution, max_value=MAX_STEPS, reason="messages per user")
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

    def encode(self, x: float, rng: np.random.Generator) -> np.ndarray:
        """R for one user's value x in [0, 1]: its g randomized bits."""
        rng = check_rng("rng", rng)
        ones = int(unary_round(np.array([float(x)]), self.resolution, rng)[0])
        bits = np.arange(self.resolution) < ones
        return (rng.random(self.resolution) < np.where(bits, self.q1, self.q0)).astype(np.uint8)

    def analyzer(self, messages: np.ndarray) -> float:
        """A: debiased sum from the shuffled messages (only their count matters)."""
        messages = np.asarray(messages)
        return float(rr_debias(int(messages.sum()), messages.size, self.p)) / self.resolution

    def sample_estimate(self, ones: ArrayLike, rng: np.random.Generator) -> np.ndarray:
        """Debiased sums of whole batches whose users hold ``ones`` unary ones in total.

        ``ones`` counts ones among the m g (pre-randomization) bits; for bits and
        resolution 1 it is the number of users holding 1.
        """
        z = sample_rr_counts(ones, self.n_messages, self.p, rng)
        return rr_debias(z, self.n_messages, self.p) / self.resolution


# The private names these helpers had before they were made public (fedbandit.protocols imported
# them): kept only so that code written against them still imports; nothing here uses them.
_sample_counts = sample_rr_counts_unchecked
_unary_round = unary_round_unchecked
