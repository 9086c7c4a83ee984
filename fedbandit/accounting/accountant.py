"""accounting.accountant."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "Accounting",
    "STATUSES",
]


STATUSES = ("verified", "claimed", "unproven", "invalid", "none")


@dataclass(frozen=True)
class Accounting:
    """What a protocol guarantees for its configured setting.

    Attributes
    ----------
    model : str
        "none", "central", "silo-LDP" or "SDP".
    target_epsilon, target_delta : float
        The (ε, δ) the protocol was asked for (inf, 0 when not private).
    epsilon, delta : float
        The (ε, δ) actually achieved for the setting, as far as the book can tell.
    status : {"verified", "claimed", "unproven", "invalid", "none"}
        "verified": computed by the book's own accounting (:mod:`fedbandit.accounting.zcdp`);
        "claimed": holds by the cited theorem, which the book states but does not
        re-derive; "unproven": no result covers the setting (a theorem forced outside its
        validity region, or an idealized noise level) -- it may or may not be private;
        "invalid": the target is *not* met (a necessary condition fails, or the run relies
        on an accounting known to be wrong, such as ignoring the composition over tree
        nodes); "none": no privacy.
    theorem : str
        Which result gives the guarantee.
    notes : str
    """

    model: str
    target_epsilon: float
    target_delta: float
    epsilon: float
    delta: float
    status: str
    theorem: str
    notes: str = ""

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
        }
