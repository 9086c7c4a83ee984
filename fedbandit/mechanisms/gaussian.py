r"""The central Gaussian mechanism: the continuous baseline of [KLS21]_.

A trusted server adds :math:`\mathcal N(0, \sigma^2 I)` to a query of :math:`\ell_2`
sensitivity :math:`\Delta`.  The noise scale is not computed here: the exact ("analytic")
calibration of Balle & Wang ([BW18]_ Theorem 8) is
:func:`fedbandit.accounting.gaussian.analytic_gaussian_sigma`, and the calibration for a
release composed over several rounds is
:func:`fedbandit.accounting.composed_gaussian.composed_gaussian_sigma`; the protocol
``"sum-central-gaussian"`` (:mod:`fedbandit.protocols.sums`) puts the two together.

References
----------
.. [KLS21] P. Kairouz, Z. Liu and T. Steinke, "The distributed discrete Gaussian
   mechanism for federated learning with secure aggregation", ICML 2021.
.. [BW18] B. Balle and Y.-X. Wang, "Improving the Gaussian mechanism for differential
   privacy: analytical calibration and optimal denoising", ICML 2018 (Theorem 8).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from fedbandit._validation import check_array, check_bool, check_positive_float, check_rng

__all__ = [
    "gaussian_mechanism",
]


def gaussian_mechanism(value: ArrayLike, sigma: float, rng: np.random.Generator, *,
                       return_noise: bool = False) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Return ``value + N(0, sigma^2)`` elementwise (the central Gaussian mechanism).

    With ``return_noise=True`` also the noise that was added (for measuring the error of a
    simulation; a real server would not keep it).

    Parameters
    ----------
    value : array_like
        The exact value.
    sigma : float
        σ > 0.
    rng : numpy.random.Generator
    return_noise : bool, default False
        Also return the noise.

    Returns
    -------
    ndarray or (ndarray, ndarray)
        The noisy value (and the noise).
    """
    sigma = check_positive_float("sigma", sigma)
    rng = check_rng("rng", rng)
    return_noise = check_bool("return_noise", return_noise)
    value = check_array("value", value)
    noise = rng.normal(0.0, sigma, size=value.shape)
    return (value + noise, noise) if return_noise else value + noise
