"""Statistics the chapters use to read their experiments, one implementation each.

* :func:`mean_and_se` -- mean and standard error over runs;
* :func:`regret_interval` -- Student-t confidence interval for a mean over few runs;
* :func:`fit_power_law` -- least-squares exponent of a power law with its standard error;
* :func:`fit_exponent` -- the exponent of a cost in a size parameter (M, T, n) fitted on
  the mean over runs, with a percentile-bootstrap confidence interval over the runs (the
  one interval method the book uses for fitted exponents);
* :func:`fit_exponent_t` -- the same exponent with a delta-method standard error and a
  Student-t interval (Welch–Satterthwaite degrees of freedom): the interval for few runs;
* :func:`claim`, :func:`claim_slope`, :func:`claim_exponent`, :func:`claim_difference`,
  :func:`claim_mean` (the mean of few runs, Student t) --
  a :class:`Claim`: an estimate with its interval, the prediction it is about and the
  alternatives it must exclude; it renders the sentence at the strength reached ("consistent
  with 3/5 and 4/7; not distinguished at n ≤ 10⁶", "excludes 2/3 at 95 %") and fails when a
  chapter asserts an exclusion the interval does not carry; :meth:`Claim.order_text` says which of
  two quantities a claim on their difference puts above the other;
* :func:`mean_gap`, :func:`welch_dof`, :func:`gap_false_alarm`, :func:`gap_threshold` --
  "b is above a by k combined standard errors" with the false-alarm rate it really has:
  over few runs the gap in combined standard errors is Student-t with the
  Welch–Satterthwaite degrees of freedom, not normal (3 standard errors over 4 runs each
  is a one-sided rate of 1.2 %, not 0.13 %);
* :func:`claim_order`, :func:`mean_below`, :func:`means_not_distinguished`,
  :func:`mean_within`, :func:`mean_above_level`, :func:`ordering_summary` -- orderings of
  two means at a stated one-sided false-alarm rate α (Welch or paired Student t), and the
  sentence that sums up a family of them;
* :func:`mean_and_half_width`, :func:`ratio_and_se`, :func:`claim_estimate_gap` -- a
  Student-t half-width for plotting, the delta-method ratio of two means, and the claim on
  the difference of two independent estimates with their standard errors;
* :func:`fit_polylog`, :func:`spearman_rho`, :func:`worst_case_runs`,
  :func:`held_out_worst_case` -- the exponent of a polylogarithm, a rank correlation, and
  the worst case over a family of instances (with its held-out, selection-unbiased runs).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from fedbandit._validation import (
    check_array,
    check_bool,
    check_choice,
    check_finite_float,
    check_int_in_range,
    check_nonnegative_float,
    check_nonnegative_int,
    check_positive_float,
    check_positive_int,
    check_probability,
    check_str,
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
    "t_interval",
    "fit_exponent_t",
    "Claim",
    "claim",
    "claim_slope",
    "claim_exponent",
    "claim_difference",
    "claim_mean",
    "claim_ratio_of_means",
    "variance_ratio_band",
    "claim_slope_gap",
    "claim_order",
    "mean_below",
    "means_not_distinguished",
    "mean_within",
    "mean_above_level",
    "ordering_summary",
    "mean_and_half_width",
    "ratio_and_se",
    "claim_estimate_gap",
    "fit_polylog",
    "spearman_rho",
    "worst_case_runs",
    "held_out_worst_case",
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
    """A fitted exponent: the slope, its standard error and confidence interval.

    From :func:`fit_exponent` (bootstrap: ``n_boot`` resamples, ``dof`` unused) or
    :func:`fit_exponent_t` (delta method and Student t: ``n_boot = 0``, ``dof`` the
    Welch–Satterthwaite degrees of freedom).
    """

    slope: float
    se: float
    low: float
    high: float
    confidence: float
    n_boot: int
    dof: float = math.nan

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
    if se_a == 0.0 and se_b == 0.0:
        return float(n_a + n_b - 2)
    try:
        va, vb = se_a**2, se_b**2
        num, den = (va + vb) ** 2, va**2 / (n_a - 1) + vb**2 / (n_b - 1)
    except OverflowError:
        num = den = math.inf
    if not (0.0 < den < math.inf and num < math.inf):
        # se⁴ under- or overflowed (se below about 1e-77 or above 1e77): ν is scale-free, so take it
        # from the standard errors relative to the larger one (only then: elsewhere the bits are kept)
        scale = max(se_a, se_b)
        va, vb = (se_a / scale) ** 2, (se_b / scale) ** 2
        num, den = (va + vb) ** 2, va**2 / (n_a - 1) + vb**2 / (n_b - 1)
    return float(num / den)


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


# ---------------------------------------------------------------------------------------
# Claims: a measurement against a prediction and the alternatives it must exclude
# ---------------------------------------------------------------------------------------


def t_interval(estimate, se, dof, confidence: float = 0.95) -> tuple[float, float]:
    """Two-sided Student-t interval ``estimate ± t_{(1+c)/2, dof} · se`` (``dof=inf``: normal)."""
    from scipy import stats

    estimate = check_finite_float("estimate", estimate)
    se = check_nonnegative_float("se", se)
    dof = check_positive_float("dof", dof, allow_inf=True)
    confidence = check_probability("confidence", confidence)
    q = 0.5 + confidence / 2.0
    half = se * float(stats.norm.ppf(q) if math.isinf(dof) else stats.t.ppf(q, dof))
    return estimate - half, estimate + half


def fit_exponent_t(x, values, *, confidence: float = 0.95) -> ExponentFit:
    """Exponent of ``values ≈ c·x^p`` over independent runs, with a Student-t interval.

    The slope of log(mean over runs) on log x, its standard error by the delta method
    (``var log m_i ≈ se_i² / m_i²``, the OLS weights ``w_i = (u_i − ū)/Σ(u − ū)²`` on
    ``u = log x``: ``se² = Σ w_i² se_i²/m_i²``) and Welch–Satterthwaite degrees of freedom
    ``ν = (Σ c_i)² / Σ c_i²/(r_i − 1)``, ``c_i = w_i² se_i²/m_i²``.  Unlike the bootstrap of
    :func:`fit_exponent`, whose percentile interval over 2–3 runs has far less than its
    nominal coverage (a resample of 3 runs takes only 10 distinct values), this interval
    keeps its coverage with few runs (tested by simulation in ``tests/test_claims.py``).
    It is the statistical uncertainty of the slope over the measured range: curvature of
    the true cost (pre-asymptotic drift) is not part of it.

    Parameters
    ----------
    x : array (n_x,)
        The size parameter, positive, at least 2 distinct values.
    values : array (n_x, runs)
        Independent runs at each x (at least 2 per x), positive mean at each x.
    confidence : float
        Of the two-sided interval.

    Returns
    -------
    ExponentFit
        ``slope``, ``se`` (delta method), ``low``/``high`` (Student t), ``confidence``,
        ``n_boot = 0`` (no resampling) and ``dof``.
    """
    x = check_array("x", x, ndim=1)
    values = check_array("values", values, ndim=2)
    confidence = check_probability("confidence", confidence)
    if values.shape[0] != x.size or np.any(x <= 0) or np.unique(x).size < 2:
        raise ValueError(f"values must have shape (len(x), runs) with x > 0 taking >= 2 values, "
                         f"got {values.shape} for x = {x.tolist()}")
    if values.shape[1] < 2:
        raise ValueError(f"values must hold at least 2 runs per x for a standard error, got {values.shape[1]}")
    mean = values.mean(axis=1)
    if np.any(mean <= 0):
        raise ValueError(f"the mean over runs must be positive at every x, got {mean.tolist()}")
    r = values.shape[1]
    u = np.log(x)
    w = (u - u.mean()) / float(np.sum((u - u.mean()) ** 2))
    slope = float(w @ np.log(mean))
    rel_var = values.var(axis=1, ddof=1) / r / mean**2
    c = w**2 * rel_var
    var = float(c.sum())
    se = math.sqrt(var)
    dof = float(var**2 / float(np.sum(c**2 / (r - 1)))) if var > 0 else math.inf
    low, high = t_interval(slope, se, dof, confidence)
    return ExponentFit(slope, se, low, high, confidence, 0, dof)


def _fmt(v: float, digits: int) -> str:
    return f"{v:.{digits}f}"


@dataclass(frozen=True)
class Claim:
    """A measured quantity with its interval, the prediction it is about and the alternatives.

    Built by :func:`claim`, :func:`claim_slope`, :func:`claim_exponent` or
    :func:`claim_difference`.  ``candidates`` are ``(label, value)`` pairs, the prediction
    (if any) first.  A candidate is *admitted* when it lies in the interval widened by
    ``allowance`` (a stated systematic error, e.g. what a proxy leaves out; 0 by default)
    and *excluded* otherwise.  :meth:`text` renders the sentence at the strength reached;
    :meth:`assert_excludes`, :meth:`assert_admits`, :meth:`assert_above`,
    :meth:`assert_below`, :meth:`assert_not_above` and :meth:`assert_not_below` fail (AssertionError naming the interval) when the chapter asks
    for more than the interval carries.
    """

    quantity: str
    estimate: float
    low: float
    high: float
    confidence: float
    method: str
    candidates: tuple = ()
    prediction: str | None = None
    allowance: float = 0.0
    allowance_reason: str = ""
    scope: str = ""
    digits: int = 2

    def __post_init__(self):
        for name in ("quantity", "method", "allowance_reason", "scope"):
            check_str(name, getattr(self, name))
        for name in ("estimate", "low", "high"):
            object.__setattr__(self, name, check_finite_float(name, getattr(self, name)))
        if not self.low <= self.estimate <= self.high:
            raise ValueError(f"estimate must lie in [low, high], got low <= estimate <= high violated: "
                             f"{self.low}, {self.estimate}, {self.high}")
        object.__setattr__(self, "confidence", check_probability("confidence", self.confidence))
        object.__setattr__(self, "allowance", check_nonnegative_float("allowance", self.allowance))
        object.__setattr__(self, "digits", check_int_in_range("digits", self.digits, 0, 12))
        if not isinstance(self.candidates, tuple):
            raise TypeError(f"candidates must be a tuple of (label, value) pairs, got {self.candidates!r}")
        cands, _ = _candidates(None, self.candidates)
        object.__setattr__(self, "candidates", cands)
        if self.prediction is not None and self.prediction not in [lab for lab, _ in cands]:
            raise ValueError(f"prediction must be None or the label of a candidate, got {self.prediction!r}")

    @property
    def bounds(self) -> tuple[float, float]:
        """The interval widened by the allowance: what admits or excludes a candidate."""
        return self.low - self.allowance, self.high + self.allowance

    def value_of(self, label: str) -> float:
        for lab, v in self.candidates:
            if lab == label:
                return v
        raise KeyError(f"{label!r} is not a candidate of this claim; candidates: {[lab for lab, _ in self.candidates]}")

    def admits_value(self, value: float) -> bool:
        """``value`` lies in the (widened) interval."""
        lo, hi = self.bounds
        return bool(lo <= float(value) <= hi)

    def admits(self, label: str) -> bool:
        return self.admits_value(self.value_of(label))

    def excludes(self, label: str) -> bool:
        return not self.admits(label)

    def above(self, label: str) -> bool:
        """The whole (widened) interval lies above the candidate's value."""
        return bool(self.bounds[0] > self.value_of(label))

    def below(self, label: str) -> bool:
        """The whole (widened) interval lies below the candidate's value."""
        return bool(self.bounds[1] < self.value_of(label))

    @property
    def admitted(self) -> tuple[str, ...]:
        return tuple(lab for lab, _ in self.candidates if self.admits(lab))

    @property
    def excluded(self) -> tuple[str, ...]:
        return tuple(lab for lab, _ in self.candidates if self.excludes(lab))

    @property
    def distinguished(self) -> bool:
        """At most one candidate is admitted: the measurement tells the candidates apart."""
        return len(self.admitted) <= 1

    def half_widths_above(self, value: float) -> float:
        """The estimate's signed distance above ``value``, in half-widths of the interval on ``value``'s side.

        How far a verdict is from changing: above 1, the interval (without the allowance)
        lies above ``value``; below −1, it lies below; in between, it admits ``value``.  The
        half-width is ``estimate − low`` for a value below the estimate and ``high − estimate``
        otherwise (equal for the symmetric intervals of :func:`claim_slope` and
        :func:`claim_difference`).

        Parameters
        ----------
        value : float
            The threshold the verdict is about, e.g. 0 for "no difference".

        Returns
        -------
        float
            ``(estimate − value) / half-width``; ±``inf`` for a zero-width interval not at
            ``value``, 0 at it.

        Raises
        ------
        ValueError
            If ``value`` is not finite.
        """
        value = check_finite_float("value", value)
        gap = self.estimate - value
        half_width = self.estimate - self.low if gap > 0 else self.high - self.estimate
        if half_width == 0.0:
            return math.copysign(math.inf, gap) if gap != 0 else 0.0
        return gap / half_width

    def interval_text(self) -> str:
        d = self.digits
        conf = f"{100 * self.confidence:.4g} %"
        s = f"{_fmt(self.estimate, d)} [{_fmt(self.low, d)}, {_fmt(self.high, d)}] at {conf}"
        if self.method:
            s += f" ({self.method})"
        if self.allowance > 0:
            s += f", ± {_fmt(self.allowance, d)} allowed for {self.allowance_reason or 'systematic error'}"
        return s

    def _names(self, labels) -> str:
        names = [f"{lab} (the prediction)" if lab == self.prediction else lab for lab in labels]
        if len(names) <= 1:
            return "".join(names)
        return ", ".join(names[:-1]) + " and " + names[-1]

    def verdict(self) -> str:
        """What is and is not excluded, without the number: "consistent with …; excludes …"."""
        conf = f"{100 * self.confidence:.4g} %"
        parts = []
        adm, exc = self.admitted, self.excluded
        scope = f" at {self.scope}" if self.scope else ""
        if adm:
            s = f"consistent with {self._names(adm)}"
            if len(adm) > 1:
                s += f"; not distinguished{scope}"
            parts.append(s)
        if exc:
            parts.append(f"excludes {self._names(exc)} at {conf}")
        if not parts:
            return "no candidate to compare with"
        return "; ".join(parts)

    def order_text(self, high: str, low: str, *, reference: str = "no difference") -> str:
        """Which of ``high`` and ``low`` this claim on ``high − low`` puts above the other, with its interval.

        "high above low" when the interval lies wholly above the candidate ``reference``
        (:meth:`above`), "low above high" when wholly below (:meth:`below`), otherwise "high
        and low not distinguished"; then ``(high − low = estimate [low, high])``.

        Parameters
        ----------
        high, low : str
            Names of the two quantities whose difference ``high − low`` the claim is on.
        reference : str, default "no difference"
            The candidate (at 0 for a difference) the interval is read against.

        Returns
        -------
        str
        """
        high, low = check_str("high", high), check_str("low", low)
        d = self.digits
        interval = f"{high} − {low} = {self.estimate:.{d}f} [{self.low:.{d}f}, {self.high:.{d}f}]"
        if self.above(reference):
            return f"{high} above {low} ({interval})"
        if self.below(reference):
            return f"{low} above {high} ({interval})"
        return f"{high} and {low} not distinguished ({interval})"

    def text(self) -> str:
        """The sentence: quantity, estimate and interval, then :meth:`verdict`."""
        return f"{self.quantity}: {self.interval_text()}; {self.verdict()}"

    __str__ = text

    def _fail(self, what: str):
        raise AssertionError(f"{self.quantity}: cannot assert {what}; interval {self.interval_text()} "
                             f"(admits {list(self.admitted)}, excludes {list(self.excluded)})")

    def assert_excludes(self, *labels: str) -> Claim:
        """Fail unless the interval excludes every named candidate."""
        bad = [lab for lab in labels if self.admits(lab)]
        if bad:
            self._fail(f"that it excludes {bad}")
        return self

    def assert_admits(self, *labels: str) -> Claim:
        """Fail unless the interval admits every named candidate (default: the prediction)."""
        labels = labels or ((self.prediction,) if self.prediction is not None else ())
        if not labels:
            raise ValueError("assert_admits needs a label when the claim has no prediction")
        bad = [lab for lab in labels if self.excludes(lab)]
        if bad:
            self._fail(f"consistency with {bad}")
        return self

    def assert_above(self, *labels: str) -> Claim:
        """Fail unless the whole interval lies above every named candidate (one-sided exclusion)."""
        bad = [lab for lab in labels if not self.above(lab)]
        if bad:
            self._fail(f"that it lies above {bad}")
        return self

    def assert_below(self, *labels: str) -> Claim:
        """Fail unless the whole interval lies below every named candidate (one-sided exclusion)."""
        bad = [lab for lab in labels if not self.below(lab)]
        if bad:
            self._fail(f"that it lies below {bad}")
        return self

    def assert_not_above(self, *labels: str) -> Claim:
        """Fail when the whole (widened) interval lies above a named candidate: "at most" is contradicted.

        The one-sided counterpart of :meth:`assert_admits`: a ceiling the estimate stays under
        passes; it does not establish the ceiling (that is :meth:`assert_below`).
        """
        bad = [lab for lab in labels if self.above(lab)]
        if bad:
            self._fail(f"that it does not lie above {bad}")
        return self

    def assert_not_below(self, *labels: str) -> Claim:
        """Fail when the whole (widened) interval lies below a named candidate: "at least" is contradicted."""
        bad = [lab for lab in labels if self.below(lab)]
        if bad:
            self._fail(f"that it does not lie below {bad}")
        return self


