"""The accountant: privacy events in, (ε, δ) with a status out.

:func:`account` is the only place where a protocol's guarantee is computed.  It walks an
event tree (:mod:`fedbandit.accounting.events`) and

* composes Gaussian releases in zCDP ([BS16], Lemma 2.3) and converts with [CKS20];
* uses the RDP bound of sums of discrete Gaussians ([KLS21], Prop. 14) for
  :class:`~fedbandit.accounting.events.DiscreteGaussianSumEvent`, and the sampled Gaussian
  that dominates the Poisson-sampled sum ([MTZ19]; :mod:`fedbandit.accounting.sampled_ddg`)
  for :class:`~fedbandit.accounting.events.SampledDiscreteGaussianSumEvent`;
* certifies shuffled randomized response by the privacy-blanket bound;
* composes pure ε-DP releases by adding ε, and (ε, δ) releases by the better of basic
  and advanced composition ([DRV10]);
* takes a cited theorem's claim as given, subject to its validity conditions and to a
  necessary condition whose exact ε is a lower bound on the protocol's.

The status says how the guarantee is known: "verified" (computed here and at most the
target), "claimed" (by a cited theorem), "unproven" (no result covers the setting),
"invalid" (the target is not met, or a necessary assumption fails) or "none" (no privacy).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import cast

from fedbandit._validation import MAX_MAGNITUDE, check_delta, check_epsilon, check_str
from fedbandit.accounting.composed_gaussian import exact_gaussian_epsilon
from fedbandit.accounting.composition import advanced_composition
from fedbandit.accounting.ddg import RDP_ORDERS, ddg_delta2, ddg_epsilon, ddg_rdp
from fedbandit.accounting.deshuffle import DeshuffledGaussianEvent, deshuffled_event_epsilon
from fedbandit.accounting.events import (
    ApproxDpEvent,
    ClaimedEvent,
    ComposedEvent,
    ConditionalEvent,
    DiscreteGaussianSumEvent,
    DpEvent,
    InvalidEvent,
    LaplaceEvent,
    NonPrivateEvent,
    NoReleaseEvent,
    SampledDiscreteGaussianSumEvent,
    SelfComposedEvent,
    ShuffledRandomizedResponseEvent,
    check_relation,
    gaussian_rho,
    sum_over_releases,
)
from fedbandit.accounting.sampled_ddg import sampled_ddg_epsilon
from fedbandit.accounting.shuffle import rr_shuffle_delta
from fedbandit.accounting.zcdp import rdp_to_approx_dp, zcdp_to_approx_dp

__all__ = [
    "Accounting",
    "STATUSES",
    "account",
    "VERIFY_TOLERANCE",
]


#: How a guarantee is known (``Accounting.status``), from the best to the worst (module docstring).
STATUSES = ("verified", "claimed", "unproven", "invalid", "none")

#: A computed ε counts as meeting the target up to this relative tolerance (root finding).
VERIFY_TOLERANCE = 1e-6

_RANK = {"verified": 0, "claimed": 1, "unproven": 2, "invalid": 3, "none": 4}


@dataclass(frozen=True)
class Accounting:
    """What a protocol guarantees for its configured setting.

    Attributes
    ----------
    model : str
        The privacy model ("none", "central", "silo-LDP", "SDP", "distributed", ...).
    target_epsilon, target_delta : float
        The (ε, δ) the protocol was asked for (inf, 0 when not private).
    epsilon, delta : float
        The (ε, δ) actually achieved for the setting, as far as the book can tell.
    status : {"verified", "claimed", "unproven", "invalid", "none"}
        "verified": computed by the book's own accounting (:func:`account`);
        "claimed": holds by the cited theorem, which the book states but does not
        re-derive; "unproven": no result covers the setting (a theorem forced outside its
        validity region, or an idealized noise level) -- it may or may not be private;
        "invalid": the target is *not* met (a necessary condition fails, or the run relies
        on an assumption that does not hold); "none": no privacy.
    theorem : str
        Which result gives the guarantee.
    notes : str
    relation : {"add-remove", "replace"}
        The neighbouring relation the sensitivities were computed for.
    """

    model: str
    target_epsilon: float
    target_delta: float
    epsilon: float
    delta: float
    status: str
    theorem: str
    notes: str = ""
    relation: str = "add-remove"

    @property
    def private(self) -> bool:
        """True when the target (ε, δ) is met ("verified" or "claimed")."""
        return self.status in ("verified", "claimed")

    def as_dict(self) -> dict:
        return {
            "model": self.model,
            "target_epsilon": self.target_epsilon,
            "target_delta": self.target_delta,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "status": self.status,
            "private": self.private,
            "theorem": self.theorem,
            "notes": self.notes,
            "relation": self.relation,
        }


@dataclass(frozen=True)
class _Result:
    epsilon: float
    delta: float
    status: str
    notes: tuple = ()


def _worse(*statuses: str) -> str:
    return max(statuses, key=_RANK.__getitem__)


def _pure_epsilon(event: DpEvent) -> float | None:
    """ε of an event made only of pure-DP (Laplace) releases (None otherwise)."""
    return sum_over_releases(event, lambda e: e.sensitivity / e.scale if isinstance(e, LaplaceEvent) else None)


def necessary_lower_bound(event: DpEvent, delta: float) -> tuple[float, str]:
    """(ε, why) of a claim's necessary condition: an exact lower bound on the protocol's ε at δ.

    A composition of Gaussian releases: their exact profile ([BW18],
    :func:`exact_gaussian_epsilon`).  A
    :class:`~fedbandit.accounting.deshuffle.DeshuffledGaussianEvent`: the larger of the
    de-shuffling attack's exact ε on the adversary's worst data
    (:func:`~fedbandit.accounting.deshuffle.deshuffled_event_epsilon`; audited on the code by
    :func:`fedbandit.audit.deshuffle_audit`) and the exact ε of the messages' sum.
    """
    if not isinstance(event, DeshuffledGaussianEvent):
        lower = exact_gaussian_epsilon(event, delta)
        return lower, f"{event.describe()} alone is only ({lower:.3g}, δ)-DP (exact Gaussian profile [BW18])"
    eps, scenario, summed = deshuffled_event_epsilon(event, delta)
    if summed > eps:  # not NaN: the event carries the messages' sum
        assert event.summed is not None
        return summed, (f"{event.summed.describe()} (the sum of the shuffled messages) alone is only ({summed:.3g}, δ)-DP "
                        f"(exact Gaussian profile [BW18])")
    return eps, (f"the claimed σ₀={event.sigma0:.4g} is refuted in the worst case by de-shuffling: on data the adversary "
                 f"chooses ({scenario.label}) the target silo's message stands apart in the shuffled multiset, and the "
                 f"largest projection of the {event.n_messages} messages on it is only ({eps:.3g}, δ)-DP (exact; "
                 f"attacked on the code by fedbandit.audit.deshuffle_audit)")


def _compose_approx(results: list[_Result], delta_target: float) -> tuple[float, float]:
    """Compose (ε_i, δ_i) releases: basic composition, or advanced composition of k equal
    releases with δ' = the target δ left after kδ₀ ([DRV10]), whichever gives the smaller ε."""
    basic = (float(sum(r.epsilon for r in results)), float(sum(r.delta for r in results)))
    eps0 = {r.epsilon for r in results}
    d0 = {r.delta for r in results}
    k = len(results)
    if k > 1 and len(eps0) == 1 and len(d0) == 1:
        (e0,), (dd,) = eps0, d0
        slack = delta_target - k * dd
        if slack > 0 and e0 < 700:
            adv = advanced_composition(e0, dd, k, slack)
            if adv[0] < basic[0]:
                return adv
    return basic


