"""Rates of private summation under continual observation (PSCO) and of private LinUCB.

Every function states the bound it implements from Tenenbaum, Kaplan, Mansour & Stemmer
(2023), "Concurrent shuffle differential privacy under continual observation" (the
chapter's paper), or from the works it compares with.  Rate functions return the bound's
*shape* with all constants and polylogarithmic factors set to 1 unless stated: they are
drawn next to measured curves (after fitting one constant) and their exponents are what
the chapter compares with fitted slopes.

PSCO error for n users (the (n, α, β) accuracy α of the paper: with probability 1 − β
every released prefix sum is within α):

===================================  ===================================  ==========
model / algorithm                    bound                                exponent
===================================  ===================================  ==========
local (randomized response)          Θ̃(sqrt(n)/ε)  (Vadhan 2017)         1/2
sequential shuffle (one shuffler)    Θ̃(n^{1/3})                          1/3
concurrent, k shufflers              Õ(k^{3/2} n^{1/(2k+1)}/ε), Cor. 3.3   1/(2k+1)
lower bound, k shufflers             Ω̃(n^{1/(2k+1)}) via Δ_{n,k}          1/(2k+1)
concurrent, k = log n (tree)         Õ(polylog(n)/ε)                      0
central tree (Dwork et al., Chan     O(log^{3/2}(n)/ε)                    0
et al.)
===================================  ===================================  ==========

Linear contextual bandit regret through the Shariff–Sheffet reduction, regret
Õ(sqrt(n · ρ_max)) with ρ_max the PSCO error: concurrent Õ(k^{3/4} n^{(k+1)/(2k+1)}/sqrt(ε)),
sequential Õ(n^{3/5}) (Chowdhury & Zhou 2022, batch B = n^{3/5}), local Õ(n^{3/4})
(Zheng et al. 2020), central Õ(sqrt(n)).
"""

from __future__ import annotations

import math

import numpy as np

from fedbandit._validation import (
    MAX_COUNT,
    check_array,
    check_choice,
    check_epsilon,
    check_positive_array,
    check_positive_float,
    check_positive_int,
)
from fedbandit.accounting.counting import big_nk, c_epsilon, rep_nk
from fedbandit.mechanisms.psco import error_proxy

#: Most rungs of :func:`big_ladder` (one per shuffler; the book's k are at most log2 n + 1).
MAX_LADDER = 10_000

__all__ = [
    "ALGORITHMS",
    "c_epsilon",
    "rep_nk",
    "big_nk",
    "rep_threshold",
    "window_variance_inflation",
    "big_ladder",
    "tree_levels",
    "local_error_rate",
    "sequential_error_rate",
    "concurrent_error_rate",
    "tree_error_rate",
    "central_error_rate",
    "lower_bound_rate",
    "predicted_error_exponent",
    "bandit_regret_rate",
    "sequential_bandit_regret",
    "predicted_regret_exponent",
    "error_proxy_local_slope",
    "supremum_factor_slope",
]

#: The PSCO algorithms of the chapter, by name.
ALGORITHMS = ("local", "sequential", "concurrent", "tree", "central")


def _check_n(n):
    # The formulas are evaluated at real "sizes" too (rep_{Big_{n,k}, k−1}), so any n > 0.
    return check_positive_array("n", n)


def _out(x):
    return float(x) if np.ndim(x) == 0 else x


def _positive_c(epsilon) -> float:
    """c_ε, refused by name where it underflows to 0 (ε ≳ 700: the thresholds divide by it)."""
    c = c_epsilon(epsilon)
    if c <= 0.0:
        raise ValueError(f"epsilon={epsilon!r} is too large: c_epsilon = 1/(e^epsilon + e^-epsilon) underflows to 0")
    return c


def rep_threshold(k: int, epsilon: float, run_length: float) -> float:
    """The n at which rep_{n,k} reaches ``run_length``: n = (2R / c_ε^{2k/(2k+1)})^{2k+1}.

    Below rep_{n,k} < 2 a member of Δ_{n,k} repeats no bit (runs of ⌊rep⌋ = 1 copy): it is
    a stream of independent fair bits, no harder than Ber(1/2); the family has structure,
    and the lower bound teeth, only beyond ``rep_threshold(k, ε, 2)``.

    Parameters
    ----------
    k : int
        Number of concurrent shufflers (k ≥ 1).
    epsilon : float
        The privacy parameter ε.
    run_length : float
        R, the run length to reach (> 0).

    Returns
    -------
    float
        The n, or inf beyond float64's range.
    """
    k = check_positive_int("k", k, max_value=MAX_COUNT)
    run_length = check_positive_float("run_length", run_length)
    c = _positive_c(epsilon)
    try:
        return float((2.0 * run_length / c ** (2.0 * k / (2 * k + 1))) ** (2 * k + 1))
    except OverflowError:  # beyond float64: no n reaches that run length
        return math.inf