def _candidates(prediction, alternatives):
    out = []
    pred_label = None
    if prediction is not None:
        if not (isinstance(prediction, tuple) and len(prediction) == 2 and isinstance(prediction[0], str)):
            raise TypeError(f"prediction must be a (label, value) pair or None, got {prediction!r}")
        pred_label = prediction[0]
        out.append((pred_label, check_finite_float("prediction", prediction[1])))
    if isinstance(alternatives, dict):
        alts = list(alternatives.items())
    elif isinstance(alternatives, (list, tuple)):
        alts = list(alternatives)
    else:
        raise TypeError(f"alternatives must be a dict or a sequence of (label, value) pairs, got {alternatives!r}")
    for item in alts:
        if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str)):
            raise TypeError(f"alternatives must hold (label, value) pairs with a str label, got {item!r}")
        lab = item[0]
        if lab in [lab_ for lab_, _ in out]:
            raise ValueError(f"alternatives: candidate label {lab!r} appears twice")
        out.append((lab, check_finite_float("alternatives", item[1])))
    return tuple(out), pred_label


def claim(quantity, estimate, low, high, *, confidence: float, method: str, prediction=None, alternatives=(),
          allowance: float = 0.0, allowance_reason: str = "", scope: str = "", digits: int = 2) -> Claim:
    """A :class:`Claim` from an estimate and its interval at ``confidence``.

    ``prediction`` is a ``(label, value)`` pair (or None); ``alternatives`` a dict or
    ``(label, value)`` pairs the claim is to be compared with (the other k's exponents, or
    ``("no difference", 0.0)``).  ``allowance`` widens the interval for a stated systematic
    error (``allowance_reason`` names it); ``scope`` says where the measurement was taken
    ("n ≤ 10⁶"), for the "not distinguished" sentence.
    """
    cands, pred = _candidates(prediction, alternatives)
    return Claim(quantity, estimate, low, high, confidence, method, cands, pred, allowance, allowance_reason, scope,
                 digits)


