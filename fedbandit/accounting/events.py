"""Privacy events: what a protocol released, apart from how its privacy is computed.

Modelled on ``dp_accounting.dp_event``: a mechanism or protocol describes each release
as a small frozen object -- a Gaussian release at a given ℓ2 sensitivity and noise, a sum
of discrete Gaussians, a shuffled randomized response, a claim of a cited theorem, a
self-composition of κ such releases -- and :func:`fedbandit.accounting.account` turns
the event into (ε, δ) with a status ("verified", "claimed", "unproven", "invalid",
"none").  Events hold no random state and no results; they can be built before a run.

Every event checks its fields when it is built (``ValueError`` / ``TypeError`` naming the
field, its value and the allowed range): a NaN, a negative ε or δ, a δ above 1 or a
``holds`` that is not a bool would otherwise come out of the accountant as a privacy
status.  ε = ∞ is allowed (no finite guarantee, e.g. a noise scale so small that
(Δ/σ)² overflows); the accountant never reports it as private.

Sensitivities in an event are for one *neighbouring relation*, which the event does not
know: the protocol that builds it states the relation, and
:class:`fedbandit.accounting.Accounting` records it.  :func:`record_sensitivities` gives
the ℓ2 sensitivities of one user's linear-bandit record under both relations.

References
----------
.. [BS16] M. Bun and T. Steinke, "Concentrated differential privacy", TCC 2016.
.. [KLS21] P. Kairouz, Z. Liu and T. Steinke, "The distributed discrete Gaussian
   mechanism for federated learning with secure aggregation", ICML 2021.
.. [BBGN19] B. Balle, J. Bell, A. Gascón and K. Nissim, "The privacy blanket of the
   shuffle model", CRYPTO 2019.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass, field

from fedbandit._validation import (
    check_bool,
    check_choice,
    check_epsilon,
    check_float_in_range,
    check_instance,
    check_nonnegative_float,
    check_positive_float,
    check_positive_int,
    check_probability,
    check_str,
)
from fedbandit.accounting.zcdp import over_sigma_squared

__all__ = [
    "RELATIONS",
    "check_relation",
    "record_sensitivities",
    "DpEvent",
    "NoReleaseEvent",
    "NonPrivateEvent",
    "GaussianEvent",
    "LaplaceEvent",
    "DiscreteGaussianSumEvent",
    "SampledDiscreteGaussianSumEvent",
    "ShuffledRandomizedResponseEvent",
    "ApproxDpEvent",
    "ClaimedEvent",
    "ConditionalEvent",
    "InvalidEvent",
    "SelfComposedEvent",
    "ComposedEvent",
]

#: Neighbouring relations: one user added or removed, or one user's record replaced.
RELATIONS = ("add-remove", "replace")


def check_relation(relation: object) -> str:
    """Validate a neighbouring relation name (one of :data:`RELATIONS`).

    Parameters
    ----------
    relation : str
        "add-remove" or "replace".

    Returns
    -------
    str
        ``relation``, checked.
    """
    return check_choice("relation", relation, RELATIONS)


def record_sensitivities(feature_bound: float, reward_bound: float, relation: str) -> tuple[float, float]:
    """ℓ2 sensitivities (Δ_bias, Δ_gram) of one user's record (x y, x xᵀ) with ‖x‖ ≤ L, |y| ≤ Y.

    Add/remove one user: ‖x y‖ ≤ LY and ‖x xᵀ‖_F = ‖x‖² ≤ L².  Replace one user's record
    by another: ‖x y − x′y′‖ ≤ 2LY and ‖x xᵀ − x′x′ᵀ‖_F² = ‖x‖⁴ + ‖x′‖⁴ − 2(xᵀx′)² ≤ 2L⁴,
    so √2·L² (the Gram difference of two unit vectors is at most √2 in Frobenius norm).
    The upper triangle of a Gram matrix has at most its Frobenius norm, so these bound
    the packed (bias, upper-triangle) releases too.

    Parameters
    ----------
    feature_bound : float
        L, the bound on ‖x‖.
    reward_bound : float
        Y, the bound on |y|.
    relation : {"add-remove", "replace"}
        The neighbouring relation.

    Returns
    -------
    (float, float)
        (Δ_bias, Δ_gram).
    """
    L = check_positive_float("feature_bound", feature_bound)
    Y = check_positive_float("reward_bound", reward_bound)
    relation = check_relation(relation)
    if relation == "add-remove":
        return L * Y, L**2
    return 2.0 * L * Y, math.sqrt(2.0) * L**2


def _check_event_epsilon(name: str, value: object) -> float:
    """An event's ε: a real number in [0, inf] (inf: no finite guarantee); NaN and negatives refused.

    An event is the accountant's input, so a NaN or a negative ε here would come out as a
    privacy status; it is refused where the event is built.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number in [0, inf], got {value!r:.80} of type {type(value).__name__}")
    v = float(value)
    if not v >= 0.0:  # also NaN
        raise ValueError(f"{name} must lie in [0, inf] (an event's epsilon), got {value!r}")
    return v


