"""Privacy accounting: zCDP, Rényi DP and (ε, δ)-DP conversions.

Mechanisms state what they guarantee (for example ρ-zCDP per release at a given
sensitivity); the functions here compose and convert.  Every conversion is
cross-checked against Google's ``dp-accounting`` in ``tests/test_accounting.py``.

References
----------
.. [BS16] M. Bun and T. Steinke, "Concentrated differential privacy: simplifications,
   extensions, and lower bounds", TCC 2016.  Prop. 1.3 (Gaussian), Lemma 2.3
   (composition), Prop. 1.3 (simple conversion ρ + 2 sqrt(ρ log(1/δ))).
.. [CKS20] C. Canonne, G. Kamath and T. Steinke, "The discrete Gaussian for
   differential privacy", NeurIPS 2020.  Prop. 12 / Cor. 13: the optimal
   conversion from Rényi DP (and so zCDP) to (ε, δ)-DP.
.. [Mir17] I. Mironov, "Rényi differential privacy", CSF 2017.  Prop. 3.
.. [DRV10] C. Dwork, G. Rothblum and S. Vadhan, "Boosting and differential
   privacy", FOCS 2010.  Thm. III.3 (advanced composition).
"""

from __future__ import annotations

import functools
import math
import sys
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy import optimize

from fedbandit._combinatorics import tree_depth
from fedbandit._validation import (
    check_array,
    check_choice,
    check_delta,
    check_epsilon,
    check_nonnegative_float,
    check_positive_float,
    check_positive_int,
)

__all__ = [
    "gaussian_zcdp",
    "compose_zcdp",
    "gaussian_sigma_for_zcdp",
    "zcdp_to_approx_dp",
    "approx_dp_to_zcdp",
    "rdp_to_approx_dp",
    "calibrate_gaussian_sigma",
    "tree_zcdp",
]


def over_sigma_squared(num: Any, c: float, sigma: float, square: float) -> Any:
    """``num / (c σ²)`` given ``square`` = σ² (as the caller computes it), without dividing by a σ² that underflowed.

    For σ below ~1.5e-154, σ² is subnormal or 0.0 and ``num / (c * σ²)`` loses every digit
    or raises ZeroDivisionError; then ``num / c / σ / σ`` is used, which is +inf (the limit
    σ → 0 of a privacy loss) unless ``num`` = 0.  Above, the caller's expression is kept
    bit for bit.  ``num`` may be an array.
    """
    if square >= sys.float_info.min:
        return num / (c * square)
    return num / c / sigma / sigma


def gaussian_zcdp(sensitivity: float, sigma: float) -> float:
    """ρ of the Gaussian mechanism: ρ = Δ² / (2σ²) ([BS16], Prop. 1.6).

    Parameters
    ----------
    sensitivity : float
        ℓ2 sensitivity Δ > 0 of the released quantity.
    sigma : float
        Standard deviation σ > 0 of the added Gaussian noise (per coordinate).

    Returns
    -------
    float
        ρ (inf when σ² underflows).
    """
    sensitivity = check_positive_float("sensitivity", sensitivity)
    sigma = check_positive_float("sigma", sigma)
    return over_sigma_squared(sensitivity**2, 2.0, sigma, sigma**2)


def compose_zcdp(*rhos: float) -> float:
    """Adaptive composition of zCDP mechanisms: ρ = Σ ρ_i ([BS16], Lemma 2.3).

    Parameters
    ----------
    *rhos : float
        The mechanisms' ρ_i ≥ 0 (at least one).

    Returns
    -------
    float
        Σ ρ_i.
    """
    if not rhos:
        raise ValueError("compose_zcdp needs at least one rho, got none")
    return float(sum(check_nonnegative_float(f"rhos[{i}]", r) for i, r in enumerate(rhos)))


def gaussian_sigma_for_zcdp(rho: float, sensitivity: float = 1.0) -> float:
    """σ such that the Gaussian mechanism at sensitivity Δ is ρ-zCDP: σ = Δ / sqrt(2ρ).

    Parameters
    ----------
    rho : float
        ρ > 0.
    sensitivity : float, default 1.0
        Δ.

    Returns
    -------
    float
        σ.
    """
    rho = check_positive_float("rho", rho)
    sensitivity = check_positive_float("sensitivity", sensitivity)
    return sensitivity / math.sqrt(2.0 * rho)


