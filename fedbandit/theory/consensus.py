"""Bounds for the consensus chapter (Li, Song & Fragouli, {cite}`li2022federated`).

* Error of the hybrid mechanism: the paper's Fact 1 (Chan, Shi & Song, Corollary 4.8),
  :func:`fact1_error_bound`, and an explicit-constant version from the Laplace-sum
  concentration lemma of Chan et al. (their Corollary 2.9), :func:`hybrid_error_bound`.
* Regret: the order of the paper's Theorems 2 and 4, ``O(M K log^{2.25} T / epsilon)``
  (:func:`paper_regret_order`, constant unknown), and the book's *derived* bounds for the
  reconstructed indices (:func:`master_worker_regret_bound`,
  :func:`decentralized_regret_bound`, :func:`ucb_regret_bound`,
  :func:`centralized_regret_bound`): each suboptimal arm is pulled until its confidence
  width (UCB term plus privacy term) falls below ``Delta_j / 2``; the regret is the sum over
  arms of ``Delta_j`` times that number of pulls, with the algorithms' overshoots (doubling
  blocks, consensus lag ``c_i``, ``M`` pulls per slot).  These are the standard
  "width meets gap" calculations, stated without the lower-order failure-probability terms:
  theory-level curves to set beside the measurements, not certified upper bounds.
* Communication: :func:`master_worker_communications` (rounds at ``t = 2^p``).
"""

from __future__ import annotations

import math

import numpy as np

from fedbandit._validation import (
    check_array,
    check_callable,
    check_choice,
    check_epsilon,
    check_float_in_range,
    check_int_array,
    check_int_in_range,
    check_positive_array,
    check_positive_float,
    check_positive_int,
    check_probability,
)
from fedbandit.accounting.counting import hybrid_counter_scales, per_item_counter_scale

__all__ = [
    "fact1_error_bound",
    "hybrid_error_bound",
    "paper_regret_order",
    "master_worker_regret_bound",
    "decentralized_regret_bound",
    "ucb_regret_bound",
    "centralized_regret_bound",
    "master_worker_communications",
    "width_pulls",
]


def fact1_error_bound(t, epsilon: float, delta: float, *, constant: float = 1.0, sensitivity: float = 1.0):
    """Fact 1 of the paper: ``constant * (s/eps) (log2 t)^{1.5} ln(1/delta)``.

    Li, Song & Fragouli state that the hybrid mechanism's error at time ``t`` is at most
    ``(1/eps) (log t)^{1.5} log(1/delta)`` with probability ``1 - delta`` (their Fact 1,
    quoting Chan, Shi & Song, Corollary 4.8, where it is an ``O(.)`` statement).  With
    ``constant = 1`` it is the paper's literal statement (log base 2, the tree depth); the
    chapter measures which constant makes it hold.

    Parameters
    ----------
    t : float or array_like
        Count(s) t ≥ 1.
    epsilon, delta : float
        The counter's ε and the failure probability δ.
    constant : float, default 1.0
        The multiplier (1: the paper's literal statement).
    sensitivity : float, default 1.0
        s.

    Returns
    -------
    ndarray
        The bound at each t.
    """
    t = _check_horizons("t", t)
    epsilon = check_epsilon("epsilon", epsilon)
    delta = check_probability("delta", delta)
    constant = check_positive_float("constant", constant)
    sensitivity = check_positive_float("sensitivity", sensitivity)
    return constant * sensitivity / epsilon * np.log2(t) ** 1.5 * math.log(1.0 / delta)


