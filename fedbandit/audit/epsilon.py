"""Empirical privacy auditing: lower bounds on epsilon from a distinguishing attack.

A mechanism ``A`` is (epsilon, delta)-DP when, for every pair of neighbouring datasets
``D0 ~ D1`` and every set ``S`` of outputs,

.. math:: P[A(D1) \\in S] \\le e^{\\varepsilon} P[A(D0) \\in S] + \\delta .

An *attack* picks ``S = {output : statistic(output) > threshold}``.  Running the mechanism
``n`` times on each dataset gives the attack's true-positive rate ``TPR = P[A(D1) in S]``
and false-positive rate ``FPR = P[A(D0) in S]``; DP forces

.. math:: \\varepsilon \\ge \\ln\\frac{TPR - \\delta}{FPR}
          \\quad\\text{and}\\quad
          \\varepsilon \\ge \\ln\\frac{1 - FPR - \\delta}{1 - TPR}

(the second is the first for the complementary set and the datasets swapped).  Replacing
``TPR`` by a one-sided Clopper–Pearson lower bound and ``FPR`` by an upper bound, each at
level ``(1 - confidence)/2``, turns the estimate into a lower bound on epsilon that holds
with probability at least ``confidence`` (union bound over the two intervals), whatever
the mechanism: an audit can prove a privacy claim false, never true.  This is the standard
recipe of empirical DP auditing (e.g. Jagielski, Ullman & Oprea 2020; Nasr et al. 2021).

The threshold must not be chosen on the trials that are then counted (that would bias the
bound upward): :func:`audit_epsilon_split` chooses it on a separate set of trials with
:func:`select_threshold`, then audits on fresh ones.

Trials can run in-process (optionally *vectorized*: the mechanism draws ``n`` outputs at
once) or through :func:`fedbandit.experiments.grid.run_grid` (``backend=...``), which spreads
chunks of trials over workers and can cache them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import stats as _stats

from fedbandit._grid import run_grid
from fedbandit._validation import (
    MAX_COUNT,
    MAX_STEPS,
    check_array,
    check_bool,
    check_callable,
    check_float_in_range,
    check_int_in_range,
    check_nonnegative_int,
    check_positive_int,
    check_probability,
    check_rng,
)

__all__ = [
    "AuditResult",
    "audit_epsilon",
    "audit_epsilon_split",
    "epsilon_lower_bound",
    "clopper_pearson",
    "min_trials",
    "select_threshold",
    "sample_statistics",
    "is_neighbouring",
    "NEIGHBOURING_RELATIONS",
]

#: Named neighbouring relations accepted by ``neighbouring=``.
NEIGHBOURING_RELATIONS = ("replace_one", "add_remove_one")


@dataclass(frozen=True)
class AuditResult:
    """Outcome of an audit.

    Attributes
    ----------
    epsilon_lower : float
        Lower bound on epsilon valid with probability ``confidence`` (0 when the attack
        does not separate the datasets).
    tpr, fpr : float
        Empirical true/false-positive rates of the attack.
    tpr_ci, fpr_ci : tuple of float
        ``(lower, upper)`` Clopper–Pearson bounds; the audit uses ``tpr_ci[0]`` and
        ``fpr_ci[1]``, each one-sided at level ``(1 - confidence)/2``.
    epsilon_point : float
        The plug-in estimate ``max(ln((tpr - delta)/fpr), ln((1 - fpr - delta)/(1 - tpr)))``
        (may be inf; not a bound).
    n_trials, threshold, delta, confidence
        The audit's settings.
    """

    epsilon_lower: float
    tpr: float
    fpr: float
    tpr_ci: tuple
    fpr_ci: tuple
    epsilon_point: float
    n_trials: int
    threshold: float
    delta: float
    confidence: float


def clopper_pearson(k: int, n: int, alpha: float) -> tuple[float, float]:
    """One-sided Clopper–Pearson bounds ``(lower, upper)`` for a binomial proportion.

    ``lower`` holds with probability ``>= 1 - alpha`` and so does ``upper`` (each one-sided).
    """
    n = check_positive_int("n", n, max_value=MAX_COUNT, reason="trial counts are int64")
    k = check_nonnegative_int("k", k)
    if not k <= n:
        raise ValueError(f"k must lie in [0, n={n}], got {k!r}")
    alpha = check_probability("alpha", alpha)
    return float(_cp_lower(np.array([k]), n, alpha)[0]), float(_cp_upper(np.array([k]), n, alpha)[0])


def _cp_lower(k: np.ndarray, n: int, alpha: float) -> np.ndarray:
    """The one-sided Clopper–Pearson lower bounds of counts ``k`` (int array) out of ``n``: 0 at k = 0."""
    lo = np.zeros(k.shape)
    some = k > 0
    if some.any():
        lo[some] = _stats.beta.ppf(alpha, k[some], n - k[some] + 1)
    return lo


def _cp_upper(k: np.ndarray, n: int, alpha: float) -> np.ndarray:
    """The one-sided Clopper–Pearson upper bounds of counts ``k`` (int array) out of ``n``: 1 at k = n."""
    hi = np.ones(k.shape)
    short = k < n
    if short.any():
        hi[short] = _stats.beta.ppf(1 - alpha, k[short] + 1, n - k[short])
    return hi


def _eps_from_rates(tpr: float, fpr: float, delta: float) -> float:
    def safe_log_ratio(num, den):
        if num <= 0:
            return -math.inf
        if den <= 0:
            return math.inf
        return math.log(num / den)

    return max(safe_log_ratio(tpr - delta, fpr), safe_log_ratio(1 - fpr - delta, 1 - tpr))


def min_trials(confidence: float = 0.95, delta: float = 0.0) -> int:
    """Smallest number of trials per dataset that can give a positive bound.

    With ``n`` trials the best possible outcome (every trial on ``D1`` flagged, none on
    ``D0``) gives ``TPR_lo = q`` and ``FPR_hi = 1 - q`` with ``q = ((1 - confidence)/2)^{1/n}``;
    the bound is positive only if ``q - delta > 1 - q``.
    """
    confidence = check_probability("confidence", confidence)
    delta = check_float_in_range("delta", delta, 0.0, 1.0, high_inclusive=False)
    a = (1 - confidence) / 2
    # n > ln(a) / ln((1 + delta)/2)
    half = (1 + delta) / 2
    # (for δ within 1e-16 of 1, (1 + δ)/2 rounds to 1: log1p keeps the exact value)
    n = math.log(a) / (math.log(half) if half < 1.0 else math.log1p((delta - 1) / 2))
    return max(1, math.floor(n) + 1)


def epsilon_lower_bound(
    k1: int, n1: int, k0: int, n0: int, *, delta: float = 0.0, confidence: float = 0.95, slack: float = 0.0
) -> tuple[float, tuple, tuple]:
    """Epsilon lower bound from attack counts.

    Parameters
    ----------
    k1, n1 : int
        Number of trials on ``D1`` flagged by the attack, and trials on ``D1``.
    k0, n0 : int
        Same on ``D0`` (false positives).
    delta : float in [0, 1)
        The delta of the claim being audited.
    confidence : float in (0, 1)
        Probability with which the returned bound holds.
    slack : float in [0, 1), default 0
        A bound on the total-variation distance between the law the trials were drawn from
        and the mechanism's (for trials drawn from an approximation of it, e.g. a sum of
        discrete Gaussians drawn as one discrete Gaussian): the TPR bound is lowered and
        the FPR bound raised by ``slack`` before ε is computed, so the bound stays valid
        for the mechanism itself.

    Returns
    -------
    (epsilon_lower, tpr_ci, fpr_ci)
    """
    confidence = check_probability("confidence", confidence)
    delta = check_float_in_range("delta", delta, 0.0, 1.0, high_inclusive=False)
    slack = check_float_in_range("slack", slack, 0.0, 1.0, high_inclusive=False)
    n1 = check_positive_int("n1", n1, max_value=MAX_COUNT, reason="trial counts are int64")
    n0 = check_positive_int("n0", n0, max_value=MAX_COUNT, reason="trial counts are int64")
    k1, k0 = check_int_in_range("k1", k1, 0, n1), check_int_in_range("k0", k0, 0, n0)
    alpha = (1 - confidence) / 2
    tpr_ci = clopper_pearson(k1, n1, alpha)
    fpr_ci = clopper_pearson(k0, n0, alpha)
    if slack:
        tpr_ci = (max(0.0, tpr_ci[0] - slack), min(1.0, tpr_ci[1] + slack))
        fpr_ci = (max(0.0, fpr_ci[0] - slack), min(1.0, fpr_ci[1] + slack))
    eps = _eps_from_rates(tpr_ci[0], fpr_ci[1], delta)
    return max(0.0, eps), tpr_ci, fpr_ci


def _as_sequence(d, name="dataset"):
    if isinstance(d, np.ndarray):
        return list(d) if d.ndim > 0 else [d]
    if isinstance(d, (str, bytes, dict)):
        raise TypeError(f"{name} must be a sequence (list, tuple, array), got {type(d).__name__}")
    try:
        return list(d)
    except TypeError as exc:
        raise TypeError(f"{name} must be a sequence (list, tuple, array), got {type(d).__name__}") from exc


def _equal(a, b) -> bool:
    try:
        return bool(np.array_equal(np.asarray(a), np.asarray(b)))
    except Exception:  # objects numpy cannot compare: fall back to ==
        return bool(a == b)


def is_neighbouring(dataset0, dataset1, relation="replace_one") -> bool:
    """Whether two datasets are neighbours under ``relation``.

    ``"replace_one"``: same length, differ in at most one position (compared with
    ``numpy.array_equal``, so elements may be arrays).  ``"add_remove_one"``: one is the
    other with exactly one element removed.  A callable ``relation(d0, d1) -> bool`` is
    called as is.
    """
    if callable(relation):
        return bool(relation(dataset0, dataset1))
    if not (isinstance(relation, str) and relation in NEIGHBOURING_RELATIONS):
        raise ValueError(
            f"neighbouring (relation) must be one of {NEIGHBOURING_RELATIONS!r} or a callable, got {relation!r:.80}"
        )
    a, b = _as_sequence(dataset0, "dataset0"), _as_sequence(dataset1, "dataset1")
    if relation == "replace_one":
        if len(a) != len(b):
            return False
        return sum(not _equal(x, y) for x, y in zip(a, b)) <= 1
    if abs(len(a) - len(b)) != 1:
        return False
    long_, short = (a, b) if len(a) > len(b) else (b, a)
    i = 0
    while i < len(short) and _equal(long_[i], short[i]):
        i += 1
    return all(_equal(long_[j + 1], short[j]) for j in range(i, len(short)))


def sample_statistics(mechanism, dataset, statistic, n: int, rng, *, vectorized: bool = False) -> np.ndarray:
    """Run ``mechanism`` ``n`` times on ``dataset`` and return the ``n`` statistic values.

    In vectorized mode ``mechanism(dataset, rng, n)`` returns a batch of ``n`` outputs and
    ``statistic(batch)`` an array of ``n`` values; otherwise ``mechanism(dataset, rng)``
    returns one output and ``statistic(output)`` one number.
    """
    mechanism = check_callable("mechanism", mechanism)
    statistic = check_callable("statistic", statistic)
    rng = check_rng("rng", rng)
    n = check_positive_int("n", n, max_value=MAX_STEPS, reason="n outputs are collected")
    vectorized = check_bool("vectorized", vectorized)
    if vectorized:
        values = np.asarray(statistic(mechanism(dataset, rng, n)), dtype=float).reshape(-1)
        if values.size != n:
            raise ValueError(f"vectorized statistic returned {values.size} values, expected n={n}")
        return values
    return np.array([float(statistic(mechanism(dataset, rng))) for _ in range(n)])


class _AuditChunk:
    """``func(config, rng)`` for run_grid: one chunk of trials on one dataset."""

    def __init__(self, mechanism, datasets, statistic, vectorized, raw=False):
        self.mechanism = mechanism
        self.datasets = datasets
        self.statistic = statistic
        self.vectorized = vectorized
        self.raw = raw

    def __call__(self, config, rng):
        if self.raw:
            return np.asarray(self.mechanism(self.datasets[config["dataset"]], rng, config["n"]))
        return sample_statistics(
            self.mechanism,
            self.datasets[config["dataset"]],
            self.statistic,
            config["n"],
            rng,
            vectorized=self.vectorized,
        )


def _collect(mechanism, dataset0, dataset1, statistic, n, rng, vectorized, backend, n_jobs, cache_dir, cache_key,
             n_chunks, stage, raw=False):
    if backend is None:
        s0 = sample_statistics(mechanism, dataset0, statistic, n, rng, vectorized=vectorized)
        s1 = sample_statistics(mechanism, dataset1, statistic, n, rng, vectorized=vectorized)
        return s0, s1

    if cache_dir not in (None, False) and cache_key is None:
        raise ValueError("cache_key is required with cache_dir: it must identify the mechanism and attack")
    n_chunks = n_chunks or 8
    sizes = [n // n_chunks + (1 if c < n % n_chunks else 0) for c in range(n_chunks)]
    # The rng still matters: its draw becomes the base seed, so two audits with different
    # rngs use independent trials even with identical configurations.
    base_seed = int(rng.integers(0, 2**62))
    configs = [
        {"audit": cache_key or "uncached", "stage": stage, "dataset": d, "chunk": c, "n": s}
        for d in (0, 1)
        for c, s in enumerate(sizes)
        if s > 0
    ]
    func = _AuditChunk(mechanism, (dataset0, dataset1), statistic, vectorized, raw)
    res = run_grid(
        func,
        configs,
        seeds=1,
        cache_dir=False if cache_dir is None else cache_dir,
        backend=backend,
        n_jobs=n_jobs,
        version=str(cache_key),
        progress=False,
        base_seed=base_seed,
    )
    s0 = np.concatenate([r[0] for r, cfg in zip(res, configs) if cfg["dataset"] == 0])
    s1 = np.concatenate([r[0] for r, cfg in zip(res, configs) if cfg["dataset"] == 1])
    return s0, s1


def _validate_common(mechanism, statistic, dataset0, dataset1, n_trials, delta, confidence, neighbouring):
    if not callable(mechanism):
        raise TypeError(f"mechanism must be callable as mechanism(dataset, rng), got {mechanism!r}")
    if not callable(statistic):
        raise TypeError(f"statistic must be callable, got {statistic!r}")
    confidence = check_probability("confidence", confidence)
    delta = check_float_in_range("delta", delta, 0.0, 1.0, high_inclusive=False)
    n_trials = check_positive_int("n_trials", n_trials, max_value=MAX_STEPS, reason="n_trials outputs are collected")
    need = min_trials(confidence, delta)
    if n_trials < need:
        raise ValueError(
            f"n_trials={n_trials} is too few for confidence={confidence} and delta={delta}: at least "
            f"{need} trials per dataset are needed for any positive bound"
        )
    relation = "replace_one" if neighbouring is None else neighbouring
    if not is_neighbouring(dataset0, dataset1, relation):
        name = relation if isinstance(relation, str) else getattr(relation, "__name__", "callable")
        raise ValueError(f"dataset0 and dataset1 are not neighbouring under neighbouring={name!r}")
    return n_trials, delta, confidence


def _result(s0, s1, threshold, delta, confidence, n_trials, slack=0.0):
    k1 = int(np.count_nonzero(s1 > threshold))
    k0 = int(np.count_nonzero(s0 > threshold))
    eps, tpr_ci, fpr_ci = epsilon_lower_bound(k1, s1.size, k0, s0.size, delta=delta, confidence=confidence,
                                              slack=slack)
    tpr, fpr = k1 / s1.size, k0 / s0.size
    return AuditResult(
        epsilon_lower=eps,
        tpr=tpr,
        fpr=fpr,
        tpr_ci=tpr_ci,
        fpr_ci=fpr_ci,
        epsilon_point=_eps_from_rates(tpr, fpr, delta),
        n_trials=n_trials,
        threshold=float(threshold),
        delta=delta,
        confidence=confidence,
    )


def audit_epsilon(
    mechanism: Callable,
    dataset0,
    dataset1,
    statistic: Callable,
    threshold: float,
    n_trials: int,
    *,
    delta: float = 0.0,
    confidence: float = 0.95,
    rng,
    neighbouring=None,
    vectorized: bool = False,
    backend: str | None = None,
    n_jobs: int | None = None,
    cache_dir=None,
    cache_key: str | None = None,
    n_chunks: int | None = None,
) -> AuditResult:
    """Audit ``mechanism`` with the attack ``statistic(output) > threshold``.

    Parameters
    ----------
    mechanism : callable
        ``mechanism(dataset, rng) -> output`` (or, with ``vectorized=True``,
        ``mechanism(dataset, rng, n) -> batch of n outputs``).
    dataset0, dataset1 : sequence
        Neighbouring datasets; the attack flags ``dataset1``.
    statistic : callable
        ``statistic(output) -> float`` (vectorized: ``statistic(batch) -> array (n,)``).
    threshold : float
        The attack says "dataset1" when ``statistic > threshold``.
    n_trials : int
        Trials per dataset; at least :func:`min_trials` ``(confidence, delta)``.
    delta : float in [0, 1), default 0
        The delta of the (epsilon, delta) claim being audited.
    confidence : float in (0, 1), default 0.95
        Probability with which ``epsilon_lower`` is a valid lower bound.
    rng : numpy.random.Generator
        Source of randomness (keyword-only, required).
    neighbouring : {"replace_one", "add_remove_one"} or callable, default "replace_one"
        Relation the datasets must satisfy (checked before any trial).
    vectorized : bool, default False
        Whether the mechanism draws ``n`` outputs per call.
    backend : {"serial", "joblib", "dask"}, optional
        Run the trials through :func:`fedbandit.experiments.grid.run_grid` in ``n_chunks``
        chunks per dataset (default 8); ``None`` runs them here.
    n_jobs, cache_dir, cache_key
        Passed to ``run_grid``; caching needs a ``cache_key`` naming the mechanism and
        attack (everything the trials depend on), because the mechanism is code, not
        configuration.

    Returns
    -------
    AuditResult

    Raises
    ------
    ValueError
        If the datasets are not neighbouring, ``n_trials`` is too small for the
        requested confidence, or ``confidence`` / ``delta`` are out of range.
    """
    n_trials, delta, confidence = _validate_common(
        mechanism, statistic, dataset0, dataset1, n_trials, delta, confidence, neighbouring
    )
    threshold = check_float_in_range("threshold", threshold, -math.inf, math.inf)
    rng = check_rng("rng", rng)
    vectorized = check_bool("vectorized", vectorized)
    s0, s1 = _collect(mechanism, dataset0, dataset1, statistic, n_trials, rng, vectorized, backend, n_jobs,
                      cache_dir, cache_key, n_chunks, "audit")
    return _result(s0, s1, threshold, delta, confidence, n_trials)


def select_threshold(stats0, stats1, *, delta: float = 0.0, confidence: float = 0.95, n_candidates: int = 200,
                     slack: float = 0.0) -> float:
    """Threshold maximizing the epsilon lower bound on a *selection* split.

    Candidates are quantiles of the pooled statistics -- ``n_candidates`` evenly spaced ones
    and, for large splits, geometrically spaced ones in both tails down to a few trials
    (the optimal threshold of a tight audit sits where the false-positive rate is small);
    each is scored by the Clopper–Pearson bound it would give on these trials.  Use the
    returned threshold on fresh trials (:func:`audit_epsilon_split` does), never on the
    same ones.
    """
    s0 = check_array("stats0", stats0, finite=False).reshape(-1)
    s1 = check_array("stats1", stats1, finite=False).reshape(-1)
    if s0.size == 0 or s1.size == 0:
        raise ValueError("stats0 and stats1 must be non-empty")
    n_candidates = check_positive_int("n_candidates", n_candidates, max_value=10**6, reason="each is scored")
    pooled = np.concatenate([s0, s1])
    q = np.linspace(0.0, 1.0, n_candidates + 2)[1:-1]
    low = 5.0 / pooled.size
    if low < q[0]:
        tail = np.geomspace(low, q[0], 40)
        q = np.concatenate([tail, q, 1.0 - tail])
    cand = np.quantile(pooled, q)
    # where the two splits do not overlap, the gap's middle separates them perfectly
    gaps = [(s0.max() + s1.min()) / 2.0, (s1.max() + s0.min()) / 2.0]
    cand = np.unique(np.concatenate([cand, gaps]))
    # every candidate scored as epsilon_lower_bound scores it, with the two Clopper–Pearson bounds it reads
    # computed for all candidates in one call each (clopper_pearson's own _cp_lower and _cp_upper)
    confidence = check_probability("confidence", confidence)
    delta = check_float_in_range("delta", delta, 0.0, 1.0, high_inclusive=False)
    slack = check_float_in_range("slack", slack, 0.0, 1.0, high_inclusive=False)
    k0 = s0.size - np.searchsorted(np.sort(s0), cand, side="right")
    k1 = s1.size - np.searchsorted(np.sort(s1), cand, side="right")
    alpha = (1 - confidence) / 2
    tpr_lo, fpr_hi = _cp_lower(k1, s1.size, alpha), _cp_upper(k0, s0.size, alpha)
    best, best_t = -1.0, float(cand[0])
    for t, lo, hi in zip(cand.tolist(), tpr_lo.tolist(), fpr_hi.tolist()):
        if slack:
            lo, hi = max(0.0, lo - slack), min(1.0, hi + slack)
        eps = max(0.0, _eps_from_rates(lo, hi, delta))
        if eps > best:
            best, best_t = eps, t
    return best_t


class _Outputs:
    """The identity statistic of the selection stage of a fitted attack (keeps the mechanism's outputs)."""

    def __call__(self, batch):
        return batch


def audit_epsilon_split(
    mechanism: Callable,
    dataset0,
    dataset1,
    statistic: Callable,
    n_trials: int,
    *,
    n_select: int | None = None,
    delta: float = 0.0,
    confidence: float = 0.95,
    rng,
    neighbouring=None,
    vectorized: bool = False,
    backend: str | None = None,
    n_jobs: int | None = None,
    cache_dir=None,
    cache_key: str | None = None,
    n_chunks: int | None = None,
    slack: float = 0.0,
) -> AuditResult:
    """Choose the threshold on ``n_select`` trials, then audit on ``n_trials`` fresh ones.

    ``n_select`` defaults to ``n_trials // 4``.  The bound stays valid because the
    counted trials are independent of the threshold.  Other parameters as in
    :func:`audit_epsilon`.

    A *fitted* attack: when ``statistic`` has a method ``fit(outputs0, outputs1)`` (for
    example :class:`fedbandit.audit.harness.LearnedProjection`), the selection trials'
    outputs (vectorized: arrays with the trials on axis 0) are first given to it -- the
    attack learns its direction from them -- and the threshold is then chosen on the same
    selection trials; the counted trials are fresh, so the bound stays valid.  ``slack``
    (see :func:`epsilon_lower_bound`) covers trials drawn from an approximation of the
    mechanism's law.
    """
    n_trials, delta, confidence = _validate_common(
        mechanism, statistic, dataset0, dataset1, n_trials, delta, confidence, neighbouring
    )
    n_select = max(1, n_trials // 4) if n_select is None else check_positive_int(
        "n_select", n_select, max_value=MAX_STEPS, reason="n_select outputs are collected")
    need = min_trials(confidence, delta)
    if n_select < need:
        raise ValueError(
            f"n_select={n_select} (the threshold-selection trials; default n_trials // 4) is too few for "
            f"confidence={confidence} and delta={delta}: at least {need} are needed; raise n_trials or n_select"
        )
    slack = check_float_in_range("slack", slack, 0.0, 1.0, high_inclusive=False)
    rng = check_rng("rng", rng)
    vectorized = check_bool("vectorized", vectorized)
    key = None if cache_key is None else f"{cache_key}|select"
    fitted = callable(getattr(statistic, "fit", None))
    if fitted:
        if not vectorized:
            raise ValueError("a fitted statistic (with a fit method) needs vectorized=True: it learns from output arrays")
        o0, o1 = _collect_outputs(mechanism, dataset0, dataset1, n_select, rng, backend, n_jobs, cache_dir, key,
                                  n_chunks)
        statistic.fit(o0, o1)
        a0 = np.asarray(statistic(o0), dtype=float).reshape(-1)
        a1 = np.asarray(statistic(o1), dtype=float).reshape(-1)
    else:
        a0, a1 = _collect(mechanism, dataset0, dataset1, statistic, n_select, rng, vectorized, backend, n_jobs,
                          cache_dir, key, n_chunks, "select")
    threshold = select_threshold(a0, a1, delta=delta, confidence=confidence, slack=slack)
    s0, s1 = _collect(mechanism, dataset0, dataset1, statistic, n_trials, rng, vectorized, backend, n_jobs,
                      cache_dir, cache_key, n_chunks, "audit")
    return _result(s0, s1, threshold, delta, confidence, n_trials, slack)


def _collect_outputs(mechanism, dataset0, dataset1, n, rng, backend, n_jobs, cache_dir, cache_key, n_chunks):
    """The selection trials' raw outputs (arrays, trials on axis 0), in-process or through run_grid."""
    if backend is None:
        return (np.asarray(mechanism(dataset0, rng, n)), np.asarray(mechanism(dataset1, rng, n)))
    return _collect(mechanism, dataset0, dataset1, _Outputs(), n, rng, True, backend, n_jobs, cache_dir, cache_key,
                    n_chunks, "select", raw=True)
