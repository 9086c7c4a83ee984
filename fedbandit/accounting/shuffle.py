"""accounting.shuffle."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy import optimize, special, stats

from fedbandit._validation import (
    MAX_COUNT,
    check_batch_sizes,
    check_choice,
    check_delta,
    check_epsilon,
    check_float_in_range,
    check_nonnegative_int,
    check_positive_int,
    check_unit_interval,
    is_binary,
)
from fedbandit.accounting.allocation import COMPOSITIONS, composed_guarantee, mechanism_budget
from fedbandit.accounting.composition import (
    advanced_composition,
    group_budget,
)

__all__ = [
    "rr_shuffle_delta",
    "rr_shuffle_delta_exact",
    "rr_flip_probability",
    "local_rr_flip_probability",
    "psco_accounting",
    "rr_message_probabilities",
    "rr_estimator_variance",
]


def _binom_sf(j: ArrayLike, big_n: ArrayLike, prob: float) -> np.ndarray:
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
    e = math.exp(min(epsilon, 700.0))  # δ(ε) is non-increasing: δ(700) bounds δ at larger ε
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
    epsilon = check_epsilon("epsilon", epsilon)
    n_users = check_positive_int("n_users", n_users, max_value=MAX_COUNT, reason="counts are int64")
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
    if hi - lo + 1 > max_grid:  # (the window is never allocated: it can hold ~sqrt(m) values)
        # Wide window: bin it; h_N is non-increasing in N (adding an independent uniform
        # bit is post-processing), so the left edge of each bin bounds h on the bin.
        edges = np.unique(np.linspace(lo, hi + 1, max_grid + 1).astype(np.int64))
        mass = np.diff(stats.binom.cdf(edges - 1, others, p))
        h = _blanket_hockey(epsilon, edges[:-1].astype(float), p)
        inside = float(np.sum(mass * h))
    else:
        n_grid = np.arange(lo, hi + 1, dtype=float)
        mass = stats.binom.pmf(n_grid, others, p)
        inside = float(np.sum(mass * _blanket_hockey(epsilon, n_grid, p)))
    below = min(float(stats.binom.cdf(lo - 1, others, p)), 1e-20) if lo > 0 else 0.0
    above = min(float(stats.binom.sf(hi, others, p)), 1e-20) if hi < others else 0.0
    return min(1.0, inside + below * 1.0 + above * float(_blanket_hockey(epsilon, np.array([float(hi)]), p)[0]))


def rr_shuffle_delta_exact(epsilon: float, bits_others: ArrayLike, p: float) -> float:
    """Exact δ(ε) of the shuffled count for one fixed dataset of the other users.

    Z = Σ_{others} Bernoulli(q_{x_j}) + M, M ~ Bernoulli(q1) versus Bernoulli(q0); both
    directions of the hockey-stick divergence, maximised.  O(m²): for tests and small m
    (it is a lower bound on the worst case over datasets, which
    :func:`rr_shuffle_delta` upper-bounds).

    Parameters
    ----------
    epsilon : float
        ε.
    bits_others : array_like of {0, 1}
        The other users' bits.
    p : float
        The flip probability.

    Returns
    -------
    float
        δ(ε).
    """
    epsilon = check_epsilon("epsilon", epsilon)
    bits = check_unit_interval("bits_others", bits_others).ravel()
    if not is_binary(bits):
        raise ValueError("bits_others must hold 0/1 values")
    p = check_float_in_range("p", p, 0.0, 1.0)
    q0, q1 = rr_message_probabilities(p)
    if bits.size > 100_000:
        raise ValueError(f"bits_others must hold at most 100000 bits (the exact divergence costs O(m²)), got {bits.size}")
    c = int(np.sum(bits))
    m0 = bits.size - c
    base = np.convolve(stats.binom.pmf(np.arange(c + 1), c, q1), stats.binom.pmf(np.arange(m0 + 1), m0, q0))
    p1 = np.convolve(base, [1.0 - q1, q1])
    p0 = np.convolve(base, [1.0 - q0, q0])
    e = math.exp(min(epsilon, 700.0))  # δ(ε) is non-increasing: δ(700) bounds δ at larger ε
    return float(max(np.sum(np.maximum(p1 - e * p0, 0.0)), np.sum(np.maximum(p0 - e * p1, 0.0))))


def local_rr_flip_probability(epsilon: float) -> float:
    """p = 2/(e^ε + 1): binary randomized response that is ε-LDP on its own (q1/q0 = e^ε).

    Parameters
    ----------
    epsilon : float
        The local ε.

    Returns
    -------
    float
        p.
    """
    epsilon = check_epsilon("epsilon", epsilon)
    if epsilon > 700.0:  # the same value without overflowing e^ε
        return 2.0 * math.exp(-epsilon) / (1.0 + math.exp(-epsilon))
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
    n_users = check_positive_int("n_users", n_users, max_value=MAX_COUNT, reason="counts are int64")
    epsilon = check_epsilon("epsilon", epsilon)
    delta = check_delta("delta", delta)
    return _flip_probability(n_users, epsilon, delta)


def psco_accounting(n: int, epsilon: float, delta: float, batch_sizes: Sequence[int], *, resolution: int | Sequence[int] = 1,
                    composition: str = "best") -> dict[str, Any]:
    """Privacy accounting of the k-level algorithm with the given schedule.

    Returns a dict with the per-level rows (batch size b_i, number of batches, ε₀, δ₀,
    messages per user g_i, per-message budget, blanket probability p_i, expected blanket
    messages p_i(b_i g_i − 1), the certified δ of one message, and the noise standard
    deviation of one batch sum) and the composition of the k mechanisms every user
    joins: basic (kε₀, kδ₀) and advanced (Dwork, Rothblum & Vadhan 2010) with δ' = δ/2;
    ``guarantee``, the composition the per-level budget was split by
    (:func:`fedbandit.accounting.allocation.mechanism_budget`), is at most (ε, δ), which
    makes the whole algorithm (ε, δ)-CSDP.

    Parameters
    ----------
    n : int
        The number of users.
    epsilon, delta : float
        The target (ε, δ) of the whole algorithm.
    batch_sizes : sequence of int
        (b_1, ..., b_k), the batch size of every level (:func:`fedbandit._validation.check_batch_sizes`).
    resolution : int or sequence of int
        Messages per user at every level (one value for all levels, or one per level);
        1 for bits.
    composition : {"best", "basic", "advanced"}
        The split of (ε, δ) over the k levels.

    Returns
    -------
    dict
        The per-level rows and the compositions described above.
    """
    composition = check_choice("composition", composition, COMPOSITIONS)
    n = check_positive_int("n", n)
    epsilon = check_epsilon("epsilon", epsilon)
    delta = check_delta("delta", delta)
    sizes = check_batch_sizes("batch_sizes", batch_sizes, n)
    k = len(sizes)
    gs: list[Any] = [resolution] * k if np.ndim(resolution) == 0 else list(resolution)  # type: ignore[arg-type]
    if len(gs) != k:
        raise ValueError(f"resolution must be one int or one per level ({k}), got {resolution!r}")
    gs = [check_positive_int("resolution", g, max_value=MAX_COUNT // sizes[0], reason="b·g messages per batch are int64")
          for g in gs]
    eps0, delta0 = mechanism_budget(epsilon, delta, k, composition=composition)
    levels = []
    for i, (b, g) in enumerate(zip(sizes, gs)):
        eps_b, delta_b = group_budget(eps0, delta0, g)
        p = rr_flip_probability(b * g, eps_b, delta_b)
        levels.append(
            {
                "level": i + 1,
                "batch_size": b,
                "n_batches": n // b,
                "epsilon0": eps0,
                "delta0": delta0,
                "resolution": g,
                "epsilon_message": eps_b,
                "delta_message": delta_b,
                "p": p,
                "expected_blanket": p * (b * g - 1),
                "certified_delta": rr_shuffle_delta(eps_b, b * g, p),
                "noise_std": math.sqrt(rr_estimator_variance(b * g, p)) / g,
            }
        )
    basic = (k * eps0, k * delta0)
    # (advanced composition only helps for small ε₀; math.expm1 overflows for huge ones)
    advanced = advanced_composition(eps0, delta0, k, delta / 2.0) if eps0 < 10 else (math.inf, math.inf)
    guarantee = composed_guarantee(eps0, delta0, k, delta, composition=composition)
    return {
        "n": n,
        "k": k,
        "epsilon": epsilon,
        "delta": delta,
        "levels": levels,
        "basic_composition": basic,
        "advanced_composition": advanced,
        "composition": composition,
        "guarantee": guarantee,
    }


def rr_message_probabilities(p: float) -> tuple[float, float]:
    """(q0, q1) = (p/2, 1 − p/2): P(message = 1) for a user holding bit 0, resp. 1.

    With probability p the user sends a uniformly random bit ("blanket" message, Cheu
    et al. 2019, the λ/n of their randomizer), otherwise its own bit.

    Parameters
    ----------
    p : float
        The flip probability, in [0, 1].

    Returns
    -------
    (float, float)
        (q0, q1).
    """
    p = check_float_in_range("p", p, 0.0, 1.0)
    return p / 2.0, 1.0 - p / 2.0


def rr_estimator_variance(n_users: int, p: float) -> float:
    """Variance m q0 q1 / (1 − p)² of the debiased batch sum, for *any* input.

    Each message is Bernoulli(q0) or Bernoulli(q1) with q1 = 1 − q0, and q0(1 − q0) =
    q1(1 − q1), so the variance does not depend on the users' bits.

    Parameters
    ----------
    n_users : int
        m, the users of the batch.
    p : float
        The flip probability, in [0, 1).

    Returns
    -------
    float
        The variance.
    """
    n_users = check_nonnegative_int("n_users", n_users)
    q0, q1 = rr_message_probabilities(p)
    if p >= 1.0:
        return math.inf
    return n_users * q0 * q1 / (1.0 - p) ** 2