def claim_slope(quantity, slope, se, dof, *, confidence: float = 0.95, method: str | None = None, **kwargs) -> Claim:
    """A claim on a fitted slope with standard error ``se``: Student t with ``dof`` degrees of freedom.

    For a least-squares fit of ``p`` points (:func:`fit_power_law`), ``dof = p − 2``: with
    few points the t quantile, not the normal one (4 points: 4.30 at 95 %, not 1.96).
    """
    slope = check_finite_float("slope", slope)
    low, high = t_interval(slope, se, dof, confidence)
    if method is None:
        method = f"Student t, {dof:.3g} dof"
    return claim(quantity, slope, low, high, confidence=confidence, method=method, **kwargs)


def claim_slope_gap(quantity, a, b, dof=None, *, confidence: float = 0.95, **kwargs) -> Claim:
    r"""A claim on the difference a − b of two slopes fitted on independent runs.

    ``a`` and ``b`` are ``(slope, se)`` pairs (or :class:`ExponentFit`); the difference has
    standard error :math:`\sqrt{se_a^2 + se_b^2}` (independent fits) and a Student t interval with
    ``dof`` degrees of freedom (for two least-squares fits of p points each, p − 2 is the
    conservative choice: Welch's dof is at least the smaller of the two).  ``dof=None``
    takes the smaller of the two fits' own degrees of freedom, ``min(a.dof, b.dof)``: both
    must then be :class:`ExponentFit` from :func:`fit_exponent_t` (finite ``dof``).
    """
    if dof is None:
        if not (isinstance(a, ExponentFit) and isinstance(b, ExponentFit)
                and math.isfinite(a.dof) and math.isfinite(b.dof)):
            raise ValueError("dof=None takes the smaller of the fits' dof: a and b must be ExponentFit from "
                             f"fit_exponent_t with finite dof, got {a!r:.80} and {b!r:.80}")
        dof = min(a.dof, b.dof)
    def pair(name, v):
        if isinstance(v, ExponentFit):
            return v.slope, v.se
        if not (isinstance(v, tuple) and len(v) == 2):
            raise TypeError(f"{name} must be a (slope, se) pair or an ExponentFit, got {v!r:.80}")
        return check_finite_float(name, v[0]), check_nonnegative_float(name, v[1])

    (sa, ea), (sb, eb) = pair("a", a), pair("b", b)
    dof = check_positive_float("dof", dof, allow_inf=True)
    kwargs.setdefault("method", f"difference of two fits, Student t, {dof:.3g} dof")
    return claim_slope(quantity, sa - sb, math.hypot(ea, eb), dof, confidence=confidence, **kwargs)


