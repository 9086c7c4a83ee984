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


import numpy as np

from fedbandit._validation import check_positive_float, check_rng

__all__ = [
    "gaussian_mechanism",
]


def gaussian_mechanism(value, sigma: float, rng) -> np.ndarray:
    """Return ``value + N(0, sigma^2)`` elementwise (the central Gaussian mechanism)."""
    sigma = check_positive_float("sigma", sigma)
    rng = check_rng(rng)
    value = np.asarray(value, dtype=np.float64)
    return value + rng.normal(0.0, sigma, size=value.shape)