def _check_event_delta(name: str, value: object) -> float:
    """An event's δ: a real number in [0, 1]."""
    if isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isnan(value):
        raise ValueError(f"{name} must lie in [0, 1] (an event's delta), got {value!r}")
    return check_probability(name, value, open_interval=False)


def _check_event(name: str, value: object) -> "DpEvent":
    return check_instance(name, value, DpEvent, "a fedbandit.accounting.DpEvent")


@dataclass(frozen=True)
class DpEvent:
    """Base class of privacy events (what was released, not how private it is)."""

    def describe(self) -> str:  # pragma: no cover - every subclass overrides
        return type(self).__name__


@dataclass(frozen=True)
class NoReleaseEvent(DpEvent):
    """Nothing that depends on the data leaves the party (ε = 0).

    Attributes
    ----------
    reason : str, default "nothing is released"
        Why nothing is released (reported in the notes).
    """

    reason: str = "nothing is released"

    def __post_init__(self) -> None:
        check_str("reason", self.reason)

    def describe(self) -> str:
        return self.reason


@dataclass(frozen=True)
class NonPrivateEvent(DpEvent):
    """The data (or an exact function of it) is released: no privacy.

    Attributes
    ----------
    what : str, default "exact statistics"
        What is released.
    """

    what: str = "exact statistics"

    def __post_init__(self) -> None:
        check_str("what", self.what)

    def describe(self) -> str:
        return f"no privacy ({self.what})"


@dataclass(frozen=True)
class GaussianEvent(DpEvent):
    """One release with i.i.d. N(0, σ²) noise on a vector of ℓ2 sensitivity Δ: (Δ²/2σ²)-zCDP [BS16].

    Attributes
    ----------
    sensitivity : float
        Δ, the ℓ2 sensitivity.
    sigma : float
        σ, the noise's standard deviation.
    """

    sensitivity: float
    sigma: float

    def __post_init__(self) -> None:
        check_nonnegative_float("sensitivity", self.sensitivity)
        check_positive_float("sigma", self.sigma)

    @property
    def rho(self) -> float:
        """Δ²/(2σ²); +inf when σ² underflows (a tiny σ), not ZeroDivisionError."""
        return over_sigma_squared(self.sensitivity**2, 2.0, self.sigma, self.sigma**2)

    def describe(self) -> str:
        return f"Gaussian (Δ={self.sensitivity:.4g}, σ={self.sigma:.4g})"


@dataclass(frozen=True)
class LaplaceEvent(DpEvent):
    """One release with i.i.d. Laplace(b) noise on a vector of ℓ1 sensitivity Δ: (Δ/b)-DP.

    Attributes
    ----------
    sensitivity : float
        Δ, the ℓ1 sensitivity.
    scale : float
        b, the Laplace scale.
    """

    sensitivity: float
    scale: float

    def __post_init__(self) -> None:
        check_nonnegative_float("sensitivity", self.sensitivity)
        check_positive_float("scale", self.scale)

    def describe(self) -> str:
        return f"Laplace (Δ₁={self.sensitivity:.4g}, b={self.scale:.4g})"