def claim_exponent(quantity, fit: ExponentFit, **kwargs) -> Claim:
    """A claim on an :class:`ExponentFit` (:func:`fit_exponent_t` or :func:`fit_exponent`), its interval as it is."""
    if not isinstance(fit, ExponentFit):
        raise TypeError(f"fit must be an ExponentFit, got {type(fit).__name__}")
    if not all(math.isfinite(v) for v in (fit.slope, fit.low, fit.high)):
        raise ValueError(f"fit has no finite slope and interval: {fit}")
    if fit.n_boot:
        method = f"percentile bootstrap, {fit.n_boot} resamples"
    else:
        method = f"Student t over runs, {fit.dof:.3g} dof"
    kwargs.setdefault("method", method)
    return claim(quantity, fit.slope, fit.low, fit.high, confidence=fit.confidence, **kwargs)


def claim_difference(quantity, a, b, *, paired: bool = False, confidence: float = 0.95,
                     alternatives=(("no difference", 0.0),), **kwargs) -> Claim:
    """A claim on ``mean(b) − mean(a)`` over independent runs (Welch) or paired runs (paired t).

    ``paired=True``: the runs of ``a`` and ``b`` share their random numbers (common random
    numbers), the interval is the paired Student t on ``b − a`` with ``runs − 1`` dof;
    otherwise Welch's t (:func:`mean_gap`).  The default alternative is "no difference"; a
    one-sided ordering "b above a" at false-alarm rate α is :meth:`Claim.assert_above`
    ("no difference") on a claim built at ``confidence = 1 − 2α``.
    """
    a, b = check_array("a", a, ndim=1), check_array("b", b, ndim=1)
    paired = check_bool("paired", paired)
    if paired:
        if a.shape != b.shape or a.size < 2:
            raise ValueError(f"a and b: paired runs need equal sizes >= 2, got {a.size} and {b.size}")
        d = b - a
        diff, se, dof = float(d.mean()), float(d.std(ddof=1) / math.sqrt(d.size)), float(d.size - 1)
        method = f"paired t over {d.size} runs"
    else:
        gap = mean_gap(a, b)
        diff, se, dof = gap.diff, gap.se, gap.dof
        method = f"Welch t, {dof:.3g} dof"
    low, high = t_interval(diff, se, dof, confidence)
    kwargs.setdefault("method", method)
    return claim(quantity, diff, low, high, confidence=confidence, alternatives=alternatives, **kwargs)