def _analyze(event: DpEvent, delta: float, target_epsilon: float) -> _Result:
    if isinstance(event, NoReleaseEvent):
        return _Result(0.0, 0.0, "verified", (event.reason,))
    if isinstance(event, NonPrivateEvent):
        return _Result(math.inf, 0.0, "none", (event.describe(),))
    if isinstance(event, InvalidEvent):
        return _Result(math.inf, delta, "invalid", (event.reason,))
    if isinstance(event, ConditionalEvent):
        inner = _analyze(event.event, delta, target_epsilon)
        if event.holds:
            return inner
        return replace(inner, status=_worse(inner.status, event.on_failure), notes=inner.notes + (event.assumption,))
    rho = gaussian_rho(event)
    if rho is not None:
        # ρ beyond float range (a noise σ so small that (Δ/σ)² overflows): no finite guarantee
        eps = zcdp_to_approx_dp(rho, delta) if rho <= MAX_MAGNITUDE else math.inf
        return _Result(eps, delta, "verified")
    pure = _pure_epsilon(event)
    if pure is not None:
        return _Result(pure, 0.0, "verified")
    if isinstance(event, DiscreteGaussianSumEvent) or (
        isinstance(event, SelfComposedEvent) and isinstance(event.event, DiscreteGaussianSumEvent)
    ):
        steps = event.count if isinstance(event, SelfComposedEvent) else 1
        e = cast(DiscreteGaussianSumEvent, event.event if isinstance(event, SelfComposedEvent) else event)
        if e.sensitivity_factor == 1.0:
            eps = ddg_epsilon(e.sigma, c=e.clip, gamma=e.gamma, beta=e.beta, n=e.n_parties, d=e.dim, delta=delta,
                              steps=steps)
        else:
            delta2 = e.sensitivity_factor * ddg_delta2(e.clip, e.gamma, e.dim, e.beta)
            rdp = steps * ddg_rdp(RDP_ORDERS, delta2, e.sigma, e.gamma, e.n_parties, e.dim,
                                  delta1=math.sqrt(e.dim) * delta2)
            eps = rdp_to_approx_dp(RDP_ORDERS, rdp, delta)
        return _Result(eps, delta, "verified")
    if isinstance(event, SampledDiscreteGaussianSumEvent) or (
        isinstance(event, SelfComposedEvent) and isinstance(event.event, SampledDiscreteGaussianSumEvent)
    ):
        steps = event.count if isinstance(event, SelfComposedEvent) else 1
        se = cast(SampledDiscreteGaussianSumEvent, event.event if isinstance(event, SelfComposedEvent) else event)
        eps = sampled_ddg_epsilon(se.noise_std, delta2=ddg_delta2(se.clip, se.gamma, se.dim, se.beta), gamma=se.gamma,
                                  dim=se.dim, sampling_rate=se.sampling_rate, steps=steps, population=se.population,
                                  delta=delta, shares=se.shares)
        return _Result(eps, delta, "verified")
    if isinstance(event, ShuffledRandomizedResponseEvent):
        certified = rr_shuffle_delta(event.epsilon_message, event.n_messages, event.p) <= event.delta_message
        g = event.group_size
        eps = g * event.epsilon_message
        dlt = g * math.exp((g - 1) * event.epsilon_message) * event.delta_message
        note = () if certified else ("the privacy-blanket bound does not certify the per-message δ",)
        return _Result(eps, dlt, "verified" if certified else "invalid", note)
    if isinstance(event, ApproxDpEvent):
        return _Result(event.epsilon, event.delta, "verified")
    if isinstance(event, ClaimedEvent):
        notes = []
        status = "claimed"
        eps, dlt = event.epsilon, event.delta
        if event.necessary is not None:
            lower, why = necessary_lower_bound(event.necessary, delta)
            if lower > target_epsilon * (1 + 1e-9):
                return _Result(lower, delta, "invalid", (f"NOT private: {why} > ε={target_epsilon:g}",))
        failed = [c for c in event.conditions if not c.holds]
        if failed:
            status, eps = "unproven", math.nan
            notes.append("forced outside the theorem's validity region: " + "; ".join(str(c) for c in failed))
        elif event.unproven:
            status, eps = "unproven", math.nan
            notes.append(event.unproven)
        return _Result(eps, dlt, status, tuple(notes))
    if isinstance(event, (SelfComposedEvent, ComposedEvent)):
        parts = [event.event] * event.count if isinstance(event, SelfComposedEvent) else list(event.events)
        results = [_analyze(p, delta, target_epsilon) for p in parts]
        status = _worse(*(r.status for r in results))
        merged = tuple(dict.fromkeys(n for r in results for n in r.notes))
        if any(math.isnan(r.epsilon) for r in results):
            return _Result(math.nan, delta, status, merged)
        eps, dlt = _compose_approx(results, delta)
        return _Result(eps, dlt, status, merged)
    raise TypeError(f"the accountant does not know events of type {type(event).__name__}")