@dataclass(frozen=True)
class DiscreteGaussianSumEvent(DpEvent):
    """The modular sum of ``n_parties`` clients' discrete Gaussians, as in [KLS21] Alg. 1.

    ``clip`` c, ``gamma`` γ, ``beta`` β, ``dim`` d (padded) and the per-party ``sigma``
    σ (original units) determine Δ₂ and the τ term of [KLS21] Thm. 1 / Prop. 14; the
    accountant uses :func:`fedbandit.accounting.ddg.ddg_rdp`.  ``sensitivity_factor`` scales
    Δ₂ (and Δ₁): 1 for adding or removing one (rounded) record, 2 for replacing it by
    another, since two independently rounded records, each of norm ≤ Δ₂, differ by ≤ 2Δ₂.

    Attributes
    ----------
    clip : float
        c, the clipping norm.
    gamma : float
        γ, the rounding grid.
    beta : float
        β of the conditional randomized rounding.
    dim : int
        d, the padded dimension.
    sigma : float
        σ, each party's noise scale (original units).
    n_parties : int
        The number of parties summed.
    sensitivity_factor : float, default 1.0
        1 (add/remove) or 2 (replace).
    """

    clip: float
    gamma: float
    beta: float
    dim: int
    sigma: float
    n_parties: int
    sensitivity_factor: float = 1.0

    def __post_init__(self) -> None:
        check_positive_float("clip", self.clip)
        check_positive_float("gamma", self.gamma)
        check_float_in_range("beta", self.beta, 0.0, 1.0, high_inclusive=False)
        check_positive_int("dim", self.dim)
        check_positive_float("sigma", self.sigma)
        check_positive_int("n_parties", self.n_parties)
        # a factor below 1 would understate the sensitivity (1: add/remove, 2: replace)
        f = check_positive_float("sensitivity_factor", self.sensitivity_factor)
        if f < 1.0:
            raise ValueError(f"sensitivity_factor must lie in [1, inf) (1: add/remove, 2: replace), got {f!r}")

    def describe(self) -> str:
        return f"sum of {self.n_parties} discrete Gaussians (σ={self.sigma:.4g}, γ={self.gamma:.3g}) [KLS21]"


@dataclass(frozen=True)
class SampledDiscreteGaussianSumEvent(DpEvent):
    r"""One round of the distributed discrete Gaussian on a Poisson sample of a population.

    Every one of ``population`` clients joins with probability ``sampling_rate``; ``shares``
    K noise shares of variance :math:`S^2/K` are dealt over the :math:`k` that join, each adding
    :math:`\mathcal N_{\mathbb Z}(0, m_j S^2/K)` for its :math:`m_j` shares to its rounded vector
    (``clip`` c, ``gamma`` γ, ``beta`` β, ``dim`` d give Δ₂), so that the sum's noise has
    standard deviation ``noise_std`` = Sγ per coordinate whatever :math:`k \le K`; secure
    aggregation reveals the sum.  Neighbouring populations differ by one client added or
    removed.  The accountant uses :func:`fedbandit.accounting.sampled_ddg.sampled_ddg_epsilon`
    (the sampled Gaussian that dominates it); wrap it in :class:`SelfComposedEvent` for the
    rounds.

    Parameters
    ----------
    clip, gamma, beta, dim : float, float, float, int
        c, γ, β and the padded dimension d (they give Δ₂).
    noise_std : float
        The sum's noise standard deviation per coordinate (original units).
    sampling_rate : float
        q.
    population : int
        N.
    shares : int
        K.
    """

    clip: float
    gamma: float
    beta: float
    dim: int
    noise_std: float
    sampling_rate: float
    population: int
    shares: int

    def __post_init__(self) -> None:
        check_positive_float("clip", self.clip)
        check_positive_float("gamma", self.gamma)
        check_float_in_range("beta", self.beta, 0.0, 1.0, high_inclusive=False)
        check_positive_int("dim", self.dim)
        check_positive_float("noise_std", self.noise_std)
        check_float_in_range("sampling_rate", self.sampling_rate, 0.0, 1.0, low_inclusive=False)
        check_positive_int("population", self.population)
        check_positive_int("shares", self.shares)

    def describe(self) -> str:
        return (f"Poisson-sampled sum of discrete Gaussian shares (q={self.sampling_rate:.4g} of {self.population}, "
                f"noise std {self.noise_std:.4g}, γ={self.gamma:.3g}) [KLS21; MTZ19]")