def claim_mean(quantity, values, *, confidence: float = 0.95, **kwargs) -> Claim:
    """A claim on the mean of independent runs: Student t with ``runs − 1`` degrees of freedom.

    The interval is ``mean ± t_{(1+confidence)/2, n−1} · s/√n`` (``s`` the sample standard
    deviation).  Keyword arguments go to :func:`claim` (``prediction``, ``alternatives``, ``digits``, ...).

    Parameters
    ----------
    quantity : str
        What is measured (the claim's sentence names it).
    values : array_like, 1-D, at least 2 finite values
        One value per independent run.
    confidence : float, default 0.95
        Two-sided confidence of the interval.

    Returns
    -------
    Claim
    """
    x = check_array("values", values, ndim=1)
    if x.size < 2:
        raise ValueError(f"values: a Student t interval needs at least 2 runs, got {x.size}")
    mean, se = map(float, mean_and_se(x))
    low, high = t_interval(mean, se, x.size - 1, confidence)
    kwargs.setdefault("method", f"Student t over {x.size} runs")
    return claim(quantity, mean, low, high, confidence=confidence, **kwargs)


def claim_ratio_of_means(quantity, numerator, denominator, *, confidence: float = 0.95, **kwargs) -> Claim:
    r"""A claim on ``mean(numerator) / mean(denominator)`` from two independent samples of positive means.

    Delta method on the log of the ratio: :math:`\log r \pm t_{(1+c)/2,\,\nu}\,\sqrt{s_n^2/(n_n m_n^2)
    + s_d^2/(n_d m_d^2)}`, exponentiated (so the interval stays positive and is symmetric in
    the ratio's direction), with :math:`\nu` Welch–Satterthwaite's degrees of freedom of the two
    relative standard errors (:func:`welch_dof`).  First order in the relative errors: good when
    both are small.  Keyword arguments go to :func:`claim`.

    Parameters
    ----------
    quantity : str
        What is measured.
    numerator, denominator : array_like, 1-D, at least 2 values each, positive means
        Independent replicas of the two quantities.
    confidence : float, default 0.95
        Two-sided confidence of the interval.

    Returns
    -------
    Claim
    """
    parts = []
    for label, x in (("numerator", check_array("numerator", numerator, ndim=1)),
                     ("denominator", check_array("denominator", denominator, ndim=1))):
        if x.size < 2:
            raise ValueError(f"{label}: needs at least 2 replicas, got {x.size}")
        mean, se = map(float, mean_and_se(x))
        if not mean > 0.0:
            raise ValueError(f"{label}: the mean must be positive for a log-ratio interval, got {mean!r}")
        parts.append((mean, se / mean, x.size))
    (mn, rel_n, nn), (md, rel_d, nd) = parts
    ratio, se_log = mn / md, math.hypot(rel_n, rel_d)
    dof = welch_dof(rel_n, nn, rel_d, nd)
    low_log, high_log = t_interval(0.0, se_log, dof, confidence)
    kwargs.setdefault("method", f"delta method on the log of the ratio, Student t at {dof:.3g} dof")
    return claim(quantity, ratio, ratio * math.exp(low_log), ratio * math.exp(high_log), confidence=confidence,
                 **kwargs)


def variance_ratio_band(dof: float, alpha: float) -> tuple[float, float]:
    """Two-sided band for a measured variance over its true value, at false-alarm rate ``alpha``.

    A variance estimated from ``dof`` degrees of freedom of Gaussian errors, divided by the true
    variance, is distributed as χ²(dof)/dof; the band is its ``alpha/2`` and ``1 − alpha/2``
    quantiles, so a correct variance falls outside it with probability ``alpha``.

    Parameters
    ----------
    dof : float
        Degrees of freedom of the estimate (``n − 1`` for a sample variance of ``n`` draws; ``n``
        for a mean of ``n`` squared centred errors).
    alpha : float
        Two-sided false-alarm rate, in (0, 1).

    Returns
    -------
    (float, float)
        The band's low and high ends.
    """
    from scipy import stats

    dof = check_positive_float("dof", dof)
    alpha = check_probability("alpha", alpha)
    if alpha == 0.0 or alpha == 1.0:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha!r}")
    return float(stats.chi2.ppf(alpha / 2, dof) / dof), float(stats.chi2.isf(alpha / 2, dof) / dof)


# ---------------------------------------------------------------------------------------
# Orderings of two means at a stated one-sided false-alarm rate
# ---------------------------------------------------------------------------------------

#: Largest range of a sample of runs the orderings take (Welch's dof raises the standard errors
#: to the fourth power, which overflows a float from about 1e77).
_MAX_SPREAD = 1e70

