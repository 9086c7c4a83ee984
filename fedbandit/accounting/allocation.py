"""Per-mechanism budgets of the k-shuffler algorithms: basic or advanced composition.

Every user of the concurrent-shuffle algorithms of Tenenbaum, Kaplan, Mansour & Stemmer
(2023) takes part in m shuffle mechanisms (one batch per level, and per coordinate of a
vector record: m = k·D), and the batches that do not contain it do not depend on its
data; so its privacy over the whole run is an m-fold adaptive composition.  The
per-mechanism budget (ε₀, δ₀) that keeps the composition within (ε, δ):

* ``"basic"`` -- (ε/m, δ/m) (basic composition, Dwork et al. 2006);
* ``"advanced"`` -- δ₀ = δ/(2m), δ' = δ/2 and ε₀ solving
  sqrt(2m ln(1/δ')) ε₀ + m ε₀ (e^{ε₀} − 1) = ε (advanced composition, Dwork, Rothblum &
  Vadhan 2010, Thm. III.3): the paper's route to its k^{3/2} factor, since ε₀ then
  shrinks like ε/sqrt(m ln(1/δ)) rather than ε/m [paper, footnote on advanced
  composition];
* ``"best"`` -- the one with the larger ε₀ (less noise in every mechanism), which is
  :func:`fedbandit.accounting.composition.level_budget`.

Advanced composition gives the larger ε₀ only when sqrt(2m ln(2/δ)) < m, i.e. beyond
about m ≈ 2 ln(2/δ) mechanisms per user (≈ 40 at δ = 10⁻⁸): :func:`advanced_wins_from`.
"""

from __future__ import annotations

import math

from scipy import optimize

from fedbandit._validation import (
    MAX_COUNT,
    MIN_EPSILON,
    check_choice,
    check_delta,
    check_epsilon,
    check_float_in_range,
    check_positive_int,
)
from fedbandit.accounting.composition import advanced_composition, split_budget_advanced

__all__ = [
    "COMPOSITIONS",
    "mechanism_budget",
    "composed_guarantee",
    "advanced_wins_from",
]

#: The composition rules :func:`mechanism_budget` accepts.
COMPOSITIONS = ("best", "basic", "advanced")


def _advanced_eps0(epsilon: float, delta: float, m: int) -> float:
    def gap(e0: float) -> float:
        return advanced_composition(e0, delta / (2 * m), m, delta / 2.0)[0] - epsilon

    # the lower end must itself be a valid epsilon (>= MIN_EPSILON) at which the composition undershoots
    low = max(MIN_EPSILON, epsilon * 1e-15)
    if gap(low) > 0:
        raise ValueError(f"epsilon={epsilon!r} is too small to split over n_mechanisms={m} by advanced composition "
                         f"(even epsilon0={low:g} composes above it)")
    return optimize.brentq(gap, low, epsilon, xtol=1e-300, rtol=1e-14)


def mechanism_budget(epsilon: float, delta: float, n_mechanisms: int, *, composition: str = "best") -> tuple[float, float]:
    """(ε₀, δ₀) of each of the ``n_mechanisms`` mechanisms a user joins, for an overall (ε, δ).

    Parameters
    ----------
    epsilon, delta : float
        The target over the whole run, per user.
    n_mechanisms : int
        m, the shuffle mechanisms every user takes part in.
    composition : {"best", "basic", "advanced"}
        See the module docstring.  With m = 1 every rule gives (ε, δ) except
        ``"advanced"``, which still keeps δ/2 for δ' (the theorem with one mechanism).

    Returns
    -------
    (float, float)
        ε₀ and δ₀; :func:`composed_guarantee` (ε₀, δ₀, m, δ, composition) is within (ε, δ).
    """
    epsilon = check_epsilon("epsilon", epsilon)
    delta = check_delta("delta", delta)
    m = check_positive_int("n_mechanisms", n_mechanisms)
    composition = check_choice("composition", composition, COMPOSITIONS)
    if composition == "best":
        return split_budget_advanced(epsilon, delta, m)
    if composition == "basic":
        return epsilon / m, delta / m
    return _advanced_eps0(epsilon, delta, m), delta / (2.0 * m)


def composed_guarantee(eps0: float, delta0: float, n_mechanisms: int, delta: float, *,
                       composition: str = "best") -> tuple[float, float]:
    """(ε, δ) of m mechanisms at (ε₀, δ₀) each: basic (mε₀, mδ₀), advanced with δ' = δ/2, or the better.

    ``delta`` is the overall target, which fixes δ' = δ/2 of advanced composition.

    Parameters
    ----------
    eps0, delta0 : float
        Each mechanism's (ε₀, δ₀).
    n_mechanisms : int
        m.
    delta : float
        The overall target δ (fixes δ' = δ/2).
    composition : {"basic", "advanced", "best"}, default "best"
        The composition rule.

    Returns
    -------
    (float, float)
        (ε, δ) of the m mechanisms.
    """
    eps0 = check_epsilon("eps0", eps0)
    delta0 = check_float_in_range("delta0", delta0, 0.0, 1.0, high_inclusive=False)
    m = check_positive_int("n_mechanisms", n_mechanisms, max_value=MAX_COUNT)
    delta = check_delta("delta", delta)
    composition = check_choice("composition", composition, COMPOSITIONS)
    basic = (m * eps0, m * delta0)
    if composition == "basic":
        return basic
    # e^{ε₀} − 1 overflows for huge ε₀: advanced composition then only loses
    advanced = advanced_composition(eps0, delta0, m, delta / 2.0) if eps0 < 10 else (math.inf, math.inf)
    if composition == "advanced":
        return advanced
    return min(basic, advanced)


def advanced_wins_from(epsilon: float, delta: float, *, max_mechanisms: int = 100_000) -> int:
    """The smallest m at which advanced composition gives a larger ε₀ than basic composition.

    Raises ValueError if that does not happen up to ``max_mechanisms``.

    Parameters
    ----------
    epsilon, delta : float
        The target (ε, δ) of all uses together.
    max_mechanisms : int, default 100000
        The largest m searched.

    Returns
    -------
    int
        The smallest such m.
    """
    epsilon = check_epsilon("epsilon", epsilon)
    delta = check_delta("delta", delta)
    max_mechanisms = check_positive_int("max_mechanisms", max_mechanisms)
    lo, hi = 1, 2
    while mechanism_budget(epsilon, delta, hi, composition="advanced")[0] <= epsilon / hi:
        lo, hi = hi, 2 * hi
        if hi > max_mechanisms:
            raise ValueError(f"advanced composition does not beat basic composition up to m={max_mechanisms}")
    # ε₀_adv·m / ε grows in m; bisect for the first m where it exceeds 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if mechanism_budget(epsilon, delta, mid, composition="advanced")[0] > epsilon / mid:
            hi = mid
        else:
            lo = mid
    return hi