@dataclass(frozen=True)
class ShuffledRandomizedResponseEvent(DpEvent):
    """Shuffled binary randomized response of ``n_messages`` messages with flip probability p.

    One user's value moves at most ``group_size`` of its messages; each message is
    (ε_message, δ_message)-DP by the privacy-blanket bound [BBGN19]
    (:func:`fedbandit.accounting.shuffle.rr_shuffle_delta`), and group privacy gives the user's
    (ε, δ) (:func:`fedbandit.accounting.composition.group_budget`).

    Attributes
    ----------
    n_messages : int
        The messages shuffled together.
    p : float
        The flip probability.
    epsilon_message, delta_message : float
        Each message's (ε, δ) by the privacy-blanket bound.
    group_size : int, default 1
        How many messages one user's value moves.
    """

    n_messages: int
    p: float
    epsilon_message: float
    delta_message: float
    group_size: int = 1

    def __post_init__(self) -> None:
        check_positive_int("n_messages", self.n_messages)
        check_probability("p", self.p, open_interval=False)
        check_epsilon("epsilon_message", self.epsilon_message)
        _check_event_delta("delta_message", self.delta_message)
        check_positive_int("group_size", self.group_size)

    def describe(self) -> str:
        return f"shuffled randomized response, {self.n_messages} messages, p={self.p:.4g} [BBGN19]"


@dataclass(frozen=True)
class ApproxDpEvent(DpEvent):
    """A release known to be (ε, δ)-DP by the book's own accounting (composed basically).

    Attributes
    ----------
    epsilon, delta : float
        The release's (ε, δ).
    what : str, default ""
        What is released.
    """

    epsilon: float
    delta: float
    what: str = ""

    def __post_init__(self) -> None:
        _check_event_epsilon("epsilon", self.epsilon)
        _check_event_delta("delta", self.delta)
        check_str("what", self.what)

    def describe(self) -> str:
        return self.what or f"({self.epsilon:.4g}, {self.delta:.3g})-DP release"


@dataclass(frozen=True)
class ClaimedEvent(DpEvent):
    """A guarantee that holds by a cited theorem the book states but does not re-derive.

    ``conditions`` are the theorem's validity conditions (objects with ``holds`` and
    ``str()``); if one fails the status is "unproven".  ``necessary`` is an event whose
    *exact* ε is a lower bound on the protocol's ε (for example the server's sum of the
    shuffled messages); if it exceeds the target the status is "invalid".  ``unproven``
    marks a guarantee that no theorem covers (an idealized noise level).

    Attributes
    ----------
    epsilon, delta : float
        The claimed (ε, δ).
    theorem : str
        The citation.
    conditions : tuple, default ()
        The theorem's validity conditions.
    necessary : DpEvent, optional
        An event whose exact ε bounds the protocol's from below.
    unproven : str, default ""
        Why no theorem covers the setting, if none does.
    """

    epsilon: float
    delta: float
    theorem: str
    conditions: tuple = ()
    necessary: DpEvent | None = None
    unproven: str = ""

    def __post_init__(self) -> None:
        _check_event_epsilon("epsilon", self.epsilon)
        _check_event_delta("delta", self.delta)
        check_str("theorem", self.theorem)
        check_instance("conditions", self.conditions, tuple, "a tuple of conditions")
        for i, c in enumerate(self.conditions):
            if not hasattr(c, "holds"):
                raise TypeError(f"conditions[{i}] must have a 'holds' attribute (a Condition), got {c!r:.80}")
            check_bool(f"conditions[{i}].holds", c.holds)
        if self.necessary is not None:
            _check_event("necessary", self.necessary)
        check_str("unproven", self.unproven)

    def describe(self) -> str:
        return self.theorem