#: The candidate every ordering is read against.
NO_DIFFERENCE = "no difference"


def _check_alpha(alpha: float) -> float:
    alpha = check_probability("alpha", alpha)
    if alpha >= 0.5:
        raise ValueError(f"alpha must lie in (0, 0.5) (a one-sided false-alarm rate), got {alpha!r}")
    return alpha


def _check_runs(names: tuple[str, str], a: ArrayLike, b: ArrayLike, paired: bool) -> tuple[np.ndarray, np.ndarray]:
    """The two samples of runs of an ordering, checked under their parameters' names."""
    (na, nb) = names
    x, y = check_array(f"{na}", a, ndim=1), check_array(f"{nb}", b, ndim=1)
    paired = check_bool("paired", paired)
    if x.size < 2 or y.size < 2:
        raise ValueError(f"{na} and {nb} need at least 2 runs each for a standard error, got {x.size} and {y.size}")
    if paired and x.size != y.size:
        raise ValueError(f"{na} and {nb}: paired runs need equal sizes, got {x.size} and {y.size}")
    for name, v in ((na, x), (nb, y)):
        spread = float(np.ptp(v))
        if not spread <= _MAX_SPREAD:  # Welch's dof takes se⁴: beyond this it overflows a float
            raise ValueError(f"{name}: the runs must spread over at most {_MAX_SPREAD:g}, got {spread!r}")
    return x, y


def claim_order(quantity: str, low: ArrayLike, high: ArrayLike, *, alpha: float, paired: bool = False,
                **kwargs: Any) -> Claim:
    """A claim on ``mean(high) − mean(low)`` whose one-sided exclusions have false-alarm rate ``alpha``.

    :func:`claim_difference` at confidence ``1 − 2·alpha``: "high above low" is
    :meth:`Claim.assert_above` ("no difference"), and each side of "not distinguished"
    (:meth:`Claim.admits`) has rate ``alpha`` too.  ``paired=True`` for runs that share
    their random numbers (paired Student t over the runs), otherwise Welch's t.

    Parameters
    ----------
    quantity : str
        What the difference is, for the claim's sentence.
    low, high : array (runs,)
        The runs of the two configurations (equal sizes when ``paired``).
    alpha : float
        One-sided false-alarm rate, in (0, 0.5).
    paired : bool, default False
        Paired t (common random numbers) or Welch's t (independent runs).
    **kwargs
        Passed on to :func:`claim` (``digits``, ``scope``, ``alternatives``, ...).

    Returns
    -------
    Claim
        With the alternative "no difference" (unless ``alternatives`` says otherwise).
    """
    alpha = _check_alpha(alpha)
    low, high = _check_runs(("low", "high"), low, high, paired)
    return claim_difference(quantity, low, high, paired=paired, confidence=1 - 2 * alpha, **kwargs)


def mean_below(low: ArrayLike, high: ArrayLike, *, alpha: float, paired: bool = False) -> bool:
    """``mean(low) < mean(high)``, established at one-sided false-alarm rate ``alpha``.

    The interval of :func:`claim_order` (``low``, ``high``) lies wholly above 0.

    Parameters
    ----------
    low, high : array (runs,)
        The runs of the configuration said to be lower, and of the other.
    alpha : float
        One-sided false-alarm rate, in (0, 0.5).
    paired : bool, default False
        Paired t (common random numbers) or Welch's t.

    Returns
    -------
    bool
    """
    low, high = _check_runs(("low", "high"), low, high, paired)
    return claim_order("mean(high) − mean(low)", low, high, alpha=alpha, paired=paired).above(NO_DIFFERENCE)


def means_not_distinguished(a: ArrayLike, b: ArrayLike, *, alpha: float, paired: bool = False) -> bool:
    """The runs do not tell ``mean(a)`` and ``mean(b)`` apart: the interval of the difference admits 0.

    The interval is :func:`claim_order`'s (confidence ``1 − 2·alpha``); symmetric in ``a``
    and ``b``.  "Not distinguished" is not "equal": it says only that neither ordering is
    established at rate ``alpha``.

    Parameters
    ----------
    a, b : array (runs,)
        The runs of the two configurations.
    alpha : float
        One-sided false-alarm rate of each side, in (0, 0.5).
    paired : bool, default False
        Paired t (common random numbers) or Welch's t.

    Returns
    -------
    bool
    """
    a, b = _check_runs(("a", "b"), a, b, paired)
    return claim_order("mean(b) − mean(a)", a, b, alpha=alpha, paired=paired).admits(NO_DIFFERENCE)


def mean_within(a: ArrayLike, b: ArrayLike, rel: float, *, alpha: float, paired: bool = True,
                establish: bool = True) -> bool:
    """``mean(a)`` within a fraction ``rel`` of ``mean(b)``: two one-sided tests (TOST) at rate ``alpha`` each.

    ``establish=True``: both ``mean(a) > (1 − rel)·mean(b)`` and ``mean(a) < (1 + rel)·mean(b)``
    are established (:func:`mean_below` on the runs ``(1 ∓ rel)·b`` against ``a``): an
    equivalence shown.  ``establish=False``: the weaker check that neither test resolves
    ``mean(a)`` outside the band (for runs too few or too short to establish it).

    Parameters
    ----------
    a, b : array (runs,)
        The runs (equal sizes when ``paired``).
    rel : float
        The band's half-width, a fraction of ``mean(b)``, non-negative.
    alpha : float
        One-sided false-alarm rate of each test, in (0, 0.5).
    paired : bool, default True
        Paired t (common random numbers) or Welch's t.
    establish : bool, default True
        Establish the band, or only check that it is not contradicted.

    Returns
    -------
    bool
    """
    rel = check_nonnegative_float("rel", rel)
    establish = check_bool("establish", establish)
    a, b = _check_runs(("a", "b"), a, b, paired)
    lower, upper = (1 - rel) * b, (1 + rel) * b
    if establish:
        return mean_below(lower, a, alpha=alpha, paired=paired) and mean_below(a, upper, alpha=alpha, paired=paired)
    return not mean_below(a, lower, alpha=alpha, paired=paired) and not mean_below(upper, a, alpha=alpha,
                                                                                   paired=paired)


