"""accounting.gaussian."""

from __future__ import annotations

import math

from scipy import special

from fedbandit._validation import (
    check_delta,
    check_epsilon,
    check_nonnegative_float,
    check_positive_float,
)
from fedbandit.accounting._roots import decreasing_root

__all__ = [
    "analytic_gaussian_delta",
    "analytic_gaussian_sigma",
    "analytic_gaussian_epsilon",
]


def analytic_gaussian_delta(epsilon: float, sigma: float, sensitivity: float = 1.0) -> float:
    r"""The exact :math:`\delta(\varepsilon)` of the Gaussian mechanism ([BW18]_ Theorem 8).

    Parameters
    ----------
    epsilon : float
        ε ≥ 0.
    sigma : float
        σ > 0.
    sensitivity : float, default 1.0
        Δ, the ℓ2 sensitivity.

    Returns
    -------
    float
        δ(ε).
    """
    epsilon = check_nonnegative_float("epsilon", epsilon)
    sigma = check_positive_float("sigma", sigma)
    sensitivity = check_positive_float("sensitivity", sensitivity)
    a = sensitivity / (2.0 * sigma)
    b = epsilon * sigma / sensitivity
    # Phi(a - b) - e^eps Phi(-a - b), the second term in log space to avoid overflow.
    first = special.ndtr(a - b)
    second = math.exp(epsilon + special.log_ndtr(-a - b))
    return max(0.0, float(first - second))


def analytic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    r"""Smallest :math:`\sigma` with which the Gaussian mechanism is :math:`(\varepsilon,\delta)`-DP ([BW18]_).

    Parameters
    ----------
    epsilon : float
        Target :math:`\varepsilon > 0`.
    delta : float
        Target :math:`\delta \in (0, 1)`.
    sensitivity : float
        :math:`\ell_2` sensitivity :math:`\Delta > 0`.

    Returns
    -------
    float
        σ.
    """
    epsilon = check_epsilon("epsilon", epsilon)
    delta = check_delta("delta", delta)
    sensitivity = check_positive_float("sensitivity", sensitivity)

    def gap(log_sigma: float) -> float:
        return analytic_gaussian_delta(epsilon, math.exp(log_sigma), sensitivity) - delta

    log_s = math.log(sensitivity)
    return math.exp(decreasing_root(gap, log_s - 10.0, log_s + 10.0, step=10.0, xtol=1e-13, rtol=1e-13, maxiter=500))


def analytic_gaussian_epsilon(sigma: float, delta: float, sensitivity: float = 1.0) -> float:
    r"""Smallest :math:`\varepsilon` for which noise :math:`\sigma` gives :math:`(\varepsilon,\delta)`-DP ([BW18]_).

    Parameters
    ----------
    sigma : float
        σ > 0.
    delta : float
        δ.
    sensitivity : float, default 1.0
        Δ, the ℓ2 sensitivity.

    Returns
    -------
    float
        ε (0 if σ alone gives δ at ε = 0).
    """
    sigma = check_positive_float("sigma", sigma)
    delta = check_delta("delta", delta)
    sensitivity = check_positive_float("sensitivity", sensitivity)
    if analytic_gaussian_delta(0.0, sigma, sensitivity) <= delta:
        return 0.0

    def gap(log_eps: float) -> float:
        return analytic_gaussian_delta(math.exp(log_eps), sigma, sensitivity) - delta

    return math.exp(decreasing_root(gap, -30.0, 1.0, step=1.0, xtol=1e-13, rtol=1e-13, maxiter=500))