def hybrid_error_bound(t, epsilon: float, delta: float, *, sensitivity: float = 1.0):
    """Explicit ``1 - delta`` bound on the hybrid mechanism's error at count ``t``.

    At ``t = 2^k + tau`` the error is a sum of ``k + 1`` independent ``Lap(2s/eps)`` and
    ``popcount(tau)`` independent ``Lap(2ks/eps)`` variables.  Chan, Shi & Song's
    concentration lemma for sums of independent Laplace variables (their Corollary 2.9;
    chapter 3 checks the bound against a Monte Carlo quantile): with ``nu = max(sqrt(sum b_i^2), b_max sqrt(ln(2/delta)))``,
    ``P(|Y| > nu sqrt(8 ln(2/delta))) <= delta``.

    Parameters
    ----------
    t : int or array_like
        Count(s) t ≥ 1.
    epsilon, delta : float
        The counter's ε and the failure probability δ.
    sensitivity : float, default 1.0
        s.

    Returns
    -------
    ndarray
        The bound at each t.
    """
    t = check_int_array("t", t, low=1)
    epsilon = check_epsilon("epsilon", epsilon)
    delta = check_probability("delta", delta)
    sensitivity = check_positive_float("sensitivity", sensitivity)
    k = np.frexp(t.astype(float))[1] - 1
    tau = t - (np.int64(1) << k)
    pc = np.zeros(t.shape, dtype=np.int64)
    x = tau.copy()
    while np.any(x):
        pc += x & 1
        x >>= 1
    b_log, b_level = hybrid_counter_scales(epsilon, sensitivity)
    b_bin = k * b_level
    sum_b2 = (k + 1) * b_log**2 + pc * b_bin**2
    b_max = np.where(pc > 0, np.maximum(b_bin, b_log), b_log)
    L = math.log(2.0 / delta)
    nu = np.maximum(np.sqrt(sum_b2), b_max * math.sqrt(L))
    return nu * math.sqrt(8.0 * L)


def paper_regret_order(T, n_agents: int, n_arms: int, epsilon: float, *, constant: float = 1.0):
    """The order of the paper's Theorems 2 and 4: ``constant * M K (ln T)^{2.25} / eps``.

    The book uses no constant of the theorems; the chapter scales this curve
    to the measurements to compare *shapes*.

    Parameters
    ----------
    T : float or array_like
        Horizon(s) T ≥ 1.
    n_agents : int
        M.
    n_arms : int
        K.
    epsilon : float
        ε.
    constant : float, default 1.0
        The multiplier fitted to the measurements.

    Returns
    -------
    ndarray
        The order at each T.
    """
    T = _check_horizons("T", T)
    M = check_positive_int("n_agents", n_agents)
    K = check_positive_int("n_arms", n_arms)
    epsilon = check_epsilon("epsilon", epsilon)
    constant = check_positive_float("constant", constant)
    return constant * M * K * np.log(T) ** 2.25 / epsilon


def _check_horizons(name, T) -> np.ndarray:
    """Horizons (real, >= 1; scalar or array) of the bound curves."""
    T = check_positive_array(name, T)
    if np.any(T < 1):
        raise ValueError(f"{name} must be >= 1, got {T!r:.80}")
    return T


def _g(n):
    k = np.frexp(np.maximum(np.asarray(n, dtype=float), 1.0))[1] - 1
    return np.sqrt(2.0 * (k + 1) + 2.0 * k**3)


def _privacy_width(n, T, epsilon, rho, kind, sensitivity):
    if epsilon is None or kind == "none":
        return np.zeros_like(np.asarray(n, dtype=float))
    lt = math.log(max(T, 2))
    if kind == "fact1":
        return per_item_counter_scale(epsilon, sensitivity) * math.log2(max(T, 2)) ** 1.5 * rho * lt / n
    return math.sqrt(2.0 * rho * lt) * hybrid_counter_scales(epsilon, sensitivity)[0] * _g(n) / n


def _private_ucb_width(T, sigma, rho, epsilon, privacy_width, sensitivity):
    """n -> sigma sqrt(2 rho ln T / n) + the privacy width: one agent's private UCB width after n pulls."""

    def width(n):
        return sigma * np.sqrt(2 * rho * math.log(T) / n) + _privacy_width(n, T, epsilon, rho, privacy_width, sensitivity)

    return width


def width_pulls(width, target, n_max: float = 1e12, n_grid: int = 4000) -> float:
    """Smallest ``n`` on a fine log grid in ``[1, n_max]`` with ``width(n) <= target``.

    ``width`` is a vectorized function of the (real) count; returns ``n_max`` if never.

    Parameters
    ----------
    width : callable
        A vectorized function of the (real) count n.
    target : float
        The width to reach.
    n_max : float, default 1e12
        The grid's end.
    n_grid : int, default 4000
        The number of grid points.

    Returns
    -------
    float
        The smallest grid n with ``width(n) <= target``, or ``n_max``.
    """
    width = check_callable("width", width)
    target = check_positive_float("target", target)
    n_max = check_float_in_range("n_max", n_max, 1.0, 1e100)
    n_grid = check_positive_int("n_grid", n_grid, max_value=10**7, reason="the grid is allocated")
    grid = np.logspace(0, math.log10(n_max), n_grid)
    ok = np.nonzero(width(grid) <= target)[0]
    return float(grid[ok[0]]) if ok.size else float(n_max)


