"""Composition of (ε, δ)-DP mechanisms: basic, advanced, optimal; group and level budgets.

* :func:`advanced_composition` -- Dwork, Rothblum & Vadhan (2010), Thm. III.3;
* :func:`optimal_composition_delta`, :func:`optimal_composition_epsilon` -- the exact
  (ε, δ) of m adaptively composed (ε₀, δ₀)-DP mechanisms (Kairouz, Oh & Viswanath 2015,
  Thm. 3.3): no bound on composition is tighter, so its per-mechanism budget
  (:func:`split_budget_optimal`) is never below basic's or advanced composition's at the
  same δ₀;
* :func:`split_budget_advanced`, :func:`level_budget`, :func:`group_budget` -- the
  per-mechanism budgets the protocols use;
* :func:`gaussian_noise_scale` -- the classical Gaussian mechanism's noise per unit
  sensitivity at a per-mechanism budget, the criterion that compares budgets.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from numpy.typing import ArrayLike
from scipy import optimize, special

from fedbandit._validation import (
    check_array,
    check_delta,
    check_epsilon,
    check_float_in_range,
    check_nonnegative_float,
    check_positive_int,
)

__all__ = [
    "advanced_composition",
    "optimal_composition_delta",
    "optimal_composition_epsilon",
    "split_budget_optimal",
    "split_budget_advanced",
    "group_budget",
    "level_budget",
    "gaussian_noise_scale",
    "MAX_OPTIMAL_MECHANISMS",
]

#: Largest m :func:`optimal_composition_delta` takes: its sum has m + 1 terms, evaluated inside
#: root finders (a million terms per evaluation is already seconds per budget).
MAX_OPTIMAL_MECHANISMS = 10**6


def advanced_composition(
    epsilon: float, delta: float, k: int, delta_prime: float
) -> tuple[float, float]:
    """k-fold adaptive composition of (ε, δ)-DP mechanisms ([DRV10], Thm. III.3).

    Returns (ε', kδ + δ') with ε' = sqrt(2k log(1/δ')) ε + k ε (e^ε − 1).

    Parameters
    ----------
    epsilon, delta : float
        Each mechanism's (ε, δ).
    k : int
        The number of mechanisms.
    delta_prime : float
        The slack δ'.

    Returns
    -------
    (float, float)
        (ε', kδ + δ').
    """
    epsilon = check_epsilon("epsilon", epsilon)
    delta = check_nonnegative_float("delta", delta)
    k = check_positive_int("k", k)
    delta_prime = check_delta("delta_prime", delta_prime)
    return _advanced_composition(epsilon, delta, k, delta_prime)


def _advanced_composition(epsilon: float, delta: float, k: int, delta_prime: float) -> tuple[float, float]:
    # (the solver below evaluates it at ε₀ down to 1e-300, below check_epsilon's floor)
    # e^ε − 1 overflows a float for ε ≳ 709: the composed ε is then infinite, not an error
    growth = math.expm1(epsilon) if epsilon < 700.0 else math.inf
    eps_total = math.sqrt(2 * k * math.log(1 / delta_prime)) * epsilon + k * epsilon * growth
    return eps_total, k * delta + delta_prime


def _optimal_delta(epsilon: float, eps0: float, delta0: float, m: int) -> float:
    # δ(ε) of the m-fold product of the (ε₀, δ₀) dominating pair, in log space (see optimal_composition_delta)
    ones = np.arange(m + 1, dtype=float)  # j: the number of outcomes that favour Q
    margin = (m - 2.0 * ones) * eps0 - epsilon  # term j is positive iff (m − 2j) ε₀ > ε
    active = margin > 0.0
    log_rr = -math.inf
    if np.any(active):
        ja, ma = ones[active], margin[active]
        log_terms = (special.gammaln(m + 1.0) - special.gammaln(ja + 1.0) - special.gammaln(m - ja + 1.0)
                     + (m - ja) * eps0 - m * np.logaddexp(0.0, eps0) + np.log(-np.expm1(-ma)))
        log_rr = float(special.logsumexp(log_terms))
    log_keep = m * math.log1p(-delta0)  # log (1 − δ₀)^m
    return min(1.0, -math.expm1(log_keep) + math.exp(log_keep + log_rr))


def optimal_composition_delta(epsilon: float, eps0: float, delta0: float, n_mechanisms: int) -> float:
    r"""Exact δ at ε of m adaptively composed (ε₀, δ₀)-DP mechanisms (optimal composition).

    Kairouz, Oh & Viswanath (2015), Thm. 3.3: every (ε₀, δ₀)-DP mechanism is dominated by
    the four-outcome pair P = (δ₀, (1−δ₀)e^{ε₀}/(1+e^{ε₀}), (1−δ₀)/(1+e^{ε₀}), 0),
    Q = its mirror image, and the m-fold adaptive composition by the m-fold product of that
    pair, which is attained; so the smallest δ at ε is the pair's hockey-stick divergence

    .. math::

        \delta(\varepsilon) = 1 - (1-\delta_0)^m + (1-\delta_0)^m \sum_{l=0}^{m}
        \binom{m}{l}\frac{\big[e^{(m-l)\varepsilon_0} - e^{\varepsilon + l\varepsilon_0}\big]_+}
        {(1+e^{\varepsilon_0})^m},

    which at the theorem's ε = (m − 2i)ε₀ is its δ = 1 − (1−δ₀)^m (1 − δ_i) (the sum then
    runs over l < i); between those points it is the same divergence, written out
    [derived; ``tests/test_composition_optimal.py`` checks it against the divergence of the
    product pair enumerated outcome by outcome and against the theorem's δ_i].

    Parameters
    ----------
    epsilon : float
        The composed ε (≥ 0).
    eps0, delta0 : float
        Every mechanism's guarantee, ε₀ > 0 and δ₀ ∈ [0, 1).
    n_mechanisms : int
        m, at most :data:`MAX_OPTIMAL_MECHANISMS`.

    Returns
    -------
    float
        The exact δ; no valid composition bound gives less.
    """
    epsilon = check_nonnegative_float("epsilon", epsilon)
    eps0 = check_epsilon("eps0", eps0)
    delta0 = check_float_in_range("delta0", delta0, 0.0, 1.0, high_inclusive=False)
    m = check_positive_int("n_mechanisms", n_mechanisms, max_value=MAX_OPTIMAL_MECHANISMS,
                           reason="the exact sum has m + 1 terms")
    return _optimal_delta(epsilon, eps0, delta0, m)


def optimal_composition_epsilon(eps0: float, delta0: float, n_mechanisms: int, delta: float) -> float:
    """Smallest ε at which m composed (ε₀, δ₀)-DP mechanisms are (ε, δ)-DP (optimal composition).

    Inverts :func:`optimal_composition_delta` in ε (it decreases in ε, and is 1 − (1 − δ₀)^m
    from ε = m ε₀ on).

    Parameters
    ----------
    eps0, delta0 : float
        Every mechanism's guarantee.
    n_mechanisms : int
        m.
    delta : float
        The composed δ; at least 1 − (1 − δ₀)^m, the part no ε removes.

    Returns
    -------
    float
        ε in [0, m ε₀].
    """
    eps0 = check_epsilon("eps0", eps0)
    delta0 = check_float_in_range("delta0", delta0, 0.0, 1.0, high_inclusive=False)
    m = check_positive_int("n_mechanisms", n_mechanisms, max_value=MAX_OPTIMAL_MECHANISMS,
                           reason="the exact sum has m + 1 terms")
    delta = check_delta("delta", delta)
    floor = -math.expm1(m * math.log1p(-delta0))
    if delta < floor * (1 - 1e-12):  # (rounding: at m = 1 and δ₀ = δ the two are equal)
        raise ValueError(f"delta must be at least 1 − (1 − delta0)^m = {floor:.6g} (the part of δ no ε removes), "
                         f"got delta={delta!r}")
    if _optimal_delta(0.0, eps0, delta0, m) <= delta:
        return 0.0
    # bisection keeping δ(high) ≤ δ: δ(ε) is flat from its root on (a root finder may stop anywhere
    # on the flat part), and the smallest such ε is the guarantee
    low, high = 0.0, m * eps0  # δ(m ε₀) = 1 − (1 − δ₀)^m < δ
    for _ in range(200):
        mid = 0.5 * (low + high)
        if not low < mid < high:
            break
        if _optimal_delta(mid, eps0, delta0, m) <= delta:
            high = mid
        else:
            low = mid
    return float(high)


def _optimal_eps0(epsilon: float, delta: float, m: int, delta0: float) -> float:
    # the largest ε₀ with δ(ε; ε₀, δ₀, m) ≤ δ: δ(ε) increases in ε₀; ε₀ = ε/m gives 1 − (1 − δ₀)^m ≤ δ
    def excess(e0: float) -> float:
        return _optimal_delta(epsilon, e0, delta0, m) - delta

    low = epsilon / m
    if excess(low) >= 0.0:  # ε/m is feasible exactly (basic composition): nothing beyond it to gain
        return low
    high = 2.0 * low
    while excess(high) <= 0.0:
        low, high = high, 2.0 * high
        if high > 700.0:  # (1 + e^{ε₀})^m: beyond it the per-mechanism ε is meaningless
            return low
    e0 = optimize.brentq(excess, low, high, xtol=1e-15, rtol=1e-14)
    while excess(e0) > 0.0 and e0 > epsilon / m:  # step to the root's safe side
        e0 *= 1 - 1e-13
    # ε/m is feasible exactly (basic composition: δ₀ ≤ δ/m), whatever the rounding of the sum at it
    return float(max(e0, epsilon / m))


def _gaussian_noise_scale(eps0: float, delta0: float) -> float:
    # gaussian_noise_scale for one scalar pair, in math (not numpy) arithmetic: split_budget_optimal's
    # choice between its two pairs has always been made with these roundings, and a change of the
    # last bit could flip a tie between them
    return math.sqrt(2.0 * math.log(1.25 / delta0)) / eps0


def gaussian_noise_scale(epsilon0: ArrayLike, delta0: ArrayLike) -> np.ndarray:
    r"""The classical Gaussian mechanism's noise per unit sensitivity, :math:`\sqrt{2\ln(1.25/\delta_0)}/\varepsilon_0`.

    Dwork & Roth (2014), Thm. A.1 (stated there for :math:`\varepsilon_0 < 1`; used here, as
    in :func:`split_budget_optimal`, as the *criterion* that ranks per-mechanism budgets: the
    mechanisms of the book, Gaussian noise and the shuffled randomized response's blanket,
    both grow like :math:`\sqrt{\ln(1/\delta_0)}/\varepsilon_0`).  A smaller value is less
    noise.  Element-wise over arrays (numpy arithmetic).

    Parameters
    ----------
    epsilon0 : float or array
        Per-mechanism ε₀ > 0.
    delta0 : float or array
        Per-mechanism δ₀ in (0, 1), broadcast against ``epsilon0``.

    Returns
    -------
    numpy.ndarray
        The noise scale per unit sensitivity, of the broadcast shape (0-d for scalars).
    """
    eps = check_array("epsilon0", epsilon0)
    dlt = check_array("delta0", delta0)
    if np.any(eps <= 0):
        raise ValueError(f"epsilon0 must be positive, got min {float(eps.min())!r}")
    if np.any((dlt <= 0) | (dlt >= 1)):
        raise ValueError(f"delta0 must lie in (0, 1), got range [{float(dlt.min())!r}, {float(dlt.max())!r}]")
    try:
        np.broadcast_shapes(eps.shape, dlt.shape)
    except ValueError:
        raise ValueError(f"epsilon0 and delta0 must broadcast together, got shapes {eps.shape} and {dlt.shape}") from None
    return np.sqrt(2 * np.log(1.25 / dlt)) / eps


@functools.lru_cache(maxsize=4096)
def _split_budget_optimal(epsilon: float, delta: float, m: int) -> tuple[float, float]:
    pairs = [(_optimal_eps0(epsilon, delta, m, d0), d0) for d0 in (delta / m, delta / (2.0 * m))]
    return min(pairs, key=lambda p: _gaussian_noise_scale(*p))


def split_budget_optimal(epsilon: float, delta: float, n_mechanisms: int) -> tuple[float, float]:
    """Per-mechanism (ε₀, δ₀) of m adaptive uses that compose to (ε, δ) by optimal composition.

    For δ₀ = δ/m (basic composition's) and δ₀ = δ/(2m) (advanced composition's, as
    :func:`split_budget_advanced` takes it), the largest ε₀ with
    :func:`optimal_composition_delta` (ε, ε₀, δ₀, m) ≤ δ.  At its δ₀ each is at least
    basic's ε/m, respectively advanced composition's ε₀, because optimal composition is
    exact (Kairouz, Oh & Viswanath 2015, Thm. 3.3): at equal δ₀ it never loses to either
    rule.  Of the two pairs it returns the one with the smaller Gaussian noise scale
    sqrt(2 ln(1.25/δ₀))/ε₀ (Dwork & Roth 2014, Thm. A.1): a larger ε₀ bought with a smaller
    δ₀ is not less noise (at m = 1 halving δ₀ buys ε₀ only 10⁻⁸ more), and the mechanisms
    here, Gaussian noise and the shuffled randomized response's blanket, both grow like
    sqrt(ln(1/δ₀))/ε₀.  By that scale the pair is never noisier than basic's or advanced
    composition's.

    Parameters
    ----------
    epsilon, delta : float
        The composed target.
    n_mechanisms : int
        m, at most :data:`MAX_OPTIMAL_MECHANISMS`.

    Returns
    -------
    (float, float)
        ε₀ and δ₀; :func:`optimal_composition_delta` (ε, ε₀, δ₀, m) ≤ δ.
    """
    epsilon = check_epsilon("epsilon", epsilon)
    delta = check_delta("delta", delta)
    m = check_positive_int("n_mechanisms", n_mechanisms, max_value=MAX_OPTIMAL_MECHANISMS,
                           reason="the exact sum has m + 1 terms")
    return _split_budget_optimal(epsilon, delta, m)


def split_budget_advanced(epsilon: float, delta: float, k: int) -> tuple[float, float]:
    """Per-mechanism (ε₀, δ₀) so that k adaptive uses compose to (ε, δ)-DP.

    Takes the better of basic composition, (ε/k, δ/k), and advanced composition
    ([DRV10]) with δ' = δ/2 and δ₀ = δ/(2k), where ε₀ solves
    :func:`advanced_composition` (ε₀, δ₀, k, δ/2)[0] = ε.  "Better" means the
    larger ε₀ (less noise for each mechanism).

    Parameters
    ----------
    epsilon, delta : float
        The target (ε, δ) of all uses together.
    k : int
        The number of adaptive uses.

    Returns
    -------
    (float, float)
        (ε₀, δ₀) per use.
    """
    epsilon = check_epsilon("epsilon", epsilon)
    delta = check_delta("delta", delta)
    k = check_positive_int("k", k)
    basic = (epsilon / k, delta / k)
    if k == 1:
        return basic
    delta_prime = delta / 2.0

    def gap(e0: float) -> float:
        return _advanced_composition(e0, delta / (2 * k), k, delta_prime)[0] - epsilon

    # gap increases in ε₀, so advanced composition beats basic (root above ε/k) iff
    # gap(ε/k) < 0.  Otherwise return basic at once: for large ε (where it never wins) the
    # bracket [1e-300, ε] below is too wide for brentq, which failed to converge.
    if not gap(basic[0]) < 0:
        return basic
    eps_adv = optimize.brentq(gap, 1e-300, epsilon, xtol=1e-15, rtol=1e-14)
    if eps_adv > basic[0]:
        return eps_adv, delta / (2.0 * k)
    return basic


def level_budget(epsilon: float, delta: float, k: int) -> tuple[float, float]:
    """Per-mechanism (ε₀, δ₀) when every user joins k shuffle mechanisms.

    In the k-level algorithm every user sends one message to each of the k shufflers
    (one batch per level), and the batches not containing it do not depend on its data,
    so the whole transcript is a k-fold composition for that user.  Uses the better of
    basic and advanced composition (:func:`fedbandit.accounting.composition.split_budget_advanced`),
    the paper's route to its k^{3/2} factor.

    Parameters
    ----------
    epsilon, delta : float
        The target (ε, δ) of all uses together.
    k : int
        The number of shufflers (levels) every user joins.

    Returns
    -------
    (float, float)
        (ε₀, δ₀) per mechanism.
    """
    epsilon = check_epsilon("epsilon", epsilon)
    delta = check_delta("delta", delta)
    k = check_positive_int("k", k)
    return split_budget_advanced(epsilon, delta, k)


def group_budget(epsilon: float, delta: float, group_size: int) -> tuple[float, float]:
    """Per-message (ε_b, δ_b) so that changing ``group_size`` messages costs at most (ε, δ).

    Group privacy: an (ε_b, δ_b)-DP mechanism is (g ε_b, g e^{(g−1) ε_b} δ_b)-DP for
    datasets differing in g entries; so ε_b = ε/g and δ_b = δ e^{−(g−1)ε/g}/g.  Used for
    the g-message encoding of values in [0, 1] (:class:`RRShuffleSummation` with
    ``resolution=g``), where one user's value moves at most g of its g bits.

    Parameters
    ----------
    epsilon, delta : float
        The target (ε, δ) of the group.
    group_size : int
        g, the messages one user's value changes.

    Returns
    -------
    (float, float)
        (ε_b, δ_b) per message.
    """
    epsilon = check_epsilon("epsilon", epsilon)
    delta = check_delta("delta", delta)
    g = check_positive_int("group_size", group_size)
    eps_b = epsilon / g
    return eps_b, delta * math.exp(-(g - 1) * eps_b) / g