def window_variance_inflation(run_length: int) -> float:
    """(1 + R²)/(R + 1): variance of a long window's sum on Δ_{n,k} (runs of R) over that on fair bits.

    Every R + 1 users of the family hold one single Ber(1/2) bit and R copies of another,
    variance (1 + R²)/4, against (R + 1)/4 for R + 1 fair bits.  It is 1 for R = 1 (the
    family is then fair bits) and grows like R.

    Parameters
    ----------
    run_length : int
        R, the family's run length (≥ 1).

    Returns
    -------
    float
        (1 + R²)/(R + 1).
    """
    r = check_positive_int("run_length", run_length)
    return (1.0 + r * r) / (r + 1.0)


def big_ladder(n, k: int, epsilon: float) -> list:
    """[N_0 = n, N_1 = Big_{N_0,k}, N_2 = Big_{N_1,k−1}, ..., N_k = Big_{N_{k−1},1}]: the thresholds of the induction.

    The lower bound's proof for k shufflers splits on whether a batch of at least N_1 users
    is ever shuffled.  If so, inside it the other k − 1 shufflers face the problem of N_1
    users, which splits on N_2, and so on; inside a batch of N_k users no shuffler is left,
    and the N_k users between two releases cost rep_{N_k,0} = N_k/2.  If not, the single
    bits spaced N_j apart (Bits of the proof) are seen only through small batches, and their
    sum costs sqrt(N_{j−1}/N_j).  rep_{N_j,k−j} = rep_{n,k} at every step (:func:`rep_nk`).

    Parameters
    ----------
    n : float
        N₀, the number of users (one positive number).
    k : int
        Number of concurrent shufflers (k ≥ 1).
    epsilon : float
        The privacy parameter ε.

    Returns
    -------
    list of float
        [N_0, N_1, ..., N_k], k + 1 rungs.
    """
    k = check_positive_int("k", k, max_value=MAX_LADDER, reason="the ladder has k + 1 rungs")
    _positive_c(epsilon)
    n = _check_n(n)
    if np.size(n) != 1:
        raise ValueError(f"n must be a single positive number, got an array of shape {np.shape(n)}")
    out = [float(np.reshape(n, -1)[0])]
    for j in range(k, 0, -1):
        if out[-1] == 0.0:
            raise ValueError(f"epsilon={epsilon!r} is too large for k={k}: the thresholds underflow to 0")
        out.append(float(big_nk(out[-1], j, epsilon)))
    return out


def tree_levels(n: int) -> int:
    """k = ⌊log₂ n⌋ + 1: the number of shufflers (levels) of the dyadic tree variant.

    Parameters
    ----------
    n : int
        Number of users (≥ 1).

    Returns
    -------
    int
        k = ⌊log₂ n⌋ + 1.
    """
    return check_positive_int("n", n).bit_length()


def local_error_rate(n, epsilon: float):
    """sqrt(n)/ε: optimal PSCO (and plain summation) error in the local model (Vadhan 2017).

    Parameters
    ----------
    n : int, float or array_like
        Number of users (any n > 0; an array gives one value per entry).
    epsilon : float
        The privacy parameter ε.

    Returns
    -------
    float or ndarray
        The rate at each n (a float for a scalar ``n``).
    """
    epsilon = check_epsilon("epsilon", epsilon)
    return _out(np.sqrt(_check_n(n)) / epsilon)


def sequential_error_rate(n, epsilon: float = 1.0):
    """n^{1/3} ε^{−2/3}: sequential shuffle model with the optimal batch size b ≈ (n/ε²)^{1/3}.

    Batches of size b cost O(1/ε) each, sqrt(n/b)/ε over the stream, plus up to b
    uncounted users of the current batch; balancing gives n^{1/3}/ε^{2/3} (the paper's
    Θ̃(n^{1/3}) for constant ε).

    Parameters
    ----------
    n : int, float or array_like
        Number of users (any n > 0; an array gives one value per entry).
    epsilon : float, default 1.0
        The privacy parameter ε.

    Returns
    -------
    float or ndarray
        The rate at each n (a float for a scalar ``n``).
    """
    epsilon = check_epsilon("epsilon", epsilon)
    return _out(_check_n(n) ** (1.0 / 3.0) * epsilon ** (-2.0 / 3.0))