def cks_conversion_terms(alpha: np.ndarray, delta: float) -> tuple[np.ndarray, np.ndarray]:
    """The two terms of the [CKS20] Prop. 12 conversion that do not depend on the RDP curve.

    ε(α) = D_α + log(1 − 1/α) − (log δ + log α)/(α − 1); returns (log(1 − 1/α),
    (log δ + log α)/(α − 1)) on checked orders α > 1 and δ, for callers that convert many
    curves on the same orders (:func:`fedbandit.accounting.ddg.ddg_sigma_for_epsilon`'s root
    finding): ``rdp + first − second`` is then :func:`rdp_to_approx_dp`'s arithmetic, bit for bit.
    """
    return np.log1p(-1.0 / alpha), (math.log(delta) + np.log(alpha)) / (alpha - 1.0)


def _rdp_eps_improved(alpha: np.ndarray, rdp: np.ndarray, delta: float) -> np.ndarray:
    """[CKS20] Prop. 12: ε(α) = D_α + log((α−1)/α) − (log δ + log α)/(α − 1)."""
    log_ratio, delta_term = cks_conversion_terms(alpha, delta)
    return rdp + log_ratio - delta_term


#: Above this ρ the [CKS20] conversion is minimised in w = α − 1 (the optimum's w < 1e-5,
#: and below 1e-16 the form in α loses it entirely); below, in α as dp-accounting does.
_RHO_SMALL_W = 1e12


def zcdp_to_approx_dp(rho: float, delta: float, method: str = "cks") -> float:
    """Convert ρ-zCDP to (ε, δ)-DP.

    Parameters
    ----------
    rho : float
        zCDP parameter ρ ≥ 0.
    delta : float
        Target δ in (0, 1).
    method : {"cks", "simple"}
        ``"cks"``: the optimal conversion of [CKS20] (Cor. 13),
        ε = inf_{α>1} ρα + log(1/(αδ))/(α − 1) + log(1 − 1/α), minimised
        numerically over α.  ``"simple"``: ε = ρ + 2 sqrt(ρ log(1/δ)) ([BS16],
        Prop. 1.3), always larger.

    Returns
    -------
    float
        ε (0 when ρ = 0).
    """
    rho = check_nonnegative_float("rho", rho)
    delta = check_delta("delta", delta)
    check_choice("method", method, ("cks", "simple"))
    if rho == 0.0:
        return 0.0
    if method == "simple":
        return rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))

    def eps_of_log_alpha_minus_one(u: float) -> float:
        alpha = 1.0 + math.exp(u)
        return float(_rdp_eps_improved(np.array(alpha), np.array(rho * alpha), delta))

    def eps_of_log_w(u: float) -> float:
        # the same ε(α) in w = α − 1 = e^u: log(1 − 1/α) = u − log1p(w), log α = log1p(w).  At a
        # huge ρ the optimum has w below float64's resolution at 1 (α = 1 + w rounds to 1, and
        # the form in α gives NaN), so the form in w is used there
        w = math.exp(u)
        return rho * (1.0 + w) + u - math.log1p(w) - (math.log(delta) + math.log1p(w)) / w

    # The simple-bound optimum α* = 1 + sqrt(log(1/δ)/ρ) brackets the true optimum
    # within a factor of a few; search log(α − 1) on a wide bracket around it.
    u0 = math.log(math.sqrt(math.log(1.0 / delta) / rho))
    res = optimize.minimize_scalar(
        eps_of_log_alpha_minus_one if rho <= _RHO_SMALL_W else eps_of_log_w,
        bounds=(u0 - 12.0, u0 + 12.0),
        method="bounded",
        options={"xatol": 1e-12, "maxiter": 500},
    )
    eps = float(res.fun)
    if not math.isfinite(eps):  # never hide a NaN as ε = 0 (max(0.0, nan) is 0.0)
        raise ArithmeticError(f"the zCDP conversion gave epsilon={eps!r} at rho={rho!r}, delta={delta!r}")
    return max(0.0, eps)


def approx_dp_to_zcdp(epsilon: float, delta: float) -> float:
    """The largest ρ whose optimal zCDP → (ε, δ) conversion yields at most ``epsilon``.

    Inverse of :func:`zcdp_to_approx_dp` (``method="cks"``), found by root finding
    (ε is increasing in ρ).

    Parameters
    ----------
    epsilon, delta : float
        The target (ε, δ).

    Returns
    -------
    float
        ρ.
    """
    return _approx_dp_to_zcdp_cached(check_epsilon("epsilon", epsilon), check_delta("delta", delta))