def _sound(res: _Result, private: bool) -> bool:
    """Whether a result's (ε, δ) can carry a privacy status: 0 ≤ δ ≤ 1, 0 ≤ ε, ε finite when private."""
    eps_ok = res.epsilon >= 0 and (math.isfinite(res.epsilon) or not private)
    return eps_ok and 0 <= res.delta <= 1


def account(
    event: DpEvent,
    *,
    target_epsilon: float | None = None,
    target_delta: float | None = None,
    model: str = "",
    relation: str = "add-remove",
    theorem: str = "",
    notes: str = "",
) -> Accounting:
    """Turn a privacy event into an :class:`Accounting` against a target (ε, δ).

    Parameters
    ----------
    event : DpEvent
        What was released over the whole run, for one user under ``relation``.
    target_epsilon, target_delta : float, optional
        The target; None for a non-private protocol (then ε = ∞ is not a failure).
    model : str
        The privacy model (trust assumption) the event is accounted in.
    relation : {"add-remove", "replace"}
    theorem, notes : str
        Text that says which result the protocol relies on; the accountant appends what
        it computed and why a status is not "verified".

    Returns
    -------
    Accounting
        ``epsilon`` at ``delta = target_delta``; status "verified" / "claimed" only if at
        most the target (relative tolerance :data:`VERIFY_TOLERANCE`), and never for an
        ε that is ∞, NaN or negative (status "invalid").
    """
    if not isinstance(event, DpEvent):
        raise TypeError(f"event must be a fedbandit.accounting.DpEvent, got {type(event).__name__}")
    relation = check_relation(relation)
    model, theorem, notes = check_str("model", model), check_str("theorem", theorem), check_str("notes", notes)
    private = target_epsilon is not None
    t_eps = check_epsilon("target_epsilon", target_epsilon) if private else math.inf
    t_delta = check_delta("target_delta", target_delta) if private else 0.0
    res = _analyze(event, t_delta if private else 1e-10, t_eps)
    status = res.status
    extra: tuple[str, ...] = ()
    exceeds = res.epsilon > t_eps * (1 + VERIFY_TOLERANCE) or res.delta > t_delta * (1 + VERIFY_TOLERANCE)
    if private and status in ("verified", "claimed", "invalid") and exceeds and math.isfinite(res.epsilon):
        status = "invalid"
        extra = (f"NOT ({t_eps:g}, {t_delta:g})-private: the accounting gives ({res.epsilon:.4g}, {res.delta:.3g})",)
    elif status in ("verified", "claimed") and not _sound(res, private):
        # never a privacy status from ε = ∞ (no finite guarantee), NaN or a negative value
        status = "invalid"
        extra = (f"no ({t_eps:g}, {t_delta:g}) guarantee: the accounting gives ({res.epsilon:.4g}, {res.delta:.3g})",)
    if not private and status != "none":
        status = "none" if res.epsilon == math.inf else status
    text = theorem or event.describe()
    return Accounting(
        model=model,
        target_epsilon=t_eps,
        target_delta=t_delta,
        epsilon=float(res.epsilon),
        delta=float(res.delta) if status != "none" else 0.0,
        status=status,
        theorem=text,
        notes="; ".join(x for x in (*extra, *res.notes, notes) if x),
        relation=relation,
    )