def concurrent_error_rate(n, k: int, epsilon: float):
    """k^{3/2} n^{1/(2k+1)} / ε: Corollary 3.3 of Tenenbaum et al. (polylogs dropped).

    Parameters
    ----------
    n : int, float or array_like
        Number of users (any n > 0; an array gives one value per entry).
    k : int
        Number of concurrent shufflers (k ≥ 1).
    epsilon : float
        The privacy parameter ε.

    Returns
    -------
    float or ndarray
        The rate at each n (a float for a scalar ``n``).
    """
    k = check_positive_int("k", k)
    epsilon = check_epsilon("epsilon", epsilon)
    return _out(k**1.5 * _check_n(n) ** (1.0 / (2 * k + 1)) / epsilon)


def tree_error_rate(n, epsilon: float):
    """Corollary 3.3 at k = ⌊log₂ n⌋ + 1: k^{3/2} n^{1/(2k+1)}/ε = O(log^{3/2}(n)/ε).

    Parameters
    ----------
    n : int, float or array_like
        Number of users (any n > 0; an array gives one value per entry).
    epsilon : float
        The privacy parameter ε.

    Returns
    -------
    float or ndarray
        The rate at each n (a float for a scalar ``n``).
    """
    n_arr = _check_n(n)
    epsilon = check_epsilon("epsilon", epsilon)
    k = np.floor(np.log2(n_arr)) + 1
    return _out(k**1.5 * n_arr ** (1.0 / (2 * k + 1)) / epsilon)


def central_error_rate(n, epsilon: float):
    """log₂^{3/2}(n)/ε: the central binary-tree mechanism (Dwork et al. 2010; Chan et al. 2011).

    Laplace(log n/ε) noise on each of the ≤ log n nodes of a prefix sum.

    Parameters
    ----------
    n : int, float or array_like
        Number of users (any n > 0; an array gives one value per entry).
    epsilon : float
        The privacy parameter ε.

    Returns
    -------
    float or ndarray
        The rate at each n (a float for a scalar ``n``).
    """
    n_arr = _check_n(n)
    epsilon = check_epsilon("epsilon", epsilon)
    return _out(np.maximum(np.log2(n_arr), 1.0) ** 1.5 / epsilon)


def lower_bound_rate(n, k: int, epsilon: float):
    """The lower bound's scale: rep_{n,k} (lower-bound theorem; constant and polylogs dropped).

    Parameters
    ----------
    n : int, float or array_like
        Number of users (any n > 0; an array gives one value per entry).
    k : int
        Number of concurrent shufflers (k ≥ 0).
    epsilon : float
        The privacy parameter ε.

    Returns
    -------
    float or ndarray
        rep_{n,k} (:func:`fedbandit.accounting.counting.rep_nk`).
    """
    return rep_nk(n, k, epsilon)


def predicted_error_exponent(algorithm: str, k: int | None = None) -> float:
    """Exponent of n in the PSCO error of ``algorithm`` (0 for polylogarithmic).

    ``"local"`` 1/2, ``"sequential"`` 1/3, ``"concurrent"`` 1/(2k+1), ``"tree"`` and
    ``"central"`` 0.

    Parameters
    ----------
    algorithm : {"local", "sequential", "concurrent", "tree", "central"}
        One of :data:`ALGORITHMS`.
    k : int, optional
        Number of shufflers; required for ``"concurrent"``.

    Returns
    -------
    float
        The exponent of n.
    """
    check_choice("algorithm", algorithm, ALGORITHMS)
    if algorithm == "local":
        return 0.5
    if algorithm == "sequential":
        return 1.0 / 3.0
    if algorithm == "concurrent":
        k = check_positive_int("k", k)
        return 1.0 / (2 * k + 1)
    return 0.0


def bandit_regret_rate(n, k: int, epsilon: float):
    """k^{3/4} n^{(k+1)/(2k+1)} / sqrt(ε): concurrent-shuffle LinUCB (Tenenbaum et al., linear-bandit theorem).

    sqrt(n · ρ_max) with ρ_max = k^{3/2} n^{1/(2k+1)}/ε from Corollary 3.3.

    Parameters
    ----------
    n : int, float or array_like
        Horizon (number of users) (any n > 0; an array gives one value per entry).
    k : int
        Number of concurrent shufflers (k ≥ 1).
    epsilon : float
        The privacy parameter ε.

    Returns
    -------
    float or ndarray
        The regret rate at each n (a float for a scalar ``n``).
    """
    k = check_positive_int("k", k)
    epsilon = check_epsilon("epsilon", epsilon)
    return _out(k**0.75 * _check_n(n) ** ((k + 1.0) / (2 * k + 1)) / math.sqrt(epsilon))