def mean_above_level(x: ArrayLike, level: float, *, alpha: float) -> bool:
    """One-sided Student t test: is the mean of the runs ``x`` above ``level`` at false-alarm rate ``alpha``?

    ``mean(x) − t_{1−α, n−1}·s/√n > level`` (s the sample standard deviation, n ≥ 2 runs):
    the lower one-sided confidence bound at ``1 − alpha`` lies above ``level``.

    Parameters
    ----------
    x : array (runs,)
        Independent runs, at least 2.
    level : float
        The level tested against.
    alpha : float
        One-sided false-alarm rate, in (0, 0.5).

    Returns
    -------
    bool
    """
    from scipy import stats

    x = check_array("x", x, ndim=1)
    if x.size < 2:
        raise ValueError(f"x must hold at least 2 runs for a standard error, got {x.size}")
    level = check_finite_float("level", level)
    alpha = _check_alpha(alpha)
    return bool(x.mean() - stats.t.ppf(1 - alpha, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size) > level)


def ordering_summary(claims: Mapping[Any, Claim], *, when_above: str, when_below: str,
                     neither: str = "not distinguished", name: str = "ε") -> str:
    """The sentence summing up a family of claims on differences, grouped by the ordering each establishes.

    For claims keyed by a parameter (ε), e.g. ``{ε: claim on regret(B) − regret(A)}``:
    ``"<when_above> at ε = 1, 2; <when_below> at ε = 5; <neither> at ε = 0.5"``, where a
    claim whose interval lies above "no difference" goes to ``when_above``, below it to
    ``when_below``, and one that admits it to ``neither`` (empty groups are left out; keys
    formatted with ``:g``, in the mapping's order).

    Parameters
    ----------
    claims : mapping of key to Claim
        Each with the candidate "no difference".
    when_above, when_below, neither : str
        The phrases of the three groups.
    name : str, default "ε"
        The parameter the keys are values of.

    Returns
    -------
    str
        The groups joined by "; " (empty if ``claims`` is).
    """
    if not isinstance(claims, Mapping) or not all(isinstance(c, Claim) for c in claims.values()):
        raise TypeError(f"claims must be a mapping of keys to Claim, got {type(claims).__name__}")
    check_str("when_above", when_above)
    check_str("when_below", when_below)
    check_str("neither", neither)
    check_str("name", name)
    above = [k for k, c in claims.items() if c.above(NO_DIFFERENCE)]
    below = [k for k, c in claims.items() if c.below(NO_DIFFERENCE)]
    same = [k for k in claims if k not in above + below]

    def keys(ks: list) -> str:
        return ", ".join(f"{k:g}" for k in ks)

    parts = [f"{phrase} at {name} = {keys(ks)}" for phrase, ks in ((when_above, above), (when_below, below),
                                                                  (neither, same)) if ks]
    return "; ".join(parts)


# ---------------------------------------------------------------------------------------
# Intervals and ratios of means
# ---------------------------------------------------------------------------------------


def mean_and_half_width(values: ArrayLike, confidence: float = 0.95) -> tuple[float, float]:
    """(mean, half-width) of the Student-t interval of :func:`regret_interval`, for error bars.

    The half-width is ``high − mean`` of :func:`regret_interval` (few runs: Student t with
    n − 1 degrees of freedom, not the normal 1.96); NaN with one run.

    Parameters
    ----------
    values : array
        The runs (flattened).
    confidence : float, default 0.95
        Of the two-sided interval.

    Returns
    -------
    (float, float)
    """
    m, _, high = regret_interval(values, confidence)
    return m, high - m


def ratio_and_se(numerator: tuple[float, float], denominator: tuple[float, float]) -> tuple[float, float]:
    r"""Ratio of two independent means and its standard error by the delta method.

    For means :math:`m_n, m_d` with standard errors :math:`s_n, s_d` (independent runs),
    :math:`r = m_n/m_d` and :math:`\mathrm{se}(r) \approx r\sqrt{(s_n/m_n)^2 + (s_d/m_d)^2}`
    (first-order Taylor expansion of the ratio; good when both relative errors are small).

    Parameters
    ----------
    numerator, denominator : (float, float)
        ``(mean, standard error)`` of each.

    Returns
    -------
    (float, float)
        The ratio and its standard error (the sign of the ratio's).
    """
    pairs = []
    for label, pair in (("numerator", numerator), ("denominator", denominator)):
        if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
            raise TypeError(f"{label} must be a (mean, standard error) pair, got {pair!r:.80}")
        mean = check_finite_float(f"{label}", pair[0])
        if mean == 0.0:
            raise ValueError(f"{label}: the mean must be non-zero for a ratio's relative error, got {mean!r}")
        pairs.append((np.float64(mean), np.float64(check_nonnegative_float(f"{label}", pair[1]))))
    (mn, sn), (md, sd) = pairs
    r = mn / md
    return float(r), float(r * np.sqrt((sn / mn) ** 2 + (sd / md) ** 2))


