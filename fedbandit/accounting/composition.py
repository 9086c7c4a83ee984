"""composition."""

from __future__ import annotations

import math

from scipy import optimize

from fedbandit._validation import (
    check_delta,
    check_epsilon,
    check_nonnegative_float,
    check_positive_int,
)

__all__ = [
    "advanced_composition",
    "split_budget_advanced",
    "group_budget",
    "level_budget",
]


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