def sequential_bandit_regret(n, batch_size):
    """B + n^{3/4}/B^{1/4}: sequential-shuffle LinUCB with batch B (Chowdhury & Zhou 2022).

    Minimised at B = n^{3/5}, giving Õ(n^{3/5}).

    Parameters
    ----------
    n : int, float or array_like
        Horizon (number of users) (any n > 0; an array gives one value per entry).
    batch_size : float or array_like
        B ≥ 1 (broadcast against ``n``).

    Returns
    -------
    float or ndarray
        B + n^{3/4}/B^{1/4} (a float for scalar inputs).
    """
    n_arr = _check_n(n)
    b = check_array("batch_size", batch_size)
    if np.any(b < 1):
        raise ValueError(f"batch_size must be >= 1, got {batch_size!r}")
    return _out(b + n_arr**0.75 / b**0.25)


def predicted_regret_exponent(algorithm: str, k: int | None = None) -> float:
    """Exponent of n in the regret: concurrent (k+1)/(2k+1), sequential 3/5, local 3/4,
    central and tree 1/2.

    Parameters
    ----------
    algorithm : {"local", "sequential", "concurrent", "tree", "central"}
        One of :data:`ALGORITHMS`.
    k : int, optional
        Number of shufflers; required for ``"concurrent"``.

    Returns
    -------
    float
        The exponent of n in the regret.
    """
    check_choice("algorithm", algorithm, ALGORITHMS)
    if algorithm == "local":
        return 0.75
    if algorithm == "sequential":
        return 0.6
    if algorithm == "concurrent":
        k = check_positive_int("k", k)
        return (k + 1.0) / (2 * k + 1)
    return 0.5




def error_proxy_local_slope(name: str, n: int, epsilon: float, delta: float, *, k: int | None = None) -> float:
    """Local exponent of an algorithm's error proxy at n: its growth over one decade, log10(proxy(10n)/proxy(n)).

    The pre-asymptotic slope d log(error)/d log(n) of
    :func:`fedbandit.mechanisms.psco.error_proxy`, over [n, 10n]; for k concurrent shufflers it
    tends to 1/(2k+1) (Tenenbaum et al. 2023, Cor. 3.3) from above.

    Parameters
    ----------
    name : str
        The algorithm (:data:`fedbandit.mechanisms.psco.PSCO_ALGORITHMS`).
    n : int
        The number of users at the decade's start.
    epsilon, delta : float
        The algorithm's overall (ε, δ).
    k : int, optional
        The number of shufflers ("concurrent", "extrapolating").

    Returns
    -------
    float
    """
    n = check_positive_int("n", n)
    lo, hi = error_proxy(name, n, epsilon, delta, k=k), error_proxy(name, 10 * n, epsilon, delta, k=k)
    return math.log10(hi / lo)


def supremum_factor_slope(n_lo: float, finest_lo: int, n_hi: float, finest_hi: int) -> float:
    """Slope in log n over [n_lo, n_hi] of sqrt(log(n/b)), the supremum's factor a proxy leaves out.

    The supremum over the n/b releases of a schedule whose finest batch is b grows like
    sqrt(log(n/b)) (a union bound over Gaussian-like errors); the error proxy
    (:func:`fedbandit.mechanisms.psco.error_proxy`) is one release's scale, so a fitted exponent
    may exceed the proxy's by this slope, ``log(g(n_hi)/g(n_lo))/log(n_hi/n_lo)`` with
    ``g(n) = sqrt(log(max(n/b, e)))`` (floored at e so that one release has factor 1).

    Parameters
    ----------
    n_lo, n_hi : float
        The ends of the range of n, 0 < n_lo < n_hi.
    finest_lo, finest_hi : int
        The finest batch of the schedule at each end (1 for an algorithm without batches).

    Returns
    -------
    float
    """
    n_lo, n_hi = check_positive_float("n_lo", n_lo), check_positive_float("n_hi", n_hi)
    if not n_lo < n_hi:
        raise ValueError(f"n_lo must be below n_hi, got {n_lo!r} and {n_hi!r}")
    finest_lo, finest_hi = check_positive_int("finest_lo", finest_lo), check_positive_int("finest_hi", finest_hi)

    def g(n: float, b: int) -> float:
        return math.sqrt(math.log(max(n / b, math.e)))

    return math.log(g(n_hi, finest_hi) / g(n_lo, finest_lo)) / math.log(n_hi / n_lo)