def claim_estimate_gap(quantity: str, a: tuple[float, float], b: tuple[float, float], runs_a: int, runs_b: int, *,
                       confidence: float = 0.95, estimator: str = "",
                       alternatives: Any = ((NO_DIFFERENCE, 0.0),), **kwargs: Any) -> Claim:
    r"""A claim on ``a − b`` for two independent estimates, each ``(estimate, se)`` over its own runs.

    The difference has standard error :math:`\sqrt{se_a^2 + se_b^2}` and a Student t
    interval with Welch–Satterthwaite degrees of freedom (:func:`welch_dof` of the two
    standard errors over ``runs_a`` and ``runs_b`` runs): for estimates that behave like
    means of their runs, such as :func:`ratio_and_se`'s delta-method ratios.  The method reads
    ``"<estimator>, Student t, <dof> dof"``.

    Parameters
    ----------
    quantity : str
        What the difference is.
    a, b : (float, float)
        ``(estimate, standard error)`` of each.
    runs_a, runs_b : int
        The independent runs behind each (at least 2).
    confidence : float, default 0.95
        Of the two-sided interval.
    estimator : str, default ""
        How the standard errors were obtained ("delta method"), for the method's text.
    alternatives : dict or sequence of (label, value)
        Default "no difference" at 0.
    **kwargs
        Passed on to :func:`claim`.

    Returns
    -------
    Claim
    """
    for label, pair in (("a", a), ("b", b)):
        if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
            raise TypeError(f"{label} must be an (estimate, standard error) pair, got {pair!r:.80}")
    check_str("estimator", estimator)
    runs_a = check_int_in_range("runs_a", runs_a, 2, None)
    runs_b = check_int_in_range("runs_b", runs_b, 2, None)
    d, se = a[0] - b[0], math.hypot(a[1], b[1])
    dof = welch_dof(a[1], runs_a, b[1], runs_b)
    method = f"Student t, {dof:.3g} dof"
    kwargs.setdefault("method", f"{estimator}, {method}" if estimator else method)
    return claim(quantity, d, *t_interval(d, se, dof, confidence), confidence=confidence, alternatives=alternatives,
                 **kwargs)


# ---------------------------------------------------------------------------------------
# Fits, correlations and worst cases
# ---------------------------------------------------------------------------------------


def fit_polylog(x: ArrayLike, values: ArrayLike) -> tuple[float, float, float]:
    """Least-squares exponent a of ``values ≈ c·(ln x)^a``: :func:`fit_power_law` on ``ln x``.

    A cost growing like ``x`` has local exponent ``ln x`` in this scale, a polylogarithmic one a
    constant.  The standard error is the least-squares one (points assumed independent: for
    points of one mean curve, which are correlated, it is optimistic).

    Parameters
    ----------
    x : array (p,)
        Greater than 1 (``ln x > 0``).
    values : array (p,)
        Positive.

    Returns
    -------
    slope, intercept, slope_se : float
        As :func:`fit_power_law`.
    """
    x = check_array("x", x, ndim=1)
    if x.size < 2:
        raise ValueError(f"x must hold at least 2 points for a slope, got {x.size}")
    if np.any(x <= 1.0):
        raise ValueError(f"x must be greater than 1 (ln x > 0), got min {x.min() if x.size else None!r}")
    return fit_power_law(np.log(x), values)


def spearman_rho(a: ArrayLike, b: ArrayLike) -> float:
    """Spearman's rank correlation of two samples (``scipy.stats.spearmanr``), a point estimate.

    Parameters
    ----------
    a, b : array (p,)
        Paired observations, the same length >= 2.

    Returns
    -------
    float
        In [−1, 1] (NaN if a sample is constant).
    """
    from scipy import stats

    a, b = check_array("a", a, ndim=1), check_array("b", b, ndim=1)
    if a.size != b.size or a.size < 2:
        raise ValueError(f"a and b must have the same length >= 2, got {a.size} and {b.size}")
    return float(stats.spearmanr(a, b)[0])


def _check_family(values: ArrayLike) -> np.ndarray:
    v = check_array("values", values, finite=False)
    if v.ndim not in (2, 3) or v.shape[-2] < 1 or v.shape[-1] < 1:
        raise ValueError(f"values must have shape (instances, runs) or (points, instances, runs), got {v.shape}")
    return v


def worst_case_runs(values: ArrayLike) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The worst instance of a family by its mean over the runs, and that instance's runs.

    The maximum of the means is biased upward (the runs that pick the instance also measure
    it); :func:`held_out_worst_case` is the unbiased variant.

    Parameters
    ----------
    values : array (G, S) or (N, G, S)
        S runs on each of G instances (e.g. gaps), optionally at each of N points (e.g. n).

    Returns
    -------
    means : array (G,) or (N, G)
        The mean over the runs of every instance.
    runs : array (S,) or (N, S)
        The runs of the worst instance.
    index : int array () or (N,)
        The worst instance (the first on ties).
    """
    v = _check_family(values)
    flat = v.reshape(-1, *v.shape[-2:])
    means, runs, index = [], [], []
    for reg in flat:
        m = reg.mean(axis=1)
        j = int(np.argmax(m))
        means.append(m)
        runs.append(reg[j])
        index.append(j)
    lead = v.shape[:-2]
    return (np.array(means).reshape(*lead, v.shape[-2]), np.array(runs).reshape(*lead, v.shape[-1]),
            np.array(index).reshape(lead))


def held_out_worst_case(values: ArrayLike) -> np.ndarray:
    """Each run's value at the instance that is worst on the *other* runs' mean (leave-one-out).

    Run s is not used to choose the instance it measures, so its value is an unbiased draw of
    the regret at a worst-case candidate, unlike the maximum of the means
    (:func:`worst_case_runs`), which is biased upward.

    Parameters
    ----------
    values : array (G, S) or (N, G, S)
        S >= 2 runs on each of G instances, optionally at each of N points.

    Returns
    -------
    array (S,) or (N, S)
        Run s's value at ``argmax_g mean_{s' ≠ s} values[g, s']`` (first on ties).
    """
    v = _check_family(values)
    n_runs = v.shape[-1]
    if n_runs < 2:
        raise ValueError(f"values must hold at least 2 runs per instance to hold one out, got {n_runs}")
    flat = v.reshape(-1, *v.shape[-2:])
    out = [[reg[int(np.argmax(np.delete(reg, s, axis=1).mean(axis=1))), s] for s in range(n_runs)] for reg in flat]
    return np.array(out).reshape(*v.shape[:-2], n_runs)
