"""Statistics the chapters use to read their experiments, one implementation each.

* :func:`mean_and_se` -- mean and standard error over runs;
* :func:`regret_interval` -- Student-t confidence interval for a mean over few runs;
* :func:`fit_power_law` -- least-squares exponent of a power law with its standard error;
* :func:`fit_exponent` -- the exponent of a cost in a size parameter (M, T, n) fitted on
  the mean over runs, with a percentile-bootstrap confidence interval over the runs (the
  one interval method the book uses for fitted exponents);
* :func:`mean_gap`, :func:`welch_dof`, :func:`gap_false_alarm`, :func:`gap_threshold` --
  "b is above a by k combined standard errors" with the false-alarm rate it really has:
  over few runs the gap in combined standard errors is Student-t with the
  Welch–Satterthwaite degrees of freedom, not normal (3 standard errors over 4 runs each
  is a one-sided rate of 1.2 %, not 0.13 %).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fedbandit._validation import (
    check_array,
    check_choice,
    check_int_in_range,
    check_nonnegative_float,
    check_positive_float,
    check_probability,
)

__all__ = [
    "mean_and_se",
    "fit_power_law",
    "regret_interval",
    "ExponentFit",
    "fit_exponent",
    "MeanGap",
    "welch_dof",
    "mean_gap",
    "gap_false_alarm",
    "gap_threshold",
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



# ---------------------------------------------------------------------------------------
# Comparing two means over few runs: Welch's t
# ---------------------------------------------------------------------------------------


def welch_dof(se_a, n_a, se_b, n_b) -> float:
    """Welch–Satterthwaite degrees of freedom of (mean_b − mean_a)/sqrt(se_a² + se_b²).

    ν = (se_a² + se_b²)² / (se_a⁴/(n_a − 1) + se_b⁴/(n_b − 1)), with ``se`` the standard
    errors of the two means over ``n_a`` and ``n_b`` runs (each >= 2).  Between
    min(n_a, n_b) − 1 and n_a + n_b − 2; two noiseless samples give n_a + n_b − 2.
    """
    se_a, se_b = check_nonnegative_float("se_a", se_a), check_nonnegative_float("se_b", se_b)
    n_a = check_int_in_range("n_a", n_a, 2, None)
    n_b = check_int_in_range("n_b", n_b, 2, None)
    va, vb = se_a**2, se_b**2
    if va + vb == 0.0:
        return float(n_a + n_b - 2)
    return float((va + vb) ** 2 / (va**2 / (n_a - 1) + vb**2 / (n_b - 1)))


@dataclass(frozen=True)
class MeanGap:
    """(mean_b − mean_a) in combined standard errors, with Welch's degrees of freedom."""

    diff: float  # mean_b − mean_a
    se: float  # sqrt(se_a² + se_b²)
    t: float  # diff / se (±inf if se = 0 and diff ≠ 0, 0 if both are 0)
    dof: float  # Welch–Satterthwaite

    def false_alarm(self, k: float, sided: str = "one") -> float:
        """P(|gap| > k) (``sided="two"``) or P(gap > k) (``"one"``) if the two means were equal."""
        return gap_false_alarm(k, self.dof, sided=sided)


def mean_gap(a, b) -> MeanGap:
    """Welch's comparison of the means of two samples of runs ``a`` and ``b`` (1-D, >= 2 runs each).

    ``mean_gap(a, b).t > gap_threshold(alpha, gap.dof)`` says "b is above a" with false-alarm
    rate ``alpha`` if the two means were equal (independent runs, means close to normal:
    the studentized gap is then close to Student t with Welch's degrees of freedom).
    """
    a, b = check_array("a", a, ndim=1), check_array("b", b, ndim=1)
    if a.size < 2 or b.size < 2:
        raise ValueError(f"a and b need at least 2 runs each for a standard error, got {a.size} and {b.size}")
    se_a, se_b = a.std(ddof=1) / math.sqrt(a.size), b.std(ddof=1) / math.sqrt(b.size)
    diff = float(b.mean() - a.mean())
    se = math.hypot(se_a, se_b)
    t = diff / se if se > 0 else (0.0 if diff == 0 else math.copysign(math.inf, diff))
    return MeanGap(diff, se, t, welch_dof(se_a, a.size, se_b, b.size))


def gap_false_alarm(k, dof, *, sided: str = "one") -> float:
    """False-alarm rate of the rule "gap > k combined standard errors" (Student t, ``dof`` degrees of freedom).

    ``sided="one"``: P(T > k) (an ordering, "b above a"); ``"two"``: P(|T| > k) (a
    difference either way).  ``dof=inf`` is the normal limit.
    """
    from scipy import stats

    k = check_nonnegative_float("k", k)
    dof = check_positive_float("dof", dof, allow_inf=True)
    sided = check_choice("sided", sided, ("one", "two"))
    p = float(stats.norm.sf(k) if math.isinf(dof) else stats.t.sf(k, dof))
    return p if sided == "one" else 2.0 * p


def gap_threshold(alpha, dof, *, sided: str = "one") -> float:
    """The k with :func:`gap_false_alarm` (k, dof) = ``alpha``: the margin for a stated false-alarm rate."""
    from scipy import stats

    alpha = check_probability("alpha", alpha)
    dof = check_positive_float("dof", dof, allow_inf=True)
    sided = check_choice("sided", sided, ("one", "two"))
    q = alpha if sided == "one" else alpha / 2.0
    return float(stats.norm.isf(q) if math.isinf(dof) else stats.t.isf(q, dof))