def _approx_dp_to_zcdp(epsilon: float, delta: float) -> float:
    """:func:`approx_dp_to_zcdp` on validated arguments (uncached)."""

    def gap(log_rho: float) -> float:
        return zcdp_to_approx_dp(math.exp(log_rho), delta) - epsilon

    lo, hi = -60.0, 10.0
    while gap(hi) < 0:
        hi += 10.0
        if hi > 230.0:  # ρ = e^230 ~ 1e100 still gives less: ε is beyond the float range of the conversion
            raise ValueError(f"epsilon={epsilon!r} is too large to convert to zCDP (rho would exceed 1e100)")
    while gap(lo) > 0:
        lo -= 10.0
        if lo < -690.0:
            raise ValueError(f"epsilon={epsilon!r} is too small to convert to zCDP (rho would be below 1e-300)")
    return math.exp(optimize.brentq(gap, lo, hi, xtol=1e-14, rtol=1e-13, maxiter=500))


#: :func:`approx_dp_to_zcdp` is a pure function of (ε, δ), and every learner built with a zCDP-calibrated
#: tree asks for it again (an end-to-end audit builds its learner a dozen times, ~4 ms each): each (typed)
#: pair is solved once per process.
_approx_dp_to_zcdp_cached = functools.lru_cache(maxsize=1024, typed=True)(_approx_dp_to_zcdp)


def rdp_to_approx_dp(
    orders: ArrayLike, rdp: ArrayLike, delta: float, method: str = "cks"
) -> float:
    """Convert a Rényi-DP curve, known at finitely many orders, to (ε, δ)-DP.

    Parameters
    ----------
    orders : sequence of float
        Orders α > 1.
    rdp : sequence of float
        RDP values ε(α) ≥ 0 at those orders.
    delta : float
        Target δ in (0, 1).
    method : {"cks", "classic"}
        ``"cks"``: [CKS20] Prop. 12 (as in dp-accounting);
        ``"classic"``: ε = min_α ε(α) + log(1/δ)/(α − 1) ([Mir17], Prop. 3).

    Returns
    -------
    float
        The smallest ε over the given orders.
    """
    alpha = check_array("orders", orders, ndim=1)
    values = check_array("rdp", rdp, ndim=1)
    delta = check_delta("delta", delta)
    check_choice("method", method, ("cks", "classic"))
    if alpha.size == 0:
        raise ValueError("orders must not be empty")
    if values.shape != alpha.shape:
        raise ValueError(f"rdp must have the same shape as orders {alpha.shape}, got {values.shape}")
    if np.any(alpha <= 1.0):
        raise ValueError(f"orders must all be > 1, got min {alpha.min()!r}")
    if np.any(values < 0):
        raise ValueError(f"rdp must be non-negative, got min {values.min()!r}")
    if method == "classic":
        eps = values + math.log(1.0 / delta) / (alpha - 1.0)
    else:
        eps = _rdp_eps_improved(alpha, values, delta)
    return max(0.0, float(np.min(eps)))


def calibrate_gaussian_sigma(
    epsilon: float, delta: float, sensitivity: float = 1.0, n_compositions: int = 1
) -> float:
    """Smallest Gaussian σ giving (ε, δ)-DP after ``n_compositions`` releases, via zCDP.

    Each release at ℓ2 sensitivity Δ with noise N(0, σ²) is Δ²/(2σ²)-zCDP; k of them
    compose to kΔ²/(2σ²)-zCDP, converted with [CKS20].  So
    σ = Δ sqrt(k / (2ρ)) with ρ = :func:`approx_dp_to_zcdp` (ε, δ).

    Parameters
    ----------
    epsilon, delta : float
        The target (ε, δ) of all releases.
    sensitivity : float, default 1.0
        Δ.
    n_compositions : int, default 1
        k, the releases.

    Returns
    -------
    float
        σ.
    """
    epsilon = check_epsilon("epsilon", epsilon)
    delta = check_delta("delta", delta)
    sensitivity = check_positive_float("sensitivity", sensitivity)
    n_compositions = check_positive_int("n_compositions", n_compositions)
    rho = approx_dp_to_zcdp(epsilon, delta)
    return sensitivity * math.sqrt(n_compositions / (2.0 * rho))


def tree_zcdp(n_steps: int, sensitivity: float, sigma0: float) -> float:
    """ρ of the Gaussian tree over K = ``n_steps`` steps: ρ = κ Δ² / (2σ₀²).

    One element of the stream changes at most κ = :func:`tree_depth` (K) p-sums, each
    by at most Δ in ℓ2, and each p-sum is a Gaussian mechanism; zCDP composes
    additively (Bun & Steinke 2016, Lemma 2.3).

    Parameters
    ----------
    n_steps : int
        K.
    sensitivity : float
        Δ of one element.
    sigma0 : float
        σ₀ of each node.

    Returns
    -------
    float
        ρ.
    """
    kappa = tree_depth(n_steps)
    sensitivity = check_positive_float("sensitivity", sensitivity)
    sigma0 = check_positive_float("sigma0", sigma0)
    return over_sigma_squared(kappa * sensitivity**2, 2.0, sigma0, sigma0**2)
