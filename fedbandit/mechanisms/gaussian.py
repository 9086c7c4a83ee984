r"""The analytic Gaussian mechanism of Balle & Wang (2018): the central baseline of [KLS21].

Adding :math:`\mathcal N(0, \sigma^2 I)` to a query of :math:`\ell_2` sensitivity
:math:`\Delta` is :math:`(\varepsilon, \delta)`-DP if and only if ([BW18]_ Theorem 8)

.. math::
   \Phi\Big(\frac{\Delta}{2\sigma} - \frac{\varepsilon\sigma}{\Delta}\Big)
   - e^{\varepsilon}\,\Phi\Big(-\frac{\Delta}{2\sigma} - \frac{\varepsilon\sigma}{\Delta}\Big)
   \le \delta .

The left side decreases in :math:`\sigma`, so the smallest admissible :math:`\sigma` (the
"analytic" calibration) is found by one-dimensional root finding; this is the exact
privacy curve of the Gaussian mechanism, tighter than any zCDP/RDP conversion.  The
authors of [KLS21] use it (Algorithm 1 of [BW18]_) as the continuous central baseline of
their experiments.

References
----------
.. [BW18] B. Balle and Y.-X. Wang, "Improving the Gaussian mechanism for differential
   privacy: analytical calibration and optimal denoising", ICML 2018 (Theorem 8).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import optimize, special

from fedbandit._validation import check_delta, check_epsilon, check_positive_float, check_rng

__all__ = ["analytic_gaussian_delta", "analytic_gaussian_sigma", "analytic_gaussian_epsilon", "gaussian_mechanism"]


def analytic_gaussian_delta(epsilon: float, sigma: float, sensitivity: float = 1.0) -> float:
    r"""The exact :math:`\delta(\varepsilon)` of the Gaussian mechanism ([BW18]_ Theorem 8)."""
    epsilon = check_positive_float("epsilon", epsilon) if epsilon != 0 else 0.0
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
    """
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    sensitivity = check_positive_float("sensitivity", sensitivity)

    def gap(log_sigma: float) -> float:
        return analytic_gaussian_delta(epsilon, math.exp(log_sigma), sensitivity) - delta

    lo = math.log(sensitivity) - 10.0
    hi = math.log(sensitivity) + 10.0
    while gap(lo) < 0:
        lo -= 10.0
    while gap(hi) > 0:
        hi += 10.0
    return math.exp(optimize.brentq(gap, lo, hi, xtol=1e-13, rtol=1e-13, maxiter=500))


def analytic_gaussian_epsilon(sigma: float, delta: float, sensitivity: float = 1.0) -> float:
    r"""Smallest :math:`\varepsilon` for which noise :math:`\sigma` gives :math:`(\varepsilon,\delta)`-DP ([BW18]_)."""
    sigma = check_positive_float("sigma", sigma)
    delta = check_delta(delta)
    sensitivity = check_positive_float("sensitivity", sensitivity)
    if analytic_gaussian_delta(0.0, sigma, sensitivity) <= delta:
        return 0.0

    def gap(log_eps: float) -> float:
        return analytic_gaussian_delta(math.exp(log_eps), sigma, sensitivity) - delta

    lo, hi = -30.0, 1.0
    while gap(hi) > 0:
        hi += 1.0
    return math.exp(optimize.brentq(gap, lo, hi, xtol=1e-13, rtol=1e-13, maxiter=500))


def gaussian_mechanism(value, sigma: float, rng) -> np.ndarray:
    """Return ``value + N(0, sigma^2)`` elementwise (the central Gaussian mechanism)."""
    sigma = check_positive_float("sigma", sigma)
    rng = check_rng(rng)
    value = np.asarray(value, dtype=np.float64)
    return value + rng.normal(0.0, sigma, size=value.shape)
