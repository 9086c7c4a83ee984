"""The audit harness: attack statistics, and one report type for every audit of the book.

An audit (:mod:`fedbandit.audit.epsilon`) turns an attack's true- and false-positive rates on
two neighbouring inputs into a Clopper–Pearson lower bound on ε.  The attack statistics:

* :class:`KnownProjection` -- the likelihood-ratio statistic where the noise law is known
  and isotropic: the view projected on the known change between the neighbours (optimal
  for Gaussian noise of equal variance per entry; the discrete Gaussian likewise, up to its
  closeness to a Gaussian);
* :class:`LearnedProjection` -- a generic *fitted* statistic for views whose change is not
  known in advance (end-to-end audits through an adaptive learner): the direction
  (mean₁ − mean₀)/variance per feature (a diagonal linear discriminant) is learned on the
  selection trials, which the audit then does not count
  (:func:`fedbandit.audit.epsilon.audit_epsilon_split` fits it).

:class:`AuditReport` is what every audit returns: the claim (ε, status, relation, δ), the
bound, its ratio to the claim, the attack, and the power check -- the same audit run on a
deliberately broken variant (:mod:`fedbandit.audit.broken`), whose bound must exceed the
claim for the audit to mean anything.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from fedbandit._validation import check_array, check_instance, check_int_array, check_positive_int
from fedbandit.accounting.accountant import Accounting
from fedbandit.audit.epsilon import AuditResult

__all__ = [
    "KnownProjection",
    "LearnedProjection",
    "AuditReport",
    "claim_of",
]


def _vector(name, value) -> np.ndarray:
    if isinstance(value, (str, bytes, dict, set)):
        raise TypeError(f"{name} must be a finite vector, got {value!r:.80}")
    return check_array(name, value, dtype=float).reshape(-1)


class KnownProjection:
    """Attack statistic ⟨view, u⟩ for a known change ``u`` between the neighbours.

    With the view = (world-0 mean) + 1[world 1]·u + N(0, s² I), the log-likelihood ratio is
    an increasing function of ⟨view, u⟩: thresholding it is the optimal (Neyman–Pearson)
    test.  ``offset`` (the world-0 mean) only shifts the statistic.
    """

    def __init__(self, direction, offset=None):
        self.direction = _vector("direction", direction)
        if self.direction.size == 0:
            raise ValueError("direction must be a non-empty finite vector")
        self.offset = None if offset is None else _vector("offset", offset)
        if self.offset is not None and self.offset.size not in (1, self.direction.size):
            raise ValueError(f"offset must have the size of direction ({self.direction.size}), got {self.offset.size}")

    def __call__(self, batch):
        b = np.asarray(batch, dtype=float).reshape(len(batch), -1)
        if self.offset is not None:
            b = b - self.offset
        return b @ self.direction


class LearnedProjection:
    """A fitted linear attack (a linear discriminant), statistic ⟨view − centre, w⟩.

    :meth:`fit` (called by :func:`fedbandit.audit.epsilon.audit_epsilon_split` on the
    selection trials) estimates the two worlds' mean views m₀, m₁ and their pooled
    covariance Σ: w = Σ⁻¹(m₁ − m₀) when the view has at most ``full_up_to`` features (the
    optimal linear test for Gaussian views, which handles correlated releases such as
    prefix sums), else the diagonal version w = (m₁ − m₀)/diag(Σ).  Features that are
    constant in both worlds but differ between them (an exact, non-private release) get the
    largest weights, so a deterministic leak is found.  ``features`` optionally restricts
    the view to given columns.
    """

    def __init__(self, features=None, *, full_up_to=64):
        if features is not None:
            if isinstance(features, (str, bytes, dict, set)):
                raise TypeError(f"features must be column indices (ints), got {features!r:.80}")
            features = check_int_array("features", features, low=None)
        self.features = features
        self.full_up_to = check_positive_int("full_up_to", full_up_to, max_value=10**5,
                                             reason="the full covariance has full_up_to^2 entries")
        self.w = None
        self.center = None

    def _x(self, batch):
        b = np.asarray(batch, dtype=float)
        b = b.reshape(b.shape[0], -1)
        return b if self.features is None else b[:, self.features]

    def fit(self, outputs0, outputs1):
        x0, x1 = self._x(outputs0), self._x(outputs1)
        if x0.shape[1] != x1.shape[1] or x0.shape[1] == 0:
            raise ValueError(f"the two worlds' views must have the same positive width, got {x0.shape} and {x1.shape}")
        m0, m1 = x0.mean(axis=0), x1.mean(axis=0)
        var = 0.5 * (x0.var(axis=0) + x1.var(axis=0))
        diff = m1 - m0
        scale = max(float(np.max(var)), 1.0)
        floor = 1e-12 * scale
        w = diff / np.maximum(var, floor)
        w[~np.isfinite(w)] = 0.0
        F = diff.size
        if 1 < F <= self.full_up_to and min(len(x0), len(x1)) > 2 * F and np.all(var > floor):
            cov = 0.5 * (np.cov(x0, rowvar=False) + np.cov(x1, rowvar=False))
            try:
                w = np.linalg.solve(cov + 1e-9 * scale * np.eye(F), diff)
            except np.linalg.LinAlgError:
                pass
        if not np.any(w):
            w = np.zeros_like(diff)
            w[0] = 1.0  # no separation on the selection trials: any fixed direction
        self.w = w
        self.center = 0.5 * (m0 + m1)
        return self

    def __call__(self, batch):
        if self.w is None:
            raise RuntimeError("LearnedProjection must be fitted (on selection trials) before use")
        return (self._x(batch) - self.center) @ self.w


def claim_of(accounting) -> tuple[float, str]:
    """(ε claimed, status) of an :class:`~fedbandit.accounting.Accounting` (or its dict).

    The claim an audit is compared with: the accounted ε when it is verified or claimed by
    a theorem, the target ε when the status is "unproven" or "invalid" (what the protocol
    asked for and does not establish), ∞ without privacy.
    """
    acc = accounting if isinstance(accounting, dict) else check_instance(
        "accounting", accounting, (Accounting, dict), "an Accounting or its dict").as_dict()
    if not {"status", "epsilon", "target_epsilon"} <= set(acc):
        raise ValueError(f"accounting must have the keys status, epsilon and target_epsilon, got {sorted(acc)}")
    status = acc["status"]
    if status == "none":
        return math.inf, status
    eps = float(acc["epsilon"])
    if status in ("verified", "claimed") and math.isfinite(eps):
        return eps, status
    return float(acc["target_epsilon"]), status


@dataclass(frozen=True)
class AuditReport:
    """One audit: the claim, the audited lower bound, and the power check on a broken variant.

    Attributes
    ----------
    name : str
        What was audited ("fixed-batch/silo-ldp", ...).
    kind : {"tight", "end-to-end", "schedule", "deshuffle"}
        A known-optimal-test audit of the releases containing the target user, an audit of
        a whole run through the real learner, DP20's schedule attack, or the de-shuffling
        attack on a shuffle protocol (:mod:`fedbandit.audit.deshuffle`).
    view, attack : str
        What the adversary sees, and the statistic.
    relation : {"add-remove", "replace"}
    claimed_epsilon, delta : float
        The claim (see :func:`claim_of`) and its δ; ``status`` is its accounting status.
    result : AuditResult
        The audit of the protocol or learner as run.
    broken : str
        The broken variant of the power check ("" if none: a non-private or already
        refuted mechanism needs none).
    broken_result : AuditResult or None
    exact_epsilon : float
        Where the law of the attacked releases is known: their exact ε at δ (the most any
        audit of them can find), else NaN.
    first_release_epsilon : float
        Tight audits: the exact ε of the first release alone (NaN otherwise).
    n_trials, confidence
    seconds, cpu_seconds : float
        Wall-clock and CPU (``time.process_time``) time of the audit.
    noise_check_p, noise_check_alpha : float
        Audits of a known law: the p-value of the goodness-of-fit test of the noise the
        implementation released against the declared law, and its false-alarm rate; below
        it the law is rejected (:attr:`noise_law_rejected`) and the audit does not pass.
        NaN where no law is checked.
    noise_ratio, noise_ratio_upper : float
        The measured noise of the implementation over the declared one, and the upper
        confidence bound the trials were drawn at (NaN where not measured).
    check_runs : int
        Runs of the implementation in the law check (0: none).
    """

    name: str
    kind: str
    view: str
    attack: str
    relation: str
    claimed_epsilon: float
    delta: float
    status: str
    result: AuditResult
    broken: str = ""
    broken_result: AuditResult | None = None
    exact_epsilon: float = math.nan
    first_release_epsilon: float = math.nan
    n_trials: int = 0
    confidence: float = 0.95
    seconds: float = math.nan
    cpu_seconds: float = math.nan
    noise_check_p: float = math.nan
    noise_check_alpha: float = math.nan
    noise_ratio: float = math.nan
    noise_ratio_upper: float = math.nan
    check_runs: int = 0

    @property
    def epsilon_lower(self) -> float:
        return self.result.epsilon_lower

    @property
    def ratio(self) -> float:
        """Audited bound / claimed ε (0 for an infinite claim)."""
        c = self.claimed_epsilon
        if not math.isfinite(c) or c <= 0:
            return math.nan if c == 0 else 0.0
        return self.result.epsilon_lower / c

    @property
    def noise_law_rejected(self) -> bool:
        """The implementation's released noise failed the goodness-of-fit test of the declared law."""
        return bool(self.noise_check_p < self.noise_check_alpha)

    @property
    def consistent(self) -> bool:
        """The audit passes: it does not refute the claim (bound ≤ claimed ε) and, where a noise
        law is checked, the implementation's noise is not rejected."""
        return self.result.epsilon_lower <= self.claimed_epsilon * (1 + 1e-9) and not self.noise_law_rejected

    @property
    def refutes(self) -> bool:
        """The audit proves the claim false for the code (bound > claimed ε, or the released
        noise is not the declared law), with the stated confidence / false-alarm rate."""
        return not self.consistent

    @property
    def power_shown(self) -> bool:
        """The broken variant's bound exceeds the claim (the attack can see a violation)."""
        return self.broken_result is not None and self.broken_result.epsilon_lower > self.claimed_epsilon

    def as_dict(self) -> dict:
        out = {k: v for k, v in asdict(self).items() if k not in ("result", "broken_result")}
        out.update(epsilon_lower=self.epsilon_lower, ratio=self.ratio, consistent=self.consistent,
                   tpr=self.result.tpr, fpr=self.result.fpr,
                   broken_epsilon_lower=math.nan if self.broken_result is None else self.broken_result.epsilon_lower,
                   power_shown=self.power_shown, noise_law_rejected=self.noise_law_rejected)
        return out


def worlds_relation(a, b) -> bool:
    """The audits' neighbouring relation on labelled inputs: ``(name, 0)`` and ``(name, 1)``, the two worlds of one input."""
    return isinstance(a, tuple) and isinstance(b, tuple) and a[0] == b[0] and {a[1], b[1]} == {0, 1}