def _check_common(epsilon, rho, sigma, privacy_width, sensitivity):
    if epsilon is not None:
        check_epsilon("epsilon", epsilon)
    if not (isinstance(rho, (int, float, np.floating)) and rho > 1 and math.isfinite(rho)):
        raise ValueError(f"rho must be a finite number > 1, got {rho!r}")
    check_positive_float("sigma", sigma)
    check_positive_float("sensitivity", sensitivity)
    check_choice("privacy_width", privacy_width, ("std", "fact1", "none"))


def _check_gaps(gaps):
    g = check_array("gaps", gaps, ndim=1)
    if np.any(g < 0):
        raise ValueError("gaps must be >= 0")
    return g[g > 0]


def master_worker_regret_bound(T, gaps, n_agents: int, epsilon, *, rho: float = 2.0, sigma: float = 0.5,
                               privacy_width: str = "std", sensitivity: float = 1.0):
    """Derived regret curve of DP-Master-worker UCB (the book's reconstructed index).

    Each agent pulls arm ``j`` until ``sigma sqrt(2 rho ln T / n) + nu(n, T) <= Delta_j/2``
    (``n*_j``); the doubling rule can overshoot by a factor 2 (a block of ``2^{p-1}``
    after ``2^{p-1} - 1`` pulls), so ``R(T) ~ M sum_j Delta_j (2 n*_j + 1)``.  ``epsilon=None``
    gives the non-private schedule.

    Parameters
    ----------
    T : float or array_like
        Horizon(s) T ≥ 1.
    gaps : array_like
        The arms' gaps Δ_j ≥ 0 (zero gaps, the best arms, cost nothing).
    n_agents : int
        M.
    epsilon : float or None
        ε of each counter (None: non-private).
    rho : float, default 2.0
        ρ > 1 of the UCB index.
    sigma : float, default 0.5
        The reward noise's sub-Gaussian scale.
    privacy_width : {"std", "fact1", "none"}, default "std"
        The privacy term of the index: the hybrid counter's standard deviation bound, Fact 1's bound, or none.
    sensitivity : float, default 1.0
        The counters' sensitivity s.

    Returns
    -------
    ndarray
        The regret curve, one value per horizon.
    """
    _check_common(epsilon, rho, sigma, privacy_width, sensitivity)
    g = _check_gaps(gaps)
    M = check_positive_int("n_agents", n_agents)
    out = []
    for TT in np.atleast_1d(_check_horizons("T", T)):
        width = _private_ucb_width(TT, sigma, rho, epsilon, privacy_width, sensitivity)
        total = sum(d * min(2 * width_pulls(width, d / 2) + 1, TT) for d in g)
        out.append(M * total)
    return np.array(out)


def decentralized_regret_bound(T, gaps, c_i, epsilon, *, rho: float = 2.0, sigma: float = 0.5,
                               privacy_width: str = "std", sensitivity: float = 1.0):
    """Derived regret curve of DP-Decentralized UCB (reconstructed index, ``c_0 = M``).

    Agent ``i`` stops pulling arm ``j`` once its estimated count ``n̂`` (about ``n_j/M``)
    makes ``sigma sqrt(2 rho (n̂ + c_i) ln T/(M n̂^2)) + nu_i(n̂) <= Delta_j/2``; since
    ``n̂ >= n_j/M - c_i`` the network's pulls of ``j`` stay below
    ``M (max_i n̂*_ij + max_i c_i + 1)``: ``R(T) ~ sum_j Delta_j M (n̂*_j + c_max + 1)``.

    Parameters
    ----------
    T : float or array_like
        Horizon(s) T ≥ 1.
    gaps : array_like
        The arms' gaps Δ_j ≥ 0 (zero gaps, the best arms, cost nothing).
    c_i : array_like
        The agents' constants c_i (one per agent, so M = its length).
    epsilon : float or None
        ε of each counter (None: non-private).
    rho : float, default 2.0
        ρ > 1 of the UCB index.
    sigma : float, default 0.5
        The reward noise's sub-Gaussian scale.
    privacy_width : {"std", "fact1", "none"}, default "std"
        The privacy term of the index: the hybrid counter's standard deviation bound, Fact 1's bound, or none.
    sensitivity : float, default 1.0
        The counters' sensitivity s.

    Returns
    -------
    ndarray
        The regret curve, one value per horizon.
    """
    _check_common(epsilon, rho, sigma, privacy_width, sensitivity)
    g = _check_gaps(gaps)
    c = check_array("c_i", c_i, ndim=1)
    M = c.size
    cmax = float(c.max())
    out = []
    for TT in np.atleast_1d(_check_horizons("T", T)):
        def width(n, TT=TT):
            v = (n + cmax) / n**2
            ucb = sigma * np.sqrt(2 * rho * v * math.log(TT) / M)
            # the privacy width's numerator at count n (its value times n): b(T), as in the index
            priv = _privacy_width(n, TT, epsilon, rho, privacy_width, sensitivity) * n
            return ucb + priv * v / math.sqrt(M)
        total = sum(d * min(M * (width_pulls(width, d / 2) + cmax + 1), M * TT) for d in g)
        out.append(total)
    return np.array(out)


