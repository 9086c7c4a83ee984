"""experiments.statistics."""

from __future__ import annotations

import math

import numpy as np

from fedbandit._validation import (
    check_array,
    check_probability,
)

__all__ = [
    "mean_and_se",
    "fit_power_law",
    "regret_interval",
]


def mean_and_se(values, axis: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standard error of the mean along ``axis`` (ddof = 1; 0 for one sample)."""
    values = np.asarray(values, dtype=float)
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
    v = np.asarray(values, dtype=float).ravel()
    if v.size == 0:
        raise ValueError("values must not be empty")
    m = float(v.mean())
    if v.size < 2:
        return m, math.nan, math.nan
    half = float(stats.t.ppf(0.5 + confidence / 2, v.size - 1) * v.std(ddof=1) / math.sqrt(v.size))
    return m, m - half, m + half
