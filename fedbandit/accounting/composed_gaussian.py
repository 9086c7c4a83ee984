r"""Calibration of a trusted server's Gaussian noise on a vector sum released over several rounds.

The continuous central baseline of Kairouz, Liu & Steinke [KLS21]_ (their Sec. 6): every
round the server adds :math:`\mathcal N(0, \sigma^2 I)` to the sum of the parties' clipped
vectors (ℓ2 sensitivity Δ = c when one party's vector is added or removed).  Over T rounds
a user's data enters T such releases.

* ``"analytic"`` [derived, exact]: T Gaussian releases of sensitivity Δ and noise σ are,
  by rotation invariance, one Gaussian release of sensitivity :math:`\Delta\sqrt T` (a
  Gaussian mechanism with :math:`\mu = \Delta\sqrt T/\sigma`), so the smallest σ is the
  analytic Gaussian's of Balle & Wang [BW18]_ (Theorem 8,
  :func:`fedbandit.accounting.gaussian.analytic_gaussian_sigma`) at sensitivity
  :math:`\Delta\sqrt T`.  The exact (ε, δ) of such a release is
  :func:`exact_gaussian_epsilon`.
* ``"zcdp"``: the T releases compose to :math:`T\Delta^2/(2\sigma^2)`-zCDP [BS16]_,
  converted with [CKS20]_ (:func:`fedbandit.accounting.zcdp.calibrate_gaussian_sigma`);
  looser than the exact profile.

References
----------
.. [KLS21] P. Kairouz, Z. Liu and T. Steinke, "The distributed discrete Gaussian
   mechanism for federated learning with secure aggregation", ICML 2021.
.. [BW18] B. Balle and Y.-X. Wang, "Improving the Gaussian mechanism for differential
   privacy: analytical calibration and optimal denoising", ICML 2018.
.. [BS16] M. Bun and T. Steinke, "Concentrated differential privacy", TCC 2016.
.. [CKS20] C. Canonne, G. Kamath and T. Steinke, "The discrete Gaussian for differential
   privacy", NeurIPS 2020.
"""

from __future__ import annotations

import functools
import math

from fedbandit._validation import (
    check_choice,
    check_delta,
    check_epsilon,
    check_positive_float,
    check_positive_int,
)
from fedbandit.accounting.amplification import gaussian_epsilon_exact
from fedbandit.accounting.events import DpEvent, gaussian_rho
from fedbandit.accounting.gaussian import analytic_gaussian_sigma
from fedbandit.accounting.zcdp import calibrate_gaussian_sigma

__all__ = ["COMPOSED_GAUSSIAN_CALIBRATIONS", "composed_gaussian_sigma"]

#: Rules of :func:`composed_gaussian_sigma`.
COMPOSED_GAUSSIAN_CALIBRATIONS = ("analytic", "zcdp")


def composed_gaussian_sigma(epsilon: float, delta: float, sensitivity: float, n_releases: int = 1, *,
                            calibration: str = "analytic") -> float:
    r"""Smallest σ of Gaussian noise per release such that ``n_releases`` releases are (ε, δ)-DP.

    Parameters
    ----------
    epsilon, delta : float
        Target of the whole run (all releases together).
    sensitivity : float
        ℓ2 sensitivity Δ of one release (the clipping norm c for one party added or
        removed from a sum of clipped vectors).
    n_releases : int, default 1
        T, the number of releases a user's data enters (the rounds).
    calibration : {"analytic", "zcdp"}
        ``"analytic"``: exact, σ = analytic Gaussian σ at sensitivity Δ√T ([BW18]_ Thm. 8);
        ``"zcdp"``: through zCDP and the [CKS20]_ conversion.

    Returns
    -------
    float
        σ per release.
    """
    epsilon = check_epsilon("epsilon", epsilon)
    delta = check_delta("delta", delta)
    sensitivity = check_positive_float("sensitivity", sensitivity)
    n_releases = check_positive_int("n_releases", n_releases)
    check_choice("calibration", calibration, COMPOSED_GAUSSIAN_CALIBRATIONS)
    # A deterministic root search (milliseconds): cached on the exact validated arguments, as a
    # grid configures the same (ε, δ, Δ, T) once per seed.
    return _composed_gaussian_sigma_cached(epsilon, delta, sensitivity, n_releases, calibration)


def _composed_gaussian_sigma(epsilon: float, delta: float, sensitivity: float, n_releases: int,
                             calibration: str) -> float:
    """:func:`composed_gaussian_sigma` on validated arguments (uncached)."""
    if calibration == "analytic":
        return analytic_gaussian_sigma(epsilon, delta, sensitivity * math.sqrt(n_releases))
    return calibrate_gaussian_sigma(epsilon, delta, sensitivity, n_compositions=n_releases)


_composed_gaussian_sigma_cached = functools.lru_cache(maxsize=1024, typed=True)(_composed_gaussian_sigma)


def exact_gaussian_epsilon(event: DpEvent, delta: float) -> float:
    """Exact ε at δ of a composition of Gaussian releases (the Gaussian privacy profile [BW18]).

    k Gaussian releases of sensitivities Δ_i and noise σ_i together are a Gaussian
    mechanism with μ = sqrt(Σ Δ_i²/σ_i²) (rotation invariance), whose exact (ε, δ) curve
    is :func:`fedbandit.accounting.amplification.gaussian_epsilon_exact`; this is a *lower bound* on
    the ε of any protocol from whose output the releases can be computed.
    """
    rho = gaussian_rho(event)
    if rho is None:
        raise TypeError(f"exact_gaussian_epsilon needs Gaussian releases only, got {event.describe()}")
    return gaussian_epsilon_exact(math.sqrt(2.0 * rho), delta)