@dataclass(frozen=True)
class ConditionalEvent(DpEvent):
    """``event``'s accounting holds only under an assumption (for example clipped rewards).

    If ``holds`` is False the status becomes ``on_failure`` ("invalid" or "unproven") and
    ``assumption`` is reported in the notes.

    Attributes
    ----------
    event : DpEvent
        The release.
    assumption : str
        What its accounting assumes.
    holds : bool
        Whether the assumption holds.
    on_failure : {"invalid", "unproven"}, default "invalid"
        The status when it does not.
    """

    event: DpEvent
    assumption: str
    holds: bool
    on_failure: str = "invalid"

    def __post_init__(self) -> None:
        _check_event("event", self.event)
        check_str("assumption", self.assumption)
        # a real bool: NaN, 0.0 or "no" must not pass for an assumption that holds
        object.__setattr__(self, "holds", check_bool("holds", self.holds))
        check_choice("on_failure", self.on_failure, ("invalid", "unproven"))

    def describe(self) -> str:
        return self.event.describe()


@dataclass(frozen=True)
class InvalidEvent(DpEvent):
    """The release is known *not* to meet any finite guarantee the book can state (ε = ∞).

    Attributes
    ----------
    reason : str
        Why no finite guarantee holds.
    claimed : DpEvent, optional
        The guarantee that was claimed.
    """

    reason: str
    claimed: DpEvent | None = None

    def __post_init__(self) -> None:
        check_str("reason", self.reason)
        if self.claimed is not None:
            _check_event("claimed", self.claimed)

    def describe(self) -> str:
        return self.reason


@dataclass(frozen=True)
class SelfComposedEvent(DpEvent):
    """``count`` adaptive repetitions of ``event`` (for example a user's κ tree nodes).

    Attributes
    ----------
    event : DpEvent
        The repeated release.
    count : int
        The number of repetitions.
    """

    event: DpEvent
    count: int

    def __post_init__(self) -> None:
        _check_event("event", self.event)
        check_positive_int("count", self.count)

    def describe(self) -> str:
        return f"{self.count} × {self.event.describe()}"


@dataclass(frozen=True)
class ComposedEvent(DpEvent):
    """Adaptive composition of several events.

    Attributes
    ----------
    events : tuple of DpEvent
        The composed releases.
    """

    events: tuple = field(default_factory=tuple)

    def __post_init__(self) -> None:
        check_instance("events", self.events, tuple, "a tuple of DpEvents")
        for i, e in enumerate(self.events):
            _check_event(f"events[{i}]", e)

    def describe(self) -> str:
        return " + ".join(e.describe() for e in self.events)


# The composition trees' folds (the accountant and the exact Gaussian profile both walk them)


def sum_over_releases(event: DpEvent, leaf: Callable[[DpEvent], float | None]) -> float | None:
    """Σ of ``leaf(e)`` over the leaves of a composition, when every leaf has a value (else None).

    zCDP's ρ and pure DP's ε both add up under (adaptive) composition ([BS16] Lemma 2.3;
    the basic composition theorem).
    """
    if isinstance(event, SelfComposedEvent):
        inner = sum_over_releases(event.event, leaf)
        return None if inner is None else event.count * inner
    if isinstance(event, ComposedEvent):
        parts = [sum_over_releases(e, leaf) for e in event.events]
        return None if any(p is None for p in parts) else float(sum(p for p in parts if p is not None))
    return leaf(event)


def gaussian_rho(event: DpEvent) -> float | None:
    """ρ of an event made only of Gaussian releases (None otherwise)."""
    return sum_over_releases(event, lambda e: e.rho if isinstance(e, GaussianEvent) else None)
