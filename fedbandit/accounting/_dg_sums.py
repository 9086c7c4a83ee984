"""The sum of discrete Gaussians' closeness to one ([KLS21]_ Thm. 11): τ, shared by the DDG accountings.

:func:`ddg_tau` is re-exported by :mod:`fedbandit.accounting.ddg` (Theorem 1 and Proposition 14) and used by
:mod:`fedbandit.accounting.sampled_ddg` (the Poisson-sampled sum); it lives here so that neither imports the other.

References
----------
.. [KLS21] P. Kairouz, Z. Liu and T. Steinke, "The distributed discrete Gaussian
   mechanism for federated learning with secure aggregation", ICML 2021.
"""

from __future__ import annotations

import math

import numpy as np

from fedbandit._validation import MAX_STEPS, check_positive_float, check_positive_int

__all__ = ["ddg_tau"]

_TAU_CHUNK = 1 << 22


def ddg_tau(sigma_over_gamma: float, n: int) -> float:
    r"""The inflation :math:`\tau = 10\sum_{k=1}^{n-1} e^{-2\pi^2 (\sigma/\gamma)^2 k/(k+1)}` ([KLS21]_ Thm. 1).

    Parameters
    ----------
    sigma_over_gamma : float
        σ/γ, the noise scale on the integer grid.
    n : int
        The number of clients.

    Returns
    -------
    float
        τ.
    """
    s = check_positive_float("sigma_over_gamma", sigma_over_gamma)
    n = check_positive_int("n", n, max_value=MAX_STEPS, reason="τ sums n − 1 terms, in time proportional to n")
    if n == 1:
        return 0.0
    if n <= _TAU_CHUNK:
        k = np.arange(1, n, dtype=np.float64)
        return float(10.0 * np.sum(np.exp(-2.0 * math.pi**2 * s * s * k / (k + 1.0))))
    total = 0.0  # the same sum in chunks, so that memory does not grow with n
    for start in range(1, n, _TAU_CHUNK):
        k = np.arange(start, min(start + _TAU_CHUNK, n), dtype=np.float64)
        total += float(np.sum(np.exp(-2.0 * math.pi**2 * s * s * k / (k + 1.0))))
    return 10.0 * total