def ucb_regret_bound(T, gaps, n_agents: int = 1, *, rho: float = 2.0, sigma: float = 0.5, epsilon=None,
                     privacy_width: str = "std", sensitivity: float = 1.0):
    """Derived curve of ``M`` independent (private) UCB agents: ``M sum_j Delta_j (n*_j + 1)``.

    Parameters
    ----------
    T : float or array_like
        Horizon(s) T ≥ 1.
    gaps : array_like
        The arms' gaps Δ_j ≥ 0 (zero gaps, the best arms, cost nothing).
    n_agents : int, default 1
        M.
    rho : float, default 2.0
        ρ > 1 of the UCB index.
    sigma : float, default 0.5
        The reward noise's sub-Gaussian scale.
    epsilon : float, optional
        ε of each counter (default non-private).
    privacy_width : {"std", "fact1", "none"}, default "std"
        The privacy term of the index: the hybrid counter's standard deviation bound, Fact 1's bound, or none.
    sensitivity : float, default 1.0
        The counters' sensitivity s.

    Returns
    -------
    ndarray
        The regret curve, one value per horizon.
    """
    _check_common(epsilon, rho, sigma, privacy_width, sensitivity)
    g = _check_gaps(gaps)
    M = check_positive_int("n_agents", n_agents)
    out = []
    for TT in np.atleast_1d(_check_horizons("T", T)):
        width = _private_ucb_width(TT, sigma, rho, epsilon, privacy_width, sensitivity)
        out.append(M * sum(d * min(width_pulls(width, d / 2) + 1, TT) for d in g))
    return np.array(out)


def centralized_regret_bound(T, gaps, n_agents: int, *, rho: float = 2.0, sigma: float = 0.5):
    """Derived curve of the centralized learner: ``sum_j Delta_j (N*_j + M)``, ``N*`` pooled pulls.

    Parameters
    ----------
    T : float or array_like
        Horizon(s) T ≥ 1.
    gaps : array_like
        The arms' gaps Δ_j ≥ 0 (zero gaps, the best arms, cost nothing).
    n_agents : int
        M.
    rho : float, default 2.0
        ρ > 1 of the UCB index.
    sigma : float, default 0.5
        The reward noise's sub-Gaussian scale.

    Returns
    -------
    ndarray
        The regret curve, one value per horizon.
    """
    _check_common(None, rho, sigma, "none", 1.0)
    g = _check_gaps(gaps)
    M = check_positive_int("n_agents", n_agents)
    out = []
    for TT in np.atleast_1d(_check_horizons("T", T)):
        def width(n, TT=TT):
            return sigma * np.sqrt(2 * rho * math.log(M * TT) / n)
        out.append(sum(d * min(width_pulls(width, d / 2) + M, M * TT) for d in g))
    return np.array(out)


def master_worker_communications(T, n_arms: int) -> np.ndarray:
    """Communication rounds of DP-Master-worker UCB up to ``T``: slots ``2^p`` with ``K < 2^p <= T``.

    Parameters
    ----------
    T : int or array_like
        Horizon(s) T ≥ 1.
    n_arms : int
        K.

    Returns
    -------
    ndarray
        The number of communication rounds at each T.
    """
    T = check_int_array("T", T, low=1)
    K = check_int_in_range("n_arms", n_arms, 1, None)
    # 2^p <= T  <=>  p <= floor(log2 T);  2^p > K  <=>  p >= floor(log2 K) + 1.
    fl = np.frexp(T.astype(float))[1] - 1
    return np.maximum(fl - (K.bit_length() - 1), 0).astype(np.int64)
