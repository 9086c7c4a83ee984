"""Statistics the chapters use to read their experiments, one implementation each.

* :func:`mean_and_se` -- mean and standard error over runs;
* :func:`regret_interval` -- Student-t confidence interval for a mean over few runs;
* :func:`fit_power_law` -- least-squares exponent of a power law with its standard error;
* :func:`fit_exponent` -- the exponent of a cost in a size parameter (M, T, n) fitted on
  the mean over runs, with a percentile-bootstrap confidence interval over the runs (the
  one interval method the book uses for fitted exponents).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fedbandit._validation import (
    check_int_in_range,
    check_array,
    check_probability,
)

__all__ = [
    "mean_and_se",
    "fit_power_law",
    "regret_interval",
    "ExponentFit",
    "fit_exponent",
]


def mean_and_se(values, axis: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standard error of the mean along ``axis`` (ddof = 1; 0 for one sample)."""
    values = check_array("values", values, finite=False)
    if values.ndim == 0:
        raise ValueError("values must have at least one axis (the samples)")
    axis = check_int_in_range("axis", axis, -values.ndim, values.ndim - 1)
    n = values.shape[axis]
    mean = values.mean(axis=axis)
    if n < 2:
        return mean, np.zeros_like(mean)
    return mean, values.std(axis=axis, ddof=1) / np.sqrt(n)


def fit_power_law(n, values) -> tuple[float, float, float]:
    """Least-squares fit of log(values) = slope · log(n) + intercept.

    Returns
    -------
    slope, intercept, slope_se : float
        The fitted exponent, the intercept and the slope's standard error (0 with two points).
    """
    x = np.log(check_array("n", n, ndim=1))
    y_raw = check_array("values", values, ndim=1)
    if x.size != y_raw.size or x.size < 2:
        raise ValueError(f"n and values must have the same length >= 2, got {x.size} and {y_raw.size}")
    if np.any(y_raw <= 0):
        raise ValueError("values must be positive to fit a power law")
    y = np.log(y_raw)
    design = np.column_stack([x, np.ones_like(x)])
    coef, *_ = np.linalg.lstsq(design, y, rcond=None)
    slope, intercept = float(coef[0]), float(coef[1])
    if x.size > 2:
        resid = y - design @ coef
        s2 = float(resid @ resid) / (x.size - 2)
        se = math.sqrt(s2 / float(np.sum((x - x.mean()) ** 2)))
    else:
        se = 0.0
    return slope, intercept, se


def regret_interval(values, confidence: float = 0.95) -> tuple[float, float, float]:
    """(mean, low, high): Student-t interval for the mean of the runs' regrets."""
    from scipy import stats

    confidence = check_probability("confidence", confidence)
    v = check_array("values", values, finite=False).ravel()
    if v.size == 0:
        raise ValueError("values must not be empty")
    m = float(v.mean())
    if v.size < 2:
        return m, math.nan, math.nan
    half = float(stats.t.ppf(0.5 + confidence / 2, v.size - 1) * v.std(ddof=1) / math.sqrt(v.size))
    return m, m - half, m + half


@dataclass(frozen=True)
class ExponentFit:
    """A fitted exponent: the slope, its bootstrap standard error and confidence interval."""

    slope: float
    se: float
    low: float
    high: float
    confidence: float
    n_boot: int

    def __iter__(self):  # slope, (low, high): the common unpacking
        return iter((self.slope, (self.low, self.high)))


def fit_exponent(x, values, *, n_boot: int = 1000, confidence: float = 0.95, seed: int = 0) -> ExponentFit:
    """Exponent p of ``values ≈ c·x^p``: slope of log(mean over runs) on log x, with a bootstrap over runs.

    Parameters
    ----------
    x : array (n_x,)
        The size parameter (M, T, n), positive.
    values : array (n_x, runs)
        The measured cost at each x, one column per run (runs paired across x, as with
        common random numbers).
    n_boot : int
        Bootstrap resamples of the runs (the same resample at every x).  A resample whose
        mean cost is not positive at every x has no log and is skipped.
    confidence : float
        Of the percentile interval.
    seed : int
        Of the bootstrap's generator (the fit is deterministic).

    Returns
    -------
    ExponentFit
        ``slope`` (NaN if a mean is not positive), ``se`` (standard deviation of the
        bootstrap slopes), ``low``/``high`` (percentile interval).
    """
    from fedbandit._validation import check_nonnegative_int, check_positive_int

    x = check_array("x", x, ndim=1)
    values = check_array("values", values, ndim=2)
    n_boot = check_positive_int("n_boot", n_boot, max_value=10**6, reason="each resample is a fit in a Python loop")
    seed = check_nonnegative_int("seed", seed)
    confidence = check_probability("confidence", confidence)
    if values.shape[0] != x.size or np.any(x <= 0):
        raise ValueError(f"values must have shape (len(x), runs) with x > 0, got {values.shape} for {x.size} x values")
    lx = np.log(x)
    mean = values.mean(axis=1)
    if np.any(mean <= 0):
        return ExponentFit(math.nan, math.nan, math.nan, math.nan, confidence, n_boot)
    slope = float(np.polyfit(lx, np.log(mean), 1)[0])
    rng = np.random.default_rng(seed)
    n = values.shape[1]
    boots = []
    for _ in range(n_boot):
        m = values[:, rng.integers(0, n, n)].mean(axis=1)
        if np.all(m > 0):
            boots.append(np.polyfit(lx, np.log(m), 1)[0])
    if not boots:
        return ExponentFit(slope, math.nan, math.nan, math.nan, confidence, n_boot)
    tail = 50.0 * (1.0 - confidence)
    low, high = np.percentile(boots, [tail, 100.0 - tail])
    return ExponentFit(slope, float(np.std(boots)), float(low), float(high), confidence, n_boot)

